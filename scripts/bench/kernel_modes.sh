#!/usr/bin/env bash
# usage: scripts/bench/kernel_modes.sh OUT.jsonl [--services "10 10000"] [--seconds S]
#                                      [--procs P] [--modes "dpdk iptables nftables"]
#                                      [--iptables legacy|default]
# Benchmark 3b (docs/benchmarks.md, section 3): the first-packet cost of each
# mode as services grow. New TCP connections per second from the lab's client
# through vipd (fnat) to the four lab pods, with vipd in dpdk mode, in
# iptables mode and in nftables mode, for each number of services. Every service has the four pods
# as endpoints; the client connects round robin to up to 16 VIPs spread evenly
# over the whole list (so iptables walks half of VIPD-SERVICES on average, as a
# real mix of services would), closing each connection with a RST
# (scripts/bench/conn_rate.py). One JSON line per (mode, services) to OUT.
# --iptables legacy (the default when iptables-legacy is installed): vipd's
# iptables mode runs iptables-legacy(-save/-restore) (a PATH shim in a temp
# dir), because the nf_tables iptables-restore of this machine needs minutes
# for 10k services, longer than vipd's command timeout (section 3a).
# Env: BENCH_BUILD_DIR (default build-bench): vipd and vipctl from there.
#
# Safety: a private lab (scripts/lab.sh, LAB_PREFIX vkb<pid>-): dpdk mode uses
# the lb namespace's veths through af_packet; iptables mode programs netfilter
# inside the lb namespace only (addresses, forwarding and the service route
# there, as tests/integration/iptables_test.sh does). The root namespace gets
# nothing. Every loop is bounded; the lab and vipd are removed on exit (trap).
# Exit 77 when it cannot run here (not root, no namespaces).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${1:?usage: scripts/bench/kernel_modes.sh OUT.jsonl [--services LIST] [--seconds S] [--procs P] [--modes LIST]}
shift
SERVICES="10 10000" DUR=5 PROCS=2 MODES="dpdk iptables nftables" IPTV=legacy
command -v iptables-legacy-restore >/dev/null 2>&1 || IPTV=default
while [ $# -gt 0 ]; do
  case $1 in
    --services) SERVICES=$2; shift ;;
    --seconds) DUR=$2; shift ;;
    --procs) PROCS=$2; shift ;;
    --modes) MODES=$2; shift ;;
    --iptables) IPTV=$2; shift ;;
    *) echo "kernel_modes.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
BUILD_DIR=${BENCH_BUILD_DIR:-build-bench}
bin_of() { local b; for b in "$BUILD_DIR/$1" "$BUILD_DIR/cmd/$1"; do [ -x "$b" ] && { echo "$b"; return; }; done; echo "$BUILD_DIR/$1"; }
VIPD=$(bin_of vipd) VIPCTL=$(bin_of vipctl)
PYTHON=${PYTHON:-/usr/bin/python3}
[ "$(id -u)" -eq 0 ] || { echo "kernel_modes.sh: SKIP: needs root (network namespaces)" >&2; exit 77; }
[ -x "$VIPD" ] && [ -x "$VIPCTL" ] || { echo "kernel_modes.sh: $VIPD / $VIPCTL not built" >&2; exit 1; }
for t in ip iptables-restore; do command -v $t >/dev/null || { echo "kernel_modes.sh: SKIP: no $t" >&2; exit 77; }; done

