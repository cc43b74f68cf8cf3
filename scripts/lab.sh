#!/usr/bin/env bash
# usage: scripts/lab.sh up [--vm]|down|status|kill-pod N|start-pod N
#
# Builds (up) or removes (down) vipd's network-namespace test lab. Every
# namespace name starts with $LAB_PREFIX (default "vipd-"), so labs with
# different prefixes can run side by side. Nothing is configured in the root
# namespace: veth pairs are created directly inside the lab namespaces.
#
#   ${P}client  eth0 10.0.0.2/24, route 10.96.0.0/12 via 10.0.0.1 (nothing else off-link)
#        | veth
#   ${P}lb      c0, p0: up, NO addresses (vipd's DPDK af_packet ports), ip_forward 0
#        | veth (p0 <-> up)
#   ${P}sw      bridge br0 (stp off, forward delay 0): up, pod1..pod4
#        | veth x4
#   ${P}pod1..4 eth0 10.244.1.15/16 10.244.2.88/16 10.244.3.12/16 10.244.3.44/16,
#               route 10.0.0.0/24 via 10.244.0.1; podserver.py on TCP 8080 / UDP 9053
#
# Offloads (tx/rx checksum, TSO, GSO, GRO) are off on both ends of every veth
# and IPv6 is disabled in every lab namespace, unless LAB_IPV6=1 (default 0):
# then client, lb and the pods keep IPv6 (no DAD: "nodad", accept_dad 0; no
# router advertisements) and get ULA addresses beside the IPv4 ones:
#   ${P}client  eth0 fd00:10::2/64, route fd00:96::/112 via fd00:10::1
#   ${P}lb      (nothing: the kernel modes' lab_kernel_lb gives c0 fd00:10::1/64,
#               p0 fd00:244::1/64; dpdk mode answers for those addresses itself)
#   ${P}pod1..4 eth0 fd00:244::1:15/64 fd00:244::2:88/64 fd00:244::3:12/64
#               fd00:244::3:44/64, route fd00:10::/64 via fd00:244::1;
#               podserver.py --ipv6 (also on [::]:8080 TCP / [::]:9053 UDP)
#   ${P}far     (IPv6 only) an off-link IPv6 client behind ${P}client, which
#               routes for it (IPv6 forwarding on, IPv4 off): far eth0
#               fd00:20::2/64, route fd00::/8 via fd00:20::1 (client far0);
#               client eth0 also has the fixed link-local fe80::2, the pods
#               route fd00:20::/64 via fd00:244::1 (for dpdk `--port-ipv6
#               'fd00:10::1/64 via fe80::2'` or `via fd00:10::2`)
# The switch bridges IPv6 frames without an IPv6 stack of its own. Service VIPs
# for IPv6 are in fd00:96::/112. The root namespace gets nothing either way.
#
#   up           tear down any old lab with this prefix, then build it and start the pods
#   up --vm      the same, but a VM takes the lb namespace's place (scripts/vm-test.sh):
#                client's eth0 and the switch's "up" port are persistent tap devices
#                (multi_queue, vnet_hdr) instead of veths to ${P}lb; the VM's two NICs
#                attach to them (scripts/kernel-vm.sh --nic ${P}client:eth0:Q
#                --nic ${P}sw:up:Q) and qemu runs in the empty ${P}lb namespace
#   down         kill every process in the lab namespaces, delete them (idempotent)
#   status       show namespaces, links, addresses and pod servers; exit 0 if fully up
#   kill-pod N   stop podN's server (the pod keeps its address; connections get RST)
#   start-pod N  start podN's server again
set -euo pipefail

usage() {
  echo "usage: scripts/lab.sh up [--vm]|down|status|kill-pod N|start-pod N   (env LAB_PREFIX, default 'vipd-')" >&2
  exit 2
}

P=${LAB_PREFIX:-vipd-}
if ! [[ $P =~ ^[A-Za-z0-9_.-]{1,32}$ ]]; then
  echo "lab: LAB_PREFIX '$P' must be 1-32 characters of [A-Za-z0-9_.-]" >&2
  exit 2
fi
LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lab
STATE=/run/vipd-lab/$P
PODS=(1 2 3 4)
POD_IP=([1]=10.244.1.15 [2]=10.244.2.88 [3]=10.244.3.12 [4]=10.244.3.44)
POD_IP6=([1]=fd00:244::1:15 [2]=fd00:244::2:88 [3]=fd00:244::3:12 [4]=fd00:244::3:44)
LAB_IPV6=${LAB_IPV6:-0}
if ! [[ $LAB_IPV6 =~ ^[01]$ ]]; then
  echo "lab: LAB_IPV6 must be 0 or 1, got '$LAB_IPV6'" >&2
  exit 2
