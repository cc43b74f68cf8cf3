#!/usr/bin/env bash
# usage: tests/integration/gateway_ecmp.sh   (run as `gateway_test.sh ecmp`)
#
# Variant `ecmp` of gateway_test.sh: a tier of three vipd gateways behind a router
# that spreads the VIPs over them by ECMP (docs/gateway.md, "Several gateways
# behind ECMP"). One lab, built here on top of scripts/lab.sh's pods and switch:
#
#   ${P}client  eth0 10.1.0.2/24 and 10.1.0.10-41 (mh hashes the client address),
#               route 10.96.0.0/12 via 10.1.0.1
#               (IPv6: eth0 fd00:1::2/64, route fd00:96::/112 via fd00:1::1)
#     | veth
#   ${P}rt      c0 10.1.0.1/24; bridge br0 10.0.0.2/24 with g1 g2 g3 (veths to the
#               gateways); ip_forward 1, fib_multipath_hash_policy 1 (L4 hash);
#               IPv6: c0 fd00:1::1/64, br0 fd00:10::2/64, forwarding, L4 hash;
#               the router's daemon: FRR (zebra, bgpd with maximum-paths, bfdd)
#               when installed, else BIRD 2 (kernel protocol with merge paths);
#               AS 64513; BFD 200 ms x 5 with every gateway (100 ms x 3 flapped
#               on the loaded 2-core lab machine); the sessions run over IPv4
#               and carry IPv4 and IPv6 unicast (IPv6 next hops: the gateways'
#               --port-ipv6 addresses fd00:10::1N)
#     | br0
#   ${P}gwN     (N = 1..3) vipd dpdk, nat, scheduler mh, one worker (idle sleep),
#               ports c0 10.0.0.1N/24 via 10.0.0.2 and p0 10.244.0.1N/16
#               (af_packet), --exception-path tap --announce-table 100
#               --tcp-timeout 5 (60 in full NAT); full NAT also IPv6: --port-ipv6
#               'fd00:10::1N/64 via fd00:10::2,fd00:244::1N/64' --fnat-local-addrs6
#               fd00:244::ff:1N; BIRD 2 on vipd-0 (AS 64512, BFD, exports table 100:
#               its IPv4 routes, and its IPv6 routes with next hop address
#               fd00:10::1N); gw3 runs FRR instead (zebra ip import-table 100,
#               bgpd redistribute table 100, bfdd; IPv4 only: FRR 8.4 has no
#               `ipv6 import-table`) when FRR runs the router
#     | p0 -> ${P}sw's bridge (g1 g2 g3 beside pod1..pod4)
#   ${P}pod1..4 the seed pods; replies to 10.1.0.0/24 go back through the gateway
#               the connection last came through: each pod marks its connections
#               with the source MAC of their last incoming packet (iptables
#               CONNMARK) and routes replies by that mark (ip rule fwmark)
#
# Checks (PASS/FAIL lines, tests/integration/lib.sh):
#   gateways-start           the three vipds reach generation >= 1
#   bgp-established          the router's three sessions are Established
#   router-ecmp-nexthops     10.96.0.100/32 at the router with the 3 gateways as next hops
#   no-endpoints-not-announced  10.96.0.101 (no ready endpoint) is not at the router
#   flows-spread             300 new connections: every gateway schedules >= 10 %
#   mh-same-backend          48 fixed flows: `vipctl explain` on every gateway names
#                            the same backend, and the pod that answered is that one
#   drain-no-broken          vipctl drain on gw1 under load (24 keep-alive
#                            connections + new connections): the router drops gw1
#                            (measured), gw1's active connections reach 0, no
#                            connection broken, no request failed
#   kill9-failover-window    kill -9 of gw2 under new-connection load (0.5 s per
#                            request): the router drops gw2 (measured); requests
#                            fail only in a window (measured) of at most 4 s
#                            (D up to 2.8 s under load, BGP hold time 3 s)
#   kill9-established-survive  the keep-alive connections (those gw2 carried among
#                            them) all go on through gw1/gw3 (mh picks them up):
#                            none reset, every request answered within 8 s (the
#                            client with TCP keepalive probes, 1 s; the budget's
#                            reasoning at the step); the slow requests are listed
#                            (sent -> answered, from the kill)
#   gateway-join-no-broken   vipd on gw2 starts again under load: the router has 3
#                            next hops again (measured); no keep-alive connection
#                            broken, no request failed
#   fnat-drain-clean         the gateways restarted in full NAT (local address
#                            10.244.255.1N each) with --handover-peers (the
#                            others' p0 addresses); vipctl drain on gw1 under
#                            load: no keep-alive connection broken, no request
#                            failed, gw2/gw3 handed packets over and gw1 matched
#                            them (the hand-over path was used)
#   v6-vip-announced         (LAB_IPV6=1) the router learns db6 fd00:96::100/128 by
#                            BGP (kernel route of its daemon's protocol) with every
#                            BIRD-run gateway's fd00:10::1N as next hop (all three
#                            without FRR; gw1 gw2 when gw3 runs FRR), and not
#                            empty6 fd00:96::101 (no endpoints)
#   fnat6-drain-clean        the same over IPv6: 24 keep-alive connections to
#                            [fd00:96::100]:8080 (full NAT, local address
#                            fd00:244::ff:1N each), then vipctl drain on gw1: its
#                            IPv6 next hop leaves the router's route (BGP
#                            withdrawal, measured): no connection broken or
#                            failed, the others handed packets over and gw1
#                            matched them (IPv6 hand-over; the peers stay IPv4
#                            addresses)
#   fnat-kill9-measured      then (gw1 back), kill -9 of gw2 under the same load:
#                            the router drops gw2; reported: how many of the 24
#                            keep-alive connections break (those gw2 carried cannot
#                            move: their backends know them by gw2's local address)
#                            beside gw2's count, and the new-connection window
set -uo pipefail

NAME="gateway_test(ecmp)"
CHECKS=(gateways-start bgp-established router-ecmp-nexthops no-endpoints-not-announced
        flows-spread mh-same-backend drain-no-broken kill9-failover-window
        kill9-established-survive gateway-join-no-broken fnat-drain-clean v6-vip-announced fnat6-drain-clean
        fnat-kill9-measured)
SKIP_HINT="run as root with /dev/net/tun, iptables and BIRD 2 (apt-get install bird2; frr for the FRR router)"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_bird2
command -v iptables >/dev/null 2>&1 || skip_all "iptables is not installed (the pods' return routing)"
require_netns bridge
require_vipd
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun: DPDK's net_tap cannot create the exception interfaces"
FRR_DIR=/usr/lib/frr
ROUTER=${VIPD_ECMP_ROUTER:-frr}
if [ "$ROUTER" = frr ] && ! { [ -x $FRR_DIR/zebra ] && [ -x $FRR_DIR/bgpd ] && [ -x $FRR_DIR/bfdd ] &&
                              command -v vtysh >/dev/null 2>&1 && id frr >/dev/null 2>&1; }; then
  skip frr-router "FRR (zebra, bgpd, bfdd, vtysh; Debian frr) is not installed: the router runs BIRD 2 instead"
  ROUTER=bird