export LAB_PREFIX="vkb$$-"
P=$LAB_PREFIX
TMP=$(mktemp -d /tmp/vipd-kbench.XXXXXX)
VIPD_PID=
log() { echo "kernel_modes: $*" >&2; }
stop_vipd() {
  [ -n "$VIPD_PID" ] || return 0
  kill "$VIPD_PID" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$VIPD_PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$VIPD_PID" 2>/dev/null || true
  wait "$VIPD_PID" 2>/dev/null || true
  VIPD_PID=
}
cleanup() {
  stop_vipd
  scripts/lab.sh down >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
PATH_IPT=$PATH
if [ "$IPTV" = legacy ]; then
  mkdir -p "$TMP/bin"
  for t in iptables iptables-save iptables-restore; do
    ln -s "$(command -v "${t/iptables/iptables-legacy}")" "$TMP/bin/$t"
  done
  PATH_IPT=$TMP/bin:$PATH
fi
IPT_VERSION=$(PATH=$PATH_IPT iptables -V 2>/dev/null | head -n 1)

# Writes N services (db = 10.96.0.100:8080, the others 10.97.x.y:8080), each
# with the four pods, into DIR; prints the target list.
gen_manifests() {
  "$PYTHON" - "$1" "$2" <<'PY'
import sys
n, d = int(sys.argv[1]), sys.argv[2]
pods = ["10.244.1.15", "10.244.2.88", "10.244.3.12", "10.244.3.44"]
def vip(i):
    return "10.96.0.100" if i == 0 else "10.97.%d.%d" % ((i - 1) >> 8, (i - 1) & 255)
eps = "".join('  - {addresses: ["%s"], conditions: {ready: true}}\n' % p for p in pods)
svc, sl = [], []
for i in range(n):
    name = "db" if i == 0 else "s%d" % i
    svc.append("apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: default}\n"
               "spec: {type: ClusterIP, clusterIP: %s, ports: [{name: http, port: 8080, protocol: TCP}]}\n" % (name, vip(i)))
    sl.append("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
              "metadata: {name: %s-1, namespace: default, labels: {kubernetes.io/service-name: %s}}\n"
              "addressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n%s" % (name, name, eps))
open(d + "/services.yaml", "w").write("---\n".join(svc))
open(d + "/slices.yaml", "w").write("---\n".join(sl))
k = min(n, 16)
print(",".join("%s:8080" % vip(j * n // k) for j in range(k)))
PY
}

# Waits (bounded, 240 s) until vipd reports a successful sync; prints the
# seconds it took.
wait_synced() {
  local t0=$SECONDS st
  while [ $((SECONDS - t0)) -lt 240 ]; do
    kill -0 "$VIPD_PID" 2>/dev/null || return 1
    if st=$("$VIPCTL" --socket "$TMP/admin.sock" status --json 2>/dev/null) &&
       "$PYTHON" -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d.get("generation",0)>=1 and d.get("syncs",0)>=1 else 1)' "$st" 2>/dev/null; then
      echo $((SECONDS - t0)); return 0
    fi
    sleep 0.1
  done
  return 1
}

lab_kernel_lb() {
  ip -n "${P}lb" addr add 10.0.0.1/24 dev c0
  ip -n "${P}lb" addr add 10.244.0.1/16 dev p0
  ip netns exec "${P}lb" sysctl -qw net.ipv4.ip_forward=1 >/dev/null
  if ip -n "${P}lb" link add name svc0 type dummy 2>/dev/null; then
    ip -n "${P}lb" link set dev svc0 up
    ip -n "${P}lb" route add 10.96.0.0/12 dev svc0
  else
    ip -n "${P}lb" route add 10.96.0.0/12 dev p0
  fi
}

for mode in $MODES; do
  scripts/lab.sh up >"$TMP/lab.log" 2>&1 || { tail -n 5 "$TMP/lab.log" >&2; exit 1; }
  [ "$mode" != dpdk ] && lab_kernel_lb
  for n in $SERVICES; do
    man="$TMP/man-$n"
    rm -rf "$man"; mkdir -p "$man"
    targets=$(gen_manifests "$n" "$man")
    rm -f "$TMP/admin.sock"
    common=(--forward-method fnat --manifests-dir "$man" --admin-socket "$TMP/admin.sock"
            --metrics-address 127.0.0.1:10249 --health-address 127.0.0.1:10256)
    if [ "$mode" = dpdk ]; then
      ip netns exec "${P}lb" "$VIPD" --config config/demo/vipd.conf "${common[@]}" \
        "--eal-args=--no-huge -m 1024 --no-shconf --file-prefix ${P}vipd" </dev/null >>"$TMP/vipd.log" 2>&1 &
    elif [ "$mode" = nftables ]; then
      ip netns exec "${P}lb" "$VIPD" --mode nftables "${common[@]}" </dev/null >>"$TMP/vipd.log" 2>&1 &
    else
      PATH=$PATH_IPT ip netns exec "${P}lb" "$VIPD" --mode iptables "${common[@]}" </dev/null >>"$TMP/vipd.log" 2>&1 &
    fi
    VIPD_PID=$!
    if ! sync_s=$(wait_synced); then
      log "$mode/$n: vipd did not sync: $(tail -n 3 "$TMP/vipd.log" | tr '\n' ' ')"
      stop_vipd; continue
    fi
    # Warm-up (ARP, first connections), then the measurement.
    ip netns exec "${P}client" "$PYTHON" scripts/bench/conn_rate.py --targets "$targets" --seconds 1 \
      --max-count 2000 >/dev/null 2>&1 || true
    load=$(cut -d' ' -f1 /proc/loadavg)
    if r=$(ip netns exec "${P}client" "$PYTHON" scripts/bench/conn_rate.py --targets "$targets" \
             --seconds "$DUR" --procs "$PROCS" --max-count 200000); then
      ipt=""; [ "$mode" = iptables ] && ipt=", \"iptables\": \"$IPT_VERSION\""
      echo "{\"bench\": \"kernel\", \"mode\": \"$mode\", \"services\": $n, \"sync_s\": $sync_s, \"load\": $load$ipt, \"result\": $r}" >>"$OUT"
      log "$mode/$n services: $r"
    else
      log "$mode/$n: conn_rate.py failed"
    fi
    stop_vipd
  done
  scripts/lab.sh down >/dev/null 2>&1 || true
done