fi
NAMESPACES=("${P}client" "${P}lb" "${P}sw" "${P}pod1" "${P}pod2" "${P}pod3" "${P}pod4")
# The off-link IPv6 client exists in IPv6 labs only (also found by down/status
# of a lab that was brought up with IPv6).
if [ "$LAB_IPV6" -eq 1 ] || [ -f "$STATE/ipv6" ]; then NAMESPACES+=("${P}far"); fi
# The distribution's python3 (standard library only) unless PYTHON is set.
if [ -z "${PYTHON:-}" ]; then if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi; fi
LAUNCHED=()

log() { echo "lab: $*"; }
die() { echo "lab: error: $*" >&2; exit 1; }

need_root() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces)"
  command -v ip >/dev/null || die "'ip' (iproute2) not found; run scripts/bootstrap.sh"
}

ns_exists() { [ -e "/run/netns/$1" ]; }
inns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

# Turn off checksum/segmentation/receive offloads; features a driver refuses
# to change are ignored.
offloads_off() {
  inns "$1" ethtool -K "$2" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
}

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# Kills the given pids: TERM, up to ~3 s grace, then KILL.
kill_pids() {
  local pids=("$@") p alive _
  [ "${#pids[@]}" -eq 0 ] && return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 30); do
    alive=0
    for p in "${pids[@]}"; do pid_alive "$p" && alive=1; done
    [ "$alive" -eq 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

pod_pid() {
  local f=$STATE/pod$1.pid pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f" 2>/dev/null) || return 1
  pid_alive "$pid" || return 1
  grep -q podserver.py "/proc/$pid/cmdline" 2>/dev/null || return 1
  echo "$pid"
}

check_pod_arg() {
  [[ ${1:-} =~ ^[1-4]$ ]] || { echo "lab: pod number must be 1..4" >&2; usage; }
  ns_exists "${P}pod$1" || die "namespace ${P}pod$1 does not exist (run: scripts/lab.sh up)"
}

# Launches podN's server in the background (no wait). Returns 1 if it was
# already running.
launch_pod() {
  local n=$1 pid
  if pid=$(pod_pid "$n"); then
    log "pod$n server already running (pid $pid)"
    return 1
  fi
  mkdir -p "$STATE"
  rm -f "$STATE/pod$n.pid"
  local IPV6_ARGS=()
  # The lab's IPv6 switch is remembered, so start-pod brings the pod back the same way.
  if [ "$LAB_IPV6" -eq 1 ] || [ -f "$STATE/ipv6" ]; then IPV6_ARGS=(--ipv6); fi
  ip netns exec "${P}pod$n" "$PYTHON" "$LAB_DIR/podserver.py" --name "pod$n" \
    --http-port 8080 --udp-port 9053 ${IPV6_ARGS[@]+"${IPV6_ARGS[@]}"} --pidfile "$STATE/pod$n.pid" \
    </dev/null >>"$STATE/pod$n.log" 2>&1 &
  LAUNCHED[n]=$!
}

# Waits (up to 10 s) until podN's pid file appears: both sockets are bound.
wait_pod() {
  local n=$1 pid _
  for _ in $(seq 1 200); do
    if pid=$(pod_pid "$n"); then
      log "pod$n server ready (pid $pid, ${POD_IP[$n]}$([ ! -f "$STATE/ipv6" ] || echo " ${POD_IP6[$n]}"): tcp 8080, udp 9053)"
      return 0
    fi
    # Launched process gone without a pid file: it failed to start.
    if [ -n "${LAUNCHED[$n]:-}" ] && ! pid_alive "${LAUNCHED[$n]}"; then
      pod_pid "$n" >/dev/null && continue
      break
    fi
    sleep 0.05
  done
  echo "lab: pod$n server log:" >&2
  tail -n 20 "$STATE/pod$n.log" >&2 || true
  die "pod$n server did not become ready (exited, or not ready within 10 s)"
}

start_pod() {
  if launch_pod "$1"; then wait_pod "$1"; fi
}

kill_pod() {
  local n=$1 pid pids=()
  if pid=$(pod_pid "$n"); then pids+=("$pid"); fi
  # Also any stray server in that namespace (e.g. pid file lost).
  for pid in $(ip netns pids "${P}pod$n" 2>/dev/null); do
    grep -q podserver.py "/proc/$pid/cmdline" 2>/dev/null && pids+=("$pid")
  done
  if [ "${#pids[@]}" -eq 0 ]; then
    log "pod$n server not running"
  else
    # shellcheck disable=SC2046
    kill_pids $(printf '%s\n' "${pids[@]}" | sort -u)
    log "pod$n server stopped"
  fi
  rm -f "$STATE/pod$n.pid"
}

cmd_down() {
  need_root
  local ns found=() pids=()
  for ns in "${NAMESPACES[@]}"; do
    ns_exists "$ns" || continue
    found+=("$ns")
    # shellcheck disable=SC2207
    pids+=($(ip netns pids "$ns" 2>/dev/null || true))
  done
  # Every process still inside a lab namespace (pod servers, vipd, clients).
  [ "${#pids[@]}" -gt 0 ] && kill_pids "${pids[@]}"
  for ns in "${found[@]}"; do
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$STATE"
  rmdir /run/vipd-lab 2>/dev/null || true
  if [ "${#found[@]}" -gt 0 ]; then log "down (prefix '$P')"; else log "nothing to remove (prefix '$P')"; fi
}

UP_DONE=0
on_up_exit() {
  local rc=$?
  trap - EXIT INT TERM ERR
  [ "$UP_DONE" -eq 1 ] && exit "$rc"
  echo "lab: error: 'up' did not complete (exit $rc); tearing the lab down" >&2
  set +e
  cmd_down >&2
  exit 1
}

cmd_up() {
  need_root
  command -v ethtool >/dev/null || die "'ethtool' not found; run scripts/bootstrap.sh"
  command -v "$PYTHON" >/dev/null || die "'$PYTHON' not found; run scripts/bootstrap.sh"
  cmd_down >/dev/null
  set -E
  trap 'echo "lab: error: command failed at line $LINENO" >&2' ERR
  trap on_up_exit EXIT
  trap 'exit 130' INT TERM
  mkdir -p "$STATE"
  [ "$LAB_IPV6" -eq 0 ] || : >"$STATE/ipv6"

  local ns n
  for ns in "${NAMESPACES[@]}"; do
    ip netns add "$ns"
    if [ "$LAB_IPV6" -eq 1 ] && [ "$ns" != "${P}sw" ] && [ "$ns" != "${P}lb" ]; then
      # IPv6 on, but quiet and immediate: no DAD, no router advertisements or solicitations.
      inns "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0 \
        net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
        net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0 \
        net.ipv6.conf.all.router_solicitations=0 net.ipv6.conf.default.router_solicitations=0 >/dev/null
    else
      inns "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 >/dev/null
    fi
    inns "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 >/dev/null
    ip -n "$ns" link set dev lo up
  done
  inns "${P}lb" sysctl -qw net.ipv4.ip_forward=0 >/dev/null
  # Bridged frames must not be seen by (empty) netfilter chains in the switch.
  inns "${P}sw" sysctl -qw net.bridge.bridge-nf-call-iptables=0 >/dev/null 2>&1 || true

  # Links are created inside lab namespaces only; none ever exists in root.
  if [ "$VM" -eq 1 ]; then
    # A VM stands in for the lb namespace: taps for its NICs, no veths to lb.
    ip -n "${P}client" tuntap add dev eth0 mode tap multi_queue vnet_hdr
    ip -n "${P}sw" tuntap add dev up mode tap multi_queue vnet_hdr
  else
    ip -n "${P}client" link add name eth0 type veth peer name c0 netns "${P}lb"
    ip -n "${P}lb" link add name p0 type veth peer name up netns "${P}sw"
  fi
  ip -n "${P}sw" link add name br0 type bridge stp_state 0 forward_delay 0
  ip -n "${P}sw" link set dev br0 up
  ip -n "${P}sw" link set dev up master br0
  for n in "${PODS[@]}"; do
    ip -n "${P}sw" link add name "pod$n" type veth peer name eth0 netns "${P}pod$n"
    ip -n "${P}sw" link set dev "pod$n" master br0
  done

  offloads_off "${P}client" eth0
  if [ "$VM" -eq 0 ]; then
    offloads_off "${P}lb" c0
    offloads_off "${P}lb" p0
  fi
  offloads_off "${P}sw" up
  for n in "${PODS[@]}"; do
    offloads_off "${P}sw" "pod$n"
    offloads_off "${P}pod$n" eth0
  done

  # client
  ip -n "${P}client" addr add 10.0.0.2/24 dev eth0
  ip -n "${P}client" link set dev eth0 up
  ip -n "${P}client" route add 10.96.0.0/12 via 10.0.0.1 dev eth0
  if [ "$LAB_IPV6" -eq 1 ]; then
    ip -n "${P}client" addr add fd00:10::2/64 dev eth0 nodad
    ip -n "${P}client" -6 route add fd00:96::/112 via fd00:10::1 dev eth0
    # The router of the off-link client: IPv6 forwarding only, ULA routes only.
    ip -n "${P}client" addr add fe80::2/64 dev eth0 nodad
    ip -n "${P}client" link add name far0 type veth peer name eth0 netns "${P}far"
    offloads_off "${P}client" far0
    offloads_off "${P}far" eth0
    inns "${P}client" sysctl -qw net.ipv6.conf.all.forwarding=1 >/dev/null
    ip -n "${P}client" addr add fd00:20::1/64 dev far0 nodad
    ip -n "${P}client" link set dev far0 up
    ip -n "${P}far" addr add fd00:20::2/64 dev eth0 nodad
    ip -n "${P}far" link set dev eth0 up
    ip -n "${P}far" -6 route add fd00::/8 via fd00:20::1 dev eth0
  fi
  # lb: interfaces up, no addresses (vipd owns them through DPDK af_packet)
  if [ "$VM" -eq 0 ]; then
    ip -n "${P}lb" link set dev c0 up
    ip -n "${P}lb" link set dev p0 up
  fi
  # switch
  ip -n "${P}sw" link set dev up up
  for n in "${PODS[@]}"; do
    ip -n "${P}sw" link set dev "pod$n" up
    ip -n "${P}pod$n" addr add "${POD_IP[$n]}/16" dev eth0
    ip -n "${P}pod$n" link set dev eth0 up
    ip -n "${P}pod$n" route add 10.0.0.0/24 via 10.244.0.1 dev eth0
    if [ "$LAB_IPV6" -eq 1 ]; then
      ip -n "${P}pod$n" addr add "${POD_IP6[$n]}/64" dev eth0 nodad
      ip -n "${P}pod$n" -6 route add fd00:10::/64 via fd00:244::1 dev eth0
      ip -n "${P}pod$n" -6 route add fd00:20::/64 via fd00:244::1 dev eth0
    fi
  done
  log "namespaces up: ${NAMESPACES[*]}$([ "$LAB_IPV6" -eq 0 ] || echo " (with IPv6)")"
  [ "$VM" -eq 0 ] || log "--vm: taps ${P}client/eth0 and ${P}sw/up wait for the VM's NICs; ${P}lb is empty"

  for n in "${PODS[@]}"; do launch_pod "$n" || true; done
  for n in "${PODS[@]}"; do wait_pod "$n"; done
  trap - ERR
  set +E
  UP_DONE=1
  log "up (prefix '$P'; state in $STATE)"
}

cmd_status() {
  need_root
  local ns n pid missing=0 down=0 pids
  for ns in "${NAMESPACES[@]}"; do
    if ! ns_exists "$ns"; then
      echo "== $ns: missing"
      missing=$((missing + 1))
      continue
    fi
    echo "== $ns"
    ip -n "$ns" -br addr show | { grep -v '^lo ' || true; } | sed 's/^/   /'
    case $ns in
      "${P}client"|"${P}pod"*|"${P}far")
        ip -n "$ns" route show | sed 's/^/   route: /'
        [ ! -f "$STATE/ipv6" ] || ip -n "$ns" -6 route show | { grep -v '^fe80::/64\|^multicast' || true; } | sed 's/^/   route: /' ;;
    esac
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    for pid in $pids; do
      printf '   pid %s: %s\n' "$pid" "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-150)"
    done
  done
  if [ "$missing" -eq "${#NAMESPACES[@]}" ]; then
    log "down (prefix '$P')"
    return 1
  fi
  for n in "${PODS[@]}"; do
    if pid=$(pod_pid "$n"); then echo "pod$n server: running (pid $pid)"; else echo "pod$n server: stopped"; down=$((down + 1)); fi
  done
  if [ "$missing" -eq 0 ] && [ "$down" -eq 0 ]; then
    log "up (prefix '$P')"
    return 0
  fi
  log "partial (prefix '$P': $missing namespaces missing, $down pod servers stopped)"
  return 1
}

VM=0
[ $# -ge 1 ] || usage
case $1 in
  up) case $# in 1) ;; 2) [ "$2" = --vm ] || usage; VM=1 ;; *) usage ;; esac; cmd_up ;;
  down) [ $# -eq 1 ] || usage; cmd_down ;;
  status) [ $# -eq 1 ] || usage; cmd_status ;;
  kill-pod) [ $# -eq 2 ] || usage; need_root; check_pod_arg "$2"; kill_pod "$2" ;;
  start-pod) [ $# -eq 2 ] || usage; need_root; check_pod_arg "$2"; start_pod "$2" ;;
  -h|--help|help) usage ;;
  *) usage ;;
esac