fi

# gw3 runs FRR instead of BIRD 2 where FRR is there (VIPD_ECMP_GW_FRR=0: BIRD on all).
declare -A GW_DAEMON=([1]=bird [2]=bird [3]=bird)
[ "$ROUTER" = frr ] && [ "${VIPD_ECMP_GW_FRR:-1}" != 0 ] && GW_DAEMON[3]=frr
export LAB_PREFIX="ve$$-"
# IPv6 for fnat6-drain-clean: the pods get their IPv6 addresses (scripts/lab.sh).
export LAB_IPV6=${VIPD_ECMP_IPV6:-1}
P=$LAB_PREFIX
TMP=$(mktemp -d /tmp/vipd-ecmp.XXXXXX)
GWS=(1 2 3)
EXTRA_NS=("${P}rt" "${P}gw1" "${P}gw2" "${P}gw3")
declare -A GW_PID=() GW_BIRD_PID=()
RT_PIDS=()
LOAD_PIDS=()
cleanup_extra() {
  local g p ns
  # VIPD_ECMP_KEEP=DIR: keep the daemons' logs and configurations there (debugging).
  [ -n "${VIPD_ECMP_KEEP:-}" ] && mkdir -p "$VIPD_ECMP_KEEP" && cp -r "$TMP"/. "$VIPD_ECMP_KEEP"/ 2>/dev/null
  if [ "$NFAIL" -gt 0 ]; then
    for g in "${GWS[@]}"; do
      [ -f "$TMP/gw$g.log" ] && { echo "--- tail of $TMP/gw$g.log"; tail -n 8 "$TMP/gw$g.log"; }
    done
    for p in "$TMP"/rt-*.log "$TMP"/frr/bgpd.log "$TMP"/frr-gw3/bgpd.log "$TMP"/gw1-bird.log; do
      [ -f "$p" ] && { echo "--- tail of $p"; tail -n 10 "$p"; }
    done
  fi
  for p in "${LOAD_PIDS[@]}" "${GW_BIRD_PID[@]}" "${RT_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for g in "${GWS[@]}"; do stop_pid "${GW_PID[$g]:-}"; done
  for ns in "${EXTRA_NS[@]}"; do
    [ -e "/run/netns/$ns" ] || continue
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  return 0
}
lib_traps
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
gwctl() { local g=$1; shift; "$VIPCTL" --socket "$TMP/gw$g.sock" "$@"; }
inns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
jf() { "$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], "?"))' "$1" "$2" 2>/dev/null; }
off() { inns "$1" ethtool -K "$2" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true; }
mac() { printf '02:ec:00:00:%02x:%02x' "$1" "$2"; }   # gateway N, port 1 (c0) or 2 (p0)

# ---- the lab: pods and switch from lab.sh, the rest here ----------------------------------
lab_up
topo() {
  local g n ns
  # lab.sh's client <-> lb and lb <-> switch links go; ${P}lb stays unused.
  ip -n "${P}lb" link del c0 && ip -n "${P}lb" link del p0 || return 1
  ip netns add "${P}rt" || return 1
  inns "${P}rt" sysctl -qw net.ipv6.conf.all.disable_ipv6=$((1 - LAB_IPV6)) \
    net.ipv6.conf.default.disable_ipv6=$((1 - LAB_IPV6)) \
    net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
    net.ipv4.ip_forward=1 net.ipv4.fib_multipath_hash_policy=1 >/dev/null || return 1
  ip -n "${P}rt" link set lo up
  ip -n "${P}client" link add name eth0 type veth peer name c0 netns "${P}rt" || return 1
  off "${P}client" eth0; off "${P}rt" c0
  ip -n "${P}client" addr add 10.1.0.2/24 dev eth0 && ip -n "${P}client" link set eth0 up &&
    ip -n "${P}client" route add 10.96.0.0/12 via 10.1.0.1 dev eth0 || return 1
  for n in $(seq 10 41); do ip -n "${P}client" addr add "10.1.0.$n/24" dev eth0 || return 1; done
  if [ "$LAB_IPV6" = 1 ]; then   # quiet and immediate: no DAD, RA or RS (as scripts/lab.sh)
    inns "${P}rt" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
      net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0 \
      net.ipv6.conf.all.router_solicitations=0 net.ipv6.conf.default.router_solicitations=0 \
      net.ipv6.conf.all.forwarding=1 net.ipv6.fib_multipath_hash_policy=1 >/dev/null || return 1
    ip -n "${P}client" addr add fd00:1::2/64 dev eth0 nodad &&
      ip -n "${P}client" -6 route add fd00:96::/112 via fd00:1::1 dev eth0 || return 1
  fi
  ip -n "${P}rt" addr add 10.1.0.1/24 dev c0 && ip -n "${P}rt" link set c0 up || return 1
  ip -n "${P}rt" link add name br0 type bridge stp_state 0 forward_delay 0 &&
    ip -n "${P}rt" addr add 10.0.0.2/24 dev br0 && ip -n "${P}rt" link set br0 up || return 1
  if [ "$LAB_IPV6" = 1 ]; then
    ip -n "${P}rt" addr add fd00:1::1/64 dev c0 nodad && ip -n "${P}rt" addr add fd00:10::2/64 dev br0 nodad || return 1
  fi
  for g in "${GWS[@]}"; do
    ns=${P}gw$g
    ip netns add "$ns" || return 1
    inns "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 \
      net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 >/dev/null || return 1
    ip -n "$ns" link set lo up
    ip -n "${P}rt" link add name "g$g" type veth peer name c0 netns "$ns" || return 1
    ip -n "${P}sw" link add name "g$g" type veth peer name p0 netns "$ns" || return 1
    ip -n "$ns" link set c0 address "$(mac "$g" 1)" && ip -n "$ns" link set p0 address "$(mac "$g" 2)" || return 1
    off "${P}rt" "g$g"; off "${P}sw" "g$g"; off "$ns" c0; off "$ns" p0
    ip -n "${P}rt" link set "g$g" master br0 && ip -n "${P}rt" link set "g$g" up &&
      ip -n "${P}sw" link set "g$g" master br0 && ip -n "${P}sw" link set "g$g" up &&
      ip -n "$ns" link set c0 up && ip -n "$ns" link set p0 up || return 1
  done
  # The pods: replies to the clients through the gateway of the connection's last packet.
  for n in 1 2 3 4; do
    ns=${P}pod$n
    ip -n "$ns" route add 10.1.0.0/24 via 10.244.0.11 dev eth0 || return 1
    for g in "${GWS[@]}"; do
      ip -n "$ns" route add 10.1.0.0/24 via "10.244.0.1$g" dev eth0 table $((100 + g)) &&
        ip -n "$ns" rule add fwmark "$g" table $((100 + g)) &&
        inns "$ns" iptables -t mangle -A PREROUTING -m mac --mac-source "$(mac "$g" 2)" \
          -j CONNMARK --set-mark "$g" || return 1
    done
    inns "$ns" iptables -t mangle -A OUTPUT -j CONNMARK --restore-mark || return 1
  done
}
if ! topo >"$TMP/topo.log" 2>&1; then
  fail gateways-start "could not build the ECMP topology: $(tail -n 3 "$TMP/topo.log" | tr '\n' ' ')"
  exit 1
fi
mkdir -p "$TMP/manifests"
cp config/demo/manifests/*.yaml "$TMP/manifests/"

FWD=nat
V6=0   # full NAT: 1 when the IPv6 Service is there (fnat6-drain-clean)
GW_TCP_TIMEOUT=5   # full NAT: 60 (see there)
start_gw() {
  local g=$1 fnat=()
  # Full NAT: each gateway's local address, and the others as hand-over peers.
  [ "$FWD" = fnat ] && fnat=(--fnat-local-addrs "10.244.255.1$g"
                             --handover-peers "$(for x in "${GWS[@]}"; do [ "$x" != "$g" ] && echo "10.244.0.1$x"; done | paste -sd,)")
  [ "$FWD" = fnat ] && [ "$V6" = 1 ] && fnat+=(--port-ipv6 "fd00:10::1$g/64 via fd00:10::2,fd00:244::1$g/64"
                                               --fnat-local-addrs6 "fd00:244::ff:1$g")
  ip netns exec "${P}gw$g" "$VIPD" --mode dpdk --forward-method "$FWD" "${fnat[@]}" --scheduler mh \
    --port "net_af_packet0,iface=c0 10.0.0.1$g/24 via 10.0.0.2" \
    --port "net_af_packet1,iface=p0 10.244.0.1$g/16" \
    --main-lcore 0 --worker-lcores 1 --worker-idle-sleep-us 200 \
    --conn-table-size 16384 --tcp-timeout "$GW_TCP_TIMEOUT" \
    --manifests-dir "$TMP/manifests" --admin-socket "$TMP/gw$g.sock" \
    --metrics-address off --health-address off \
    --exception-path tap --announce-table 100 \
    "--eal-args=--no-huge -m 128 --no-shconf --file-prefix ${P}gw$g" \
    </dev/null >>"$TMP/gw$g.log" 2>&1 &
  GW_PID[$g]=$!
}
gw_gen() { local st; st=$(gwctl "$1" status --json 2>/dev/null) && generation_of "$st"; }
wait_gw() {   # 0 once gateway $1 has generation >= 1 (up to 30 s)
  local g=$1 x _
  for _ in $(seq 1 300); do
    kill -0 "${GW_PID[$g]}" 2>/dev/null || return 1
    x=$(gw_gen "$g") && [ -n "$x" ] && [ "$x" -ge 1 ] && return 0
    sleep 0.1
  done
  return 1
}
for g in "${GWS[@]}"; do start_gw "$g"; done
bad=
for g in "${GWS[@]}"; do wait_gw "$g" || bad="$bad gw$g($(tail -n 2 "$TMP/gw$g.log" | tr '\n' ' '))"; done
if [ -z "$bad" ]; then
  pass gateways-start
else
  fail gateways-start "no generation >= 1 within 30 s:$bad"
  exit 1
fi

# ---- the gateways' routing daemons: BIRD 2 (FRR on gw3 when installed) ----------------------
chmod 755 "$TMP"
# frr_start NS DIR DAEMON ARGS...: an FRR daemon in namespace NS, in the foreground, with
# its configuration DIR/DAEMON.conf, pid file, zserv socket and vty sockets in DIR.
frr_start() {
  local ns=$1 dir=$2 d=$3; shift 3
  ip netns exec "$ns" "$FRR_DIR/$d" -f "$dir/$d.conf" -i "$dir/$d.pid" \
    -z "$dir/zserv.api" --vty_socket "$dir" -P 0 --log "file:$dir/$d.log" "$@" \
    >"$dir/$d.out" 2>&1 &
  RT_PIDS+=($!)
  disown $!
}
frr_bfdd_conf() {
  printf '%s\n' "hostname $1" "bfd" " profile fast" "  detect-multiplier 5" "  receive-interval 200" \
    "  transmit-interval 200" " !" "!"
}
frr_up() {   # NS DIR BGPD_LISTEN: zebra, bfdd, bgpd
  chown -R frr:frr "$2"
  frr_start "$1" "$2" zebra
  for _ in $(seq 1 50); do [ -S "$2/zserv.api" ] && break; sleep 0.1; done
  frr_start "$1" "$2" bfdd --bfdctl "$2/bfdd.sock"
  frr_start "$1" "$2" bgpd -l "$3"
}
for g in "${GWS[@]}"; do
  if [ "${GW_DAEMON[$g]}" = frr ]; then
    d=$TMP/frr-gw$g
    mkdir -p "$d"
    printf '%s\n' "hostname gw$g" "ip import-table 100" >"$d/zebra.conf"
    frr_bfdd_conf "gw$g" >"$d/bfdd.conf"
    printf '%s\n' "frr defaults traditional" "hostname gw$g" "router bgp 64512" \
      " bgp router-id 10.0.0.1$g" " bgp log-neighbor-changes" " no bgp ebgp-requires-policy" \
      " timers bgp 1 3" " neighbor 10.0.0.2 remote-as 64513" " neighbor 10.0.0.2 timers connect 1" \
      " neighbor 10.0.0.2 advertisement-interval 0" " neighbor 10.0.0.2 bfd profile fast" \
      " address-family ipv4 unicast" "  redistribute table 100 route-map vips" " exit-address-family" \
      "route-map vips permit 10" " set origin igp" >"$d/bgpd.conf"
    frr_up "${P}gw$g" "$d" "10.0.0.1$g"
    continue
  fi
  cat >"$TMP/gw$g-bird.conf" <<EOF_GW
log "$TMP/gw$g-bird.log" all;
router id 10.0.0.1$g;
protocol device { scan time 10; }
ipv4 table vips;
ipv6 table vips6;
protocol bfd { interface "vipd-0" { interval 200 ms; multiplier 5; }; }
protocol kernel vipd_vips {
  kernel table 100;            # --announce-table 100
  learn;
  scan time 10;
  ipv4 { table vips; import all; export none; };
}
protocol kernel vipd_vips6 {
  kernel table 100;            # the IPv6 VIPs, same table
  learn;
  scan time 10;
  ipv6 { table vips6; import all; export none; };
}
protocol bgp uplink {
  local 10.0.0.1$g as 64512;   # the port address, on vipd-0
  neighbor 10.0.0.2 as 64513;
  bfd on;
  hold time 3; keepalive time 1;
  connect delay time 1; connect retry time 2; error wait time 1, 5;
  ipv4 { table vips; import none; export all; next hop self; };
  ipv6 { table vips6; import none; export all; next hop address fd00:10::1$g; };   # --port-ipv6
}
EOF_GW
  if ! out=$("$BIRD" -p -c "$TMP/gw$g-bird.conf" 2>&1); then
    fail bgp-established "BIRD rejects $TMP/gw$g-bird.conf: $out"; exit 1
  fi
  ip netns exec "${P}gw$g" "$BIRD" -f -c "$TMP/gw$g-bird.conf" -s "$TMP/gw$g-bird.ctl" \
    -P "$TMP/gw$g-bird.pid" >"$TMP/gw$g-bird.out" 2>&1 &
  GW_BIRD_PID[$g]=$!
  disown "${GW_BIRD_PID[$g]}"
done

# ---- the router: FRR or BIRD 2 -------------------------------------------------------------
if [ "$ROUTER" = frr ]; then
  RT_PROTO=bgp
  mkdir -p "$TMP/frr"
  cat >"$TMP/frr/zebra.conf" <<'EOF_Z'
hostname rt
EOF_Z
  frr_bfdd_conf rt >"$TMP/frr/bfdd.conf"
  {
    echo "frr defaults traditional"
    echo "hostname rt"
    echo "router bgp 64513"
    echo " bgp router-id 10.0.0.2"
    echo " bgp log-neighbor-changes"
    echo " no bgp ebgp-requires-policy"
    echo " timers bgp 1 3"
    echo " neighbor GW peer-group"
    echo " neighbor GW remote-as 64512"
    echo " neighbor GW timers connect 1"
    echo " neighbor GW advertisement-interval 0"
    echo " neighbor GW bfd profile fast"
    echo " neighbor GW route-map none out"
    for g in "${GWS[@]}"; do echo " neighbor 10.0.0.1$g peer-group GW"; done
    echo " address-family ipv4 unicast"
    echo "  maximum-paths 8"
    echo " exit-address-family"
    echo " address-family ipv6 unicast"
    echo "  neighbor GW activate"
    echo "  neighbor GW route-map none out"
    echo "  maximum-paths 8"
    echo " exit-address-family"
    echo "route-map none deny 10"
  } >"$TMP/frr/bgpd.conf"
  frr_up "${P}rt" "$TMP/frr" 10.0.0.2
  rtc() { vtysh --vty_socket "$TMP/frr" -c "$*" 2>&1; }
  # Established sessions at the router (count).
  rt_sessions() {
    rtc show bgp ipv4 unicast summary json | "$PYTHON" -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    print(0); sys.exit()
print(sum(1 for p in d.get("peers", {}).values() if p.get("state") == "Established"))'
  }
  rt_state() { rtc show bgp ipv4 unicast summary | grep -E '^10\.0\.0\.' | tr -s ' \n' ' '; }
  rt_show_vip() { rtc show bgp ipv4 unicast 10.96.0.100/32; }
  rt_bfd() { rtc show bfd peers brief | awk '$3 ~ /^10\.0\.0\.1/ {print $3 "=" $NF}' | tr '\n' ' '; }
else
  RT_PROTO=bird
  {
    echo "log \"$TMP/rt-bird.log\" all;"
    echo "router id 10.0.0.2;"
    echo "protocol device { scan time 10; }"
    echo 'protocol bfd { interface "br0" { interval 200 ms; multiplier 5; }; }'
    echo "protocol kernel { merge paths on; ipv4 { import none; export all; }; }"
    echo "protocol kernel { merge paths on; ipv6 { import none; export all; }; }"
    echo "template bgp gws {"
    echo "  local 10.0.0.2 as 64513; bfd on;"
    echo "  hold time 3; keepalive time 1;"
    echo "  connect delay time 1; connect retry time 2; error wait time 1, 5;"
    echo "  ipv4 { import all; export none; };"
    echo "  ipv6 { import all; export none; };"
    echo "}"
    for g in "${GWS[@]}"; do echo "protocol bgp gw$g from gws { neighbor 10.0.0.1$g as 64512; }"; done
  } >"$TMP/rt-bird.conf"
  if ! out=$("$BIRD" -p -c "$TMP/rt-bird.conf" 2>&1); then
    fail bgp-established "BIRD rejects $TMP/rt-bird.conf: $out"; exit 1
  fi
  ip netns exec "${P}rt" "$BIRD" -f -c "$TMP/rt-bird.conf" -s "$TMP/rt-bird.ctl" \
    -P "$TMP/rt-bird.pid" >"$TMP/rt-bird.out" 2>&1 &
  RT_PIDS+=($!)
  disown $!
  rtc() { "$BIRDC" -s "$TMP/rt-bird.ctl" "$@" 2>&1; }
  rt_sessions() { rtc show protocols | awk '$1 ~ /^gw[0-9]$/ && /Established/' | wc -l; }
  rt_state() { rtc show protocols | awk '$1 ~ /^gw[0-9]$/' | tr -s ' \n' ' '; }
  rt_show_vip() { rtc show route 10.96.0.100/32 all; }
  rt_bfd() { rtc show bfd sessions | awk '$1 ~ /^10\.0\.0\./ {print $1 "=" $3}' | tr '\n' ' '; }
fi
note "router daemon: $ROUTER; gateways: gw1 ${GW_DAEMON[1]}, gw2 ${GW_DAEMON[2]}, gw3 ${GW_DAEMON[3]}"

# Next hops (gateway numbers, sorted, space-separated) of VIP (IPv4 or IPv6) in the
# router's kernel table, routes of its daemon only.
rt_nh() {
  if [[ $1 == *:* ]]; then
    ip -n "${P}rt" -6 route show "$1/128" proto "$RT_PROTO" 2>/dev/null |
      grep -oE 'via fd00:10::1[0-9]' | sed 's/.*fd00:10::1//' | sort -u | tr '\n' ' ' | sed 's/ $//'
  else
    ip -n "${P}rt" -4 route show "$1/32" proto "$RT_PROTO" 2>/dev/null |
      grep -oE 'via 10\.0\.0\.1[0-9]' | sed 's/.*10\.0\.0\.1//' | sort -u | tr '\n' ' ' | sed 's/ $//'
  fi
}
# Polls every 50 ms until rt_nh VIP equals WANT; prints ms since T0, or "timeout".
# NH_STATES: every next-hop set seen on the way, with its time ("1 2 3@0ms -> 1 3@380ms").
wait_nh() {
  local vip=$1 want=$2 t0=$3 limit_ms=$4 cur last=none
  NH_STATES=
  while :; do
    cur=$(rt_nh "$vip")
    if [ "$cur" != "$last" ]; then
      NH_STATES="${NH_STATES:+$NH_STATES -> }[${cur:-none}]@$(( $(now_ms) - t0 ))ms"; last=$cur
      echo "$NH_STATES" >"$TMP/nh_states"
    fi
    [ "$cur" = "$want" ] && { echo $(( $(now_ms) - t0 )); return 0; }
    [ $(( $(now_ms) - t0 )) -gt "$limit_ms" ] && { echo timeout; return 1; }
    sleep 0.05
  done
}

t0=$(now_ms)
n=0
for _ in $(seq 1 150); do
  n=$(rt_sessions)
  [ "$n" = 3 ] && break
  sleep 0.2
done
if [ "$n" = 3 ]; then
  pass bgp-established
  note "3 sessions Established $(( $(now_ms) - t0 )) ms after the daemons started"
else
  fail bgp-established "want 3 Established sessions at the router within 30 s, have $n: $(rt_state)"
  exit 1
fi

# ---- what the router learns ---------------------------------------------------------------
ms=$(wait_nh 10.96.0.100 "1 2 3" "$(now_ms)" 10000)
k=$(ip -n "${P}rt" -4 route show 10.96.0.100/32 | tr -s ' \n' ' ')
note "router: 10.96.0.100/32 '$k' (after $ms ms)"
if [ "$ms" != timeout ]; then
  pass router-ecmp-nexthops
else
  fail router-ecmp-nexthops "want 10.96.0.100/32 via 10.0.0.11, .12, .13: '$k'; sessions: $(rt_state); router's view: $(rt_show_vip | tr -s ' \n' ' ')"
fi
k=$(ip -n "${P}rt" -4 route show 10.96.0.101/32)
if [ -z "$k" ] && [ -n "$(rt_nh 10.96.0.100)" ]; then
  pass no-endpoints-not-announced
else
  fail no-endpoints-not-announced "10.96.0.101 (no endpoints) reached the router: '$k'"
fi

# ---- spread and agreement ------------------------------------------------------------------
new_flows() { gwctl "$1" stats --json 2>/dev/null | "$PYTHON" -c '
import json, sys
try:
    print(sum(w.get("new_flows", 0) for w in json.load(sys.stdin)["workers"]))
except (ValueError, KeyError):
    print(-1)'; }
declare -A NF0=()
for g in "${GWS[@]}"; do NF0[$g]=$(new_flows "$g"); done
r=$(client http http://10.96.0.100:8080/ --count 300 --timeout 3 --max-time 60)
spread= low=
for g in "${GWS[@]}"; do
  d=$(( $(new_flows "$g") - NF0[$g] ))
  spread="$spread gw$g=$d"
  [ "$d" -ge 30 ] || low=1
done
note "300 new connections through the router:$spread; client: $r"
why=$(judge "$r" 'r["ok"] == 300')
if [ -z "$low" ] && [ -z "$why" ]; then
  pass flows-spread
else
  fail flows-spread "want 300 ok and >= 30 new flows on each gateway:$spread; client: $r"
fi

explain_backend() {   # gateway, client IP:port -> backend IP
  gwctl "$1" explain tcp "$2" 10.96.0.100:8080 --json 2>/dev/null |
    "$PYTHON" -c 'import json,sys
try: print((json.load(sys.stdin).get("backend") or "none").rsplit(":", 1)[0])
except ValueError: print("error")'
}
declare -A POD_OF=([10.244.1.15]=pod1 [10.244.2.88]=pod2 [10.244.3.12]=pod3 [10.244.3.44]=pod4)
FIRST=41000 NFLOWS=48
declare -A WANT=()
disagree=
SRCS=$(seq -s, -f '10.1.0.%g' 10 41)
for i in $(seq 0 $((NFLOWS - 1))); do
  p=10.1.0.$((10 + i % 32)):$((FIRST + i))
  b1=$(explain_backend 1 "$p"); b2=$(explain_backend 2 "$p"); b3=$(explain_backend 3 "$p")
  if [ "$b1" != "$b2" ] || [ "$b1" != "$b3" ] || [ -z "${POD_OF[$b1]:-}" ]; then
    disagree="$disagree $p:$b1/$b2/$b3"
  fi
  WANT[$p]=${POD_OF[$b1]:-none}
done
r=$(ip netns exec "${P}client" "$PYTHON" scripts/lab/flowprobe.py ports 10.96.0.100:8080 \
      --src "$SRCS" --first $FIRST --count $NFLOWS)
wrong=$("$PYTHON" -c '
import json, sys
r = json.loads(sys.argv[1]); want = dict(a.split("=") for a in sys.argv[2:])
bad = [p + ":" + r["pods"].get(p, "failed") + "!=" + w for p, w in want.items() if r["pods"].get(p) != w]
print(" ".join(bad))' "$r" $(for p in "${!WANT[@]}"; do echo "$p=${WANT[$p]}"; done) 2>&1)
pods_seen=$("$PYTHON" -c 'import collections,json,sys; print(dict(sorted(collections.Counter(json.loads(sys.argv[1])["pods"].values()).items())))' "$r" 2>/dev/null)
note "$NFLOWS fixed flows (10.1.0.10-41, ports $FIRST..): explain agrees on all 3 gateways for $((NFLOWS - $(wc -w <<<"$disagree")))/$NFLOWS; pods seen $pods_seen"
if [ -z "$disagree" ] && [ -z "$wrong" ] && [ "$(jf "$r" ok)" = "$NFLOWS" ] &&
   [ "$("$PYTHON" -c 'import json,sys; print(len(set(json.loads(sys.argv[1])["pods"].values())))' "$r" 2>/dev/null)" -ge 3 ]; then
  pass mh-same-backend
else
  fail mh-same-backend "want $NFLOWS ok over >= 3 pods, each on the backend all gateways name: gateways disagree (flow:gw1/gw2/gw3):${disagree:- none}; observed pod != predicted: ${wrong:-none}; $r"
fi

# ---- load helpers ---------------------------------------------------------------------------
# start_load TAG CONNS REQ_TIMEOUT [TARGET]: keep-alive connections and a new-connection
# loop (IPv4 only: flowprobe.py) to TARGET (default 10.96.0.100:8080) in the background
# until $TMP/TAG.stop exists; stop_load TAG waits for both results.
# KA_TIMEOUT: the keep-alive requests' timeout. The client serves its connections in turn,
# so each stuck one holds up the others that long.
KA_TIMEOUT=5
KA_OPTS=   # more client keepalive options (the kill step: --tcp-keepalive 1)
start_load() {
  local tag=$1 target=${4:-10.96.0.100:8080}
  rm -f "$TMP/$tag.stop" "$TMP/$tag.mark"
  client keepalive "$target" --conns "$2" --interval 0.05 --timeout "$KA_TIMEOUT" --max-time 90 $KA_OPTS \
    --stop "$TMP/$tag.stop" --mark "$TMP/$tag.mark" --until-after-mark 2 >"$TMP/$tag.ka" 2>&1 &
  LOAD_PIDS+=($!); KA_PID=$! NL_PID=
  if [[ $target != \[* ]]; then
    ip netns exec "${P}client" "$PYTHON" scripts/lab/flowprobe.py load "$target" \
      --stop "$TMP/$tag.stop" --timeout "$3" --interval 0.01 --max-time 90 >"$TMP/$tag.load" 2>&1 &
    LOAD_PIDS+=($!); NL_PID=$!
  fi
  for _ in $(seq 1 50); do grep -q '^open' "$TMP/$tag.ka" 2>/dev/null && break; sleep 0.1; done
}
# The keep-alive client stops once every connection has 2 answers after the mark.
stop_load() {
  local tag=$1 _
  touch "$TMP/$tag.mark"
  for _ in $(seq 1 150); do kill -0 "$KA_PID" 2>/dev/null || break; sleep 0.1; done
  touch "$TMP/$tag.stop"
  wait "$KA_PID" ${NL_PID:+"$NL_PID"} 2>/dev/null
  LOAD_PIDS=()
  KA=$(grep '^{' "$TMP/$tag.ka" | tail -n 1 | "$PYTHON" -c 'import json,sys
try: d=json.load(sys.stdin); d.pop("per_conn", None); print(json.dumps(d))
except ValueError: print("{}")')
  NL=$(grep '^{' "$TMP/$tag.load" 2>/dev/null | tail -n 1)
  [ -n "$NL" ] || NL='{}'
}
active_conns() { gwctl "$1" list --json 2>/dev/null | "$PYTHON" -c '
import json, sys
try:
    print(sum(b.get("active_conns", 0) for s in json.load(sys.stdin)["services"] for b in s["backends"]))
except (ValueError, KeyError):
    print(-1)'; }

# ---- drain gw1 -------------------------------------------------------------------------------
start_load drain 24 2
sleep 1
t0=$(now_ms)
out=$(gwctl 1 drain 2>&1); rc=$?
ms=$(wait_nh 10.96.0.100 "2 3" "$t0" 5000)
ac=-1 t_zero=timeout
while [ $(( $(now_ms) - t0 )) -le 15000 ]; do
  ac=$(active_conns 1)
  [ "$ac" = 0 ] && { t_zero=$(( $(now_ms) - t0 )); break; }
  sleep 0.2
done
conns=$(json_field "$(gwctl 1 drain --json 2>/dev/null)" connections 2>/dev/null)
stop_load drain
note "drain gw1: withdrawn at the router after $ms ms; gw1 active connections 0 after $t_zero ms (all entries incl. TIME_WAIT: ${conns:-?}); keep-alive $KA; new connections $(jf "$NL" ok) ok, $(jf "$NL" failed) failed"
if [ "$rc" = 0 ] && [ "$ms" != timeout ] && [ "$t_zero" != timeout ] &&
   [ "$(jf "$KA" broken_conns)" = 0 ] && [ "$(jf "$KA" failed)" = 0 ] && [ "$(jf "$KA" conns)" = 24 ] &&
   [ "$(jf "$NL" failed)" = 0 ] && [ "$(jf "$NL" ok)" != 0 ]; then
  pass drain-no-broken
else
  fail drain-no-broken "want drain rc 0 ($rc: $(tr '\n' ' ' <<<"$out")), gw1 off the router ($ms), its active connections 0 ($t_zero, last $ac), nothing broken or failed: keep-alive $KA; new $NL"
fi
gwctl 1 undrain >/dev/null 2>&1
ms=$(wait_nh 10.96.0.100 "1 2 3" "$(now_ms)" 5000)
note "undrain gw1: back at the router after $ms ms"

# ---- kill -9 of gw2 under load ------------------------------------------------------------
# How a keep-alive connection that gw2 carried gets through the kill: gw2 is gone from the
# router's route once BFD (200 ms x 5) declares it down and bgpd/zebra withdraw it: D =
# 0.9-1.1 s on a quiet machine, up to 2.8 s measured under load (docs/reliability.md);
# until then the router keeps sending the flow to the dead gateway. Afterwards the next
# packet from the client reaches gw1 or gw3, which schedules it with mh (same backend, new
# entry), and the pod then routes its replies through that gateway (connection mark).
# Nothing but a packet from the client moves the flow, so a request in flight at the kill
# waits on TCP's retransmission backoff (RTO 200 ms doubling: about 0.2 0.6 1.4 3.0 6.2 s
# after it was sent):
#  - its request lost with gw2: the client's first retransmission after D goes through;
#  - its answer lost with gw2, the request acknowledged before: the client sends nothing
#    more (it waits), the pod retransmits into gw2 for ever; only a TCP keepalive probe
#    from the client (--tcp-keepalive 1: one a second of silence) moves the flow; the
#    pod's next retransmission after that goes through. Without the probes such a
#    connection hangs until the client gives up (seen: 1 of 24 after 9 s, when the pod
#    acknowledged the request at once and answered it a few ms later, after the kill).
#    That is the NAT return path's limit (docs/gateway.md), not the gateways';
#  - its answer lost with the request unacknowledged: the client's retransmission after D,
#    then the pod's next one.
# Worst case the pod's first retransmission after the client's first packet after D:
# 6.2 s for D up to 3 s (measured: answered at most 2.2 s after the kill, 24 kills). The
# next step, 12.6 s, needs D over 3 s: BFD missed, the 3 s BGP hold time. KA_TIMEOUT 8
# leaves 1.8 s of timer slack under load and stays under the pods' 10 s idle limit (the
# serial client holds the other connections that long). A connection reset, or one not
# answered within 8 s, fails the check; each request slower than 0.5 s is listed
# (connection, sent -> answered, ms from the kill).
# ka_stalls TAG TK_MS: the keep-alive requests of load TAG slower than 0.5 s, each as
# "cN +SENT->+DONE ms" (N the connection, times from the kill at TK_MS; "failed" when
# unanswered within KA_TIMEOUT); then " max +DONE ms" (the last answer through the
# failover, after the kill). Empty when none.
ka_stalls() {
  grep '^{' "$TMP/$1.ka" | tail -n 1 | "$PYTHON" -c '
import json, sys
try:
    r = json.load(sys.stdin)
except ValueError:
    sys.exit()
tk = int(sys.argv[1]) / 1000.0 - r.get("t0_unix", 0)
out, last = [], None
for i, c in enumerate(r.get("per_conn", [])):
    for sent, lat, ok in c.get("slow", []):
        done = round(1000 * (sent + lat - tk))
        out.append("c%d +%d->+%d ms%s" % (i, round(1000 * (sent - tk)), done, "" if ok else " failed"))
        last = done if ok and (last is None or done > last) else last
print(", ".join(out) + ("" if last is None else "; max +%d ms" % last))' "$2" 2>/dev/null
}
# kill_gw2 TAG: kill -9 of gw2 under load TAG (24 keep-alive connections, new connections
# with 0.5 s each); sets on2 (gw2's active connections before), tk, ms (route gone at the
# router, or timeout), KA and NL (the loads' results), nfail wfirst wlast (the failed new
# connections and their window after the kill) and STALLS (ka_stalls); prints notes.
kill_gw2() {
  local tag=$1 bfd win
  KA_TIMEOUT=8 KA_OPTS="--tcp-keepalive 1" start_load "$tag" 24 0.5
  sleep 1.5
  on2=$(active_conns 2)
  bfd=$(rt_bfd)
  tk=$(now_ms)
  kill -KILL "${GW_PID[2]}" 2>/dev/null
  # The route first, then the process: under CPU load the killed vipd took 10-90 s to
  # exit (its ports' teardown), which delayed the measurement when it waited first.
  ms=$(wait_nh 10.96.0.100 "1 3" "$tk" 5000)
  { wait "${GW_PID[2]}"; } 2>/dev/null
  GW_PID[2]=
  note "router's next hops after the kill: $(cat "$TMP/nh_states"); BFD before: $bfd; gw2's vipd exited after $(( $(now_ms) - tk )) ms"
  sleep 3
  stop_load "$tag"
  win=$("$PYTHON" -c '
import json, sys
r = json.loads(sys.argv[1]); tk = int(sys.argv[2]) / 1000.0
ft = [t - tk for t in r.get("fail_times", [])]
after = [t for t in ft if t >= -0.6]
print("%d %d %d" % (len(ft), round(1000 * min(after)) if after else 0, round(1000 * (max(after) + 0.5)) if after else 0))' "$NL" "$tk" 2>/dev/null)
  read -r nfail wfirst wlast <<<"${win:-? ? ?}"
  STALLS=$(ka_stalls "$tag" "$tk")
  note "kill -9 gw2 (it carried $on2 active connections): route gone at the router after $ms ms; new connections $(jf "$NL" ok) ok, $nfail failed (0.5 s each), failures from $wfirst ms to $wlast ms after the kill; keep-alive requests over 0.5 s (sent->answered, from the kill): ${STALLS:-none}; keep-alive $KA"
}
# VIPD_ECMP_KILL_REPEAT=N (measuring only): N more kills of gw2 first, each after gw2
# came back, for the failover time distribution (docs/reliability.md).
retrans() {
  local ns
  for ns in client pod1 pod2 pod3 pod4; do
    inns "$P$ns" nstat -asz TcpRetransSegs | awk '$1 == "TcpRetransSegs" {printf "%s ", $2}'
  done
}
for i in $(seq 1 "${VIPD_ECMP_KILL_REPEAT:-0}"); do
  rt0=$(retrans); kill_gw2 "rep$i"; rt1=$(retrans)
  note "repeat $i: route gone $ms ms; stalls: ${STALLS:-none}; retransmissions client/pods $rt0 -> $rt1; broken $(jf "$KA" broken_conns)"
  start_gw 2; wait_gw 2; wait_nh 10.96.0.100 "1 2 3" "$(now_ms)" 20000 >/dev/null; sleep 2
done
kill_gw2 kill
# The window: D plus the last failed request's 0.5 s; D measured up to 2.8 s under load
# (window 3.2 s), and the 3 s BGP hold time ends it where BFD misses: at most 4 s.
if [ "$ms" != timeout ] && [ "$nfail" != "?" ] && [ "${wlast:-0}" -le 4000 ] && [ "$(jf "$NL" ok)" != 0 ] &&
   [ "$("$PYTHON" -c 'import json,sys; r=json.loads(sys.argv[1]); print(len(r.get("fail_times",[])) == r.get("failed"))' "$NL")" = True ]; then
  pass kill9-failover-window
else
  fail kill9-failover-window "want the route gone ($ms) and failures only within 4 s of the kill: $nfail failed, window $wfirst..$wlast ms; $NL"
fi
if [ "$(jf "$KA" broken_conns)" = 0 ] && [ "$(jf "$KA" conns)" = 24 ] && [ "$(jf "$KA" conns_one_pod)" = 24 ] &&
   [ "$on2" -gt 0 ] 2>/dev/null; then
  pass kill9-established-survive
  note "keep-alive requests through the failover (sent -> answered, ms from the kill; 8 s each): ${STALLS:-none over 0.5 s}"
else
  fail kill9-established-survive "want all 24 keep-alive connections (gw2 had $on2 active) unbroken, each request answered within 8 s (sent -> answered, ms from the kill: ${STALLS:-none over 0.5 s}): $KA"
fi

# ---- gw2 joins again under load ------------------------------------------------------------
start_load join 24 2
sleep 1
tj=$(now_ms)
start_gw 2
wait_gw 2 || note "gw2 did not come back: $(tail -n 2 "$TMP/gw2.log" | tr '\n' ' ')"
ms=$(wait_nh 10.96.0.100 "1 2 3" "$tj" 20000)
sleep 2
on2=$(active_conns 2)
stop_load join
note "gw2 started again: 3 next hops at the router after $ms ms (gw2 then had $on2 active connections); keep-alive $KA; new connections $(jf "$NL" ok) ok, $(jf "$NL" failed) failed"
if [ "$ms" != timeout ] && [ "$(jf "$KA" broken_conns)" = 0 ] && [ "$(jf "$KA" failed)" = 0 ] &&
   [ "$(jf "$KA" conns)" = 24 ] && [ "$(jf "$KA" conns_one_pod)" = 24 ] &&
   [ "$(jf "$NL" failed)" = 0 ] && [ "$(jf "$NL" ok)" != 0 ]; then
  pass gateway-join-no-broken
else
  fail gateway-join-no-broken "want gw2 back at the router ($ms) and nothing broken or failed: keep-alive $KA; new $NL"
fi

# ---- full NAT: what drain and kill -9 of a gateway break ------------------------------------
for g in "${GWS[@]}"; do stop_pid "${GW_PID[$g]}"; GW_PID[$g]=; done
FWD=fnat
# IPv6 (v6-vip-announced, fnat6-drain-clean): db6 fd00:96::100 over the pods' IPv6
# addresses, announced by the gateways like the IPv4 VIPs.
if [ "$LAB_IPV6" != 1 ]; then
  skip v6-vip-announced "VIPD_ECMP_IPV6=0: the lab has no IPv6"
  skip fnat6-drain-clean "VIPD_ECMP_IPV6=0: the lab has no IPv6"
elif ! why=$(kernel_v6_manifests); then
  skip v6-vip-announced "$why"
  skip fnat6-drain-clean "$why"
else
  V6=1
fi
# The gateways whose daemon exports IPv6 routes of table 100: BIRD's (FRR 8.4's zebra
# imports IPv4 routes of another table only).
V6_GWS=$(for g in "${GWS[@]}"; do [ "${GW_DAEMON[$g]}" = bird ] && echo "$g"; done | paste -sd' ')
V6_GWS_DRAINED=$(tr ' ' '\n' <<<"$V6_GWS" | grep -vx 1 | paste -sd' ')
# The kill -9 below leaves the keep-alive client stuck on each of gw2's connections (their
# packets are handed over and held nowhere: no RST) for KA_TIMEOUT in turn; the others must
# not idle out of the gateways' tables meanwhile (--tcp-timeout 5 would).
GW_TCP_TIMEOUT=60
for g in "${GWS[@]}"; do start_gw "$g"; done
bad=
for g in "${GWS[@]}"; do wait_gw "$g" || bad="$bad gw$g"; done
ms=$(wait_nh 10.96.0.100 "1 2 3" "$(now_ms)" 20000)
note "full NAT: gateways restarted (failed:${bad:- none}); 3 next hops after $ms ms"

# ---- IPv6 VIP learnt by BGP ---------------------------------------------------------------
if [ "$V6" = 1 ]; then
  ms=$(wait_nh fd00:96::100 "$V6_GWS" "$(now_ms)" 10000)
  k=$(ip -n "${P}rt" -6 route show fd00:96::100/128 | tr -s ' \n\t' ' ')
  e=$(ip -n "${P}rt" -6 route show fd00:96::101/128)
  note "router: fd00:96::100/128 '$k' ($ms ms after the IPv4 VIP's 3 next hops); gateways exporting IPv6: $V6_GWS"
  if [ "$ms" != timeout ] && [ -z "$e" ]; then
    pass v6-vip-announced
  else
    fail v6-vip-announced "want fd00:96::100/128 proto $RT_PROTO via fd00:10::1N for N in '$V6_GWS' ($ms; have '$k'; states $(cat "$TMP/nh_states")) and no fd00:96::101 ('$e')"
  fi
fi

# ---- full NAT: drain gw1, its flows handed over by gw2/gw3 -----------------------------------
handover() {   # gateway, field (sent, matched, not_held, rate_limited): summed over its workers
  gwctl "$1" stats --json 2>/dev/null | "$PYTHON" -c '
import json, sys
try:
    print(sum(w.get("handover", {}).get(sys.argv[1], 0) for w in json.load(sys.stdin)["workers"]))
except (ValueError, KeyError):
    print(-1)' "$2"; }
start_load fdrain 24 2
sleep 1
on1=$(active_conns 1)
t0=$(now_ms)
out=$(gwctl 1 drain 2>&1); rc=$?
ms=$(wait_nh 10.96.0.100 "2 3" "$t0" 5000)
sleep 2
stop_load fdrain
sent=$(( $(handover 2 sent) + $(handover 3 sent) ))
matched=$(handover 1 matched)
nh=$(( $(handover 2 not_held) + $(handover 3 not_held) ))
rl=$(( $(handover 2 rate_limited) + $(handover 3 rate_limited) ))
note "full NAT, drain gw1 (it carried $on1 active connections): withdrawn at the router after $ms ms; hand-over: gw2+gw3 sent $sent, gw1 matched $matched, gw2+gw3 not held $nh, rate limited $rl; keep-alive $KA; new connections $(jf "$NL" ok) ok, $(jf "$NL" failed) failed"
if [ "$rc" = 0 ] && [ "$ms" != timeout ] && [ "$(jf "$KA" broken_conns)" = 0 ] && [ "$(jf "$KA" failed)" = 0 ] &&
   [ "$(jf "$KA" conns)" = 24 ] && [ "$(jf "$NL" failed)" = 0 ] && [ "$(jf "$NL" ok)" != 0 ] &&
   [ "$sent" -gt 0 ] && [ "$matched" -gt 0 ]; then
  pass fnat-drain-clean
else
  fail fnat-drain-clean "want drain rc 0 ($rc: $(tr '\n' ' ' <<<"$out")), gw1 off the router ($ms), nothing broken or failed and hand-over used (sent $sent, matched $matched): keep-alive $KA; new $NL"
fi
gwctl 1 undrain >/dev/null 2>&1
ms=$(wait_nh 10.96.0.100 "1 2 3" "$(now_ms)" 5000)
note "undrain gw1: back at the router after $ms ms"

# ---- full NAT over IPv6: drain gw1, its flows handed over -----------------------------------
if [ "$V6" = 1 ]; then
  sent0=$(( $(handover 2 sent) + $(handover 3 sent) )) matched0=$(handover 1 matched)
  nh0=$(( $(handover 2 not_held) + $(handover 3 not_held) ))
  start_load fdrain6 24 2 "[fd00:96::100]:8080"
  sleep 1
  on1=$(active_conns 1)
  t0=$(now_ms)
  out=$(gwctl 1 drain 2>&1); rc=$?
  ms=$(wait_nh fd00:96::100 "$V6_GWS_DRAINED" "$t0" 5000)
  sleep 2
  stop_load fdrain6
  gwctl 1 undrain >/dev/null 2>&1
  sent=$(( $(handover 2 sent) + $(handover 3 sent) - sent0 ))
  matched=$(( $(handover 1 matched) - matched0 ))
  nh=$(( $(handover 2 not_held) + $(handover 3 not_held) - nh0 ))
  note "full NAT, IPv6, drain gw1 (it carried $on1 active connections, both families): fd00:96::100 withdrawn at the router after $ms ms; hand-over: gw2+gw3 sent $sent, gw1 matched $matched, gw2+gw3 not held $nh; keep-alive $KA"
  if [ "$rc" = 0 ] && [ "$ms" != timeout ] && [ "$(jf "$KA" broken_conns)" = 0 ] && [ "$(jf "$KA" failed)" = 0 ] &&
     [ "$(jf "$KA" conns)" = 24 ] && [ "$sent" -gt 0 ] && [ "$matched" -gt 0 ]; then
    pass fnat6-drain-clean
  else
    fail fnat6-drain-clean "want drain rc 0 ($rc: $(tr '\n' ' ' <<<"$out")), gw1 off the router's IPv6 route ($ms; states $(cat "$TMP/nh_states")), nothing broken or failed and hand-over used (sent $sent, matched $matched): keep-alive $KA"
  fi
  ms=$(wait_nh 10.96.0.100 "1 2 3" "$(now_ms)" 5000)
  note "undrain gw1: back at the router after $ms ms"
fi
KA_TIMEOUT=0.6   # gw2 carries 7-13: at most ~8 s stuck in all, under the pods' 10 s idle limit
start_load fnat 24 0.5
sleep 1.5
on2=$(active_conns 2)
tk=$(now_ms)
kill -KILL "${GW_PID[2]}" 2>/dev/null
{ wait "${GW_PID[2]}"; } 2>/dev/null
GW_PID[2]=
ms=$(wait_nh 10.96.0.100 "1 3" "$tk" 5000)
states=$(cat "$TMP/nh_states")
sleep 3
stop_load fnat
win=$("$PYTHON" -c '
import json, sys
r = json.loads(sys.argv[1]); tk = int(sys.argv[2]) / 1000.0
after = [t - tk for t in r.get("fail_times", []) if t - tk >= -0.6]
print("%d %d %d" % (len(r.get("fail_times", [])), round(1000 * min(after)) if after else 0, round(1000 * (max(after) + 0.5)) if after else 0))' "$NL" "$tk" 2>/dev/null)
read -r nfail wfirst wlast <<<"${win:-? ? ?}"
br=$(jf "$KA" broken_conns)
note "full NAT, kill -9: hand-over on gw1+gw3: sent $(( $(handover 1 sent) + $(handover 3 sent) )), matched $(( $(handover 1 matched) + $(handover 3 matched) )), not held $(( $(handover 1 not_held) + $(handover 3 not_held) )) (counted since the fnat start)"
note "full NAT, kill -9 gw2 (it carried $on2 active connections): router's next hops $states; keep-alive connections broken: $br of 24; new connections $(jf "$NL" ok) ok, $nfail failed, from $wfirst ms to $wlast ms after the kill; keep-alive $KA"
if [ -z "$bad" ] && [ "$ms" != timeout ] && [ "$(jf "$KA" conns)" = 24 ] && [ "$br" -ge 0 ] 2>/dev/null; then
  pass fnat-kill9-measured
else
  fail fnat-kill9-measured "want the gateways back in full NAT (failed:${bad:- none}), the route gone ($ms) and a keep-alive result: $KA"
fi
