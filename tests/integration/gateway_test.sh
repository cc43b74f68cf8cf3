#!/usr/bin/env bash
# usage: tests/integration/gateway_test.sh [hold|bfd|ecmp]
# variants: hold bfd ecmp
# timeout: 300
#
# VIP announcement to a real routing daemon (docs/gateway.md): vipd (fnat, one
# worker, af_packet ports) in the lab's ${P}lb namespace with --exception-path tap
# --announce-table 100 (--announce-require-endpoints at its default, true); BIRD 2
# there (the "gateway": kernel protocol learning table 100, BGP AS 64512 from
# 10.0.0.1 on vipd-0) and BIRD 2 in ${P}client (the "router" on the client side:
# BGP AS 64513 from 10.0.0.2, learned routes exported to its kernel table). Each
# BIRD has its own config, control socket and pid file under the test's temp dir.
# Variant hold: BGP alone (hold time 3 s); bfd: BGP with BFD (100 ms x 3) on the link.
#   vipd-starts               generation >= 1
#   bgp-established           the router's session to 10.0.0.1 is Established
#   router-learns-vip         the router has 10.96.0.100/32 via 10.0.0.1 (birdc show
#                             route, and in its kernel table as proto bird)
#   no-endpoints-not-announced  10.96.0.101 (a service without endpoints) is not there
#   drain-withdrawn-at-router `vipctl drain`: 10.96.0.100/32 leaves the router's
#                             kernel table within 5 s (time measured, printed)
#   undrain-back-at-router    `vipctl undrain`: it is back within 5 s (measured)
#   kill-withdrawn-at-router  kill -9 of vipd: the router loses the route and the
#                             session within 10 s (hold: hold time 3 s) or 2 s (bfd:
#                             "BFD session down"); measured
# Variant ecmp: three gateways behind an ECMP router, in tests/integration/gateway_ecmp.sh
# (its header lists its lab and checks).
# Prints PASS/FAIL/SKIP lines (tests/integration/lib.sh); exit 77 when it cannot run.
set -uo pipefail

VARIANT=${1:-hold}
case $VARIANT in
  hold|bfd) ;;
  ecmp) exec bash "$(dirname "${BASH_SOURCE[0]}")/gateway_ecmp.sh" ;;
  *) echo "usage: tests/integration/gateway_test.sh [hold|bfd|ecmp]" >&2; exit 2 ;;
esac
NAME="gateway_test($VARIANT)"
CHECKS=(vipd-starts bgp-established router-learns-vip no-endpoints-not-announced
        drain-withdrawn-at-router undrain-back-at-router kill-withdrawn-at-router)
SKIP_HINT="run as root with /dev/net/tun and BIRD 2 (Debian bird2: apt-get install bird2)"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_bird2
require_netns bridge
require_vipd
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun: DPDK's net_tap cannot create the exception interfaces"

export LAB_PREFIX="vg${VARIANT:0:1}$$-"
P=$LAB_PREFIX
TMP=$(mktemp -d /tmp/vipd-gateway.XXXXXX)
CONF=config/demo/vipd.conf
GW_BIRD_PID=
RT_BIRD_PID=
cleanup_extra() {
  [ "$NFAIL" -gt 0 ] && tail -n 5 "$TMP"/*-bird.out 2>/dev/null
  [ -n "$GW_BIRD_PID" ] && kill -KILL "$GW_BIRD_PID" 2>/dev/null
  [ -n "$RT_BIRD_PID" ] && kill -KILL "$RT_BIRD_PID" 2>/dev/null
  if [ "$NFAIL" -gt 0 ]; then
    local f
    for f in "$TMP/gw-bird.log" "$TMP/rt-bird.log"; do
      [ -f "$f" ] && { echo "--- tail of $f"; tail -n 15 "$f"; }
    done
  fi
  return 0
}
lib_traps

lab_up
mkdir -p "$TMP/manifests"
cp config/demo/manifests/*.yaml "$TMP/manifests/"
EAL=$(sed -n 's/^[[:space:]]*eal-args[[:space:]]*=[[:space:]]*//p' "$CONF" | tail -n 1)
ip netns exec "${P}lb" "$VIPD" --config "$CONF" --forward-method fnat \
  --manifests-dir "$TMP/manifests" --admin-socket "$TMP/admin.sock" \
  --metrics-address off --health-address off \
  --exception-path tap --announce-table 100 \
  "--eal-args=$EAL --file-prefix ${P}vipd" </dev/null >"$TMP/vipd.log" 2>&1 &
VIPD_PID=$!
if wait_generation 1; then
  pass vipd-starts
else
  fail vipd-starts "no generation >= 1 within 30 s: $(tail -n 2 "$TMP/vipd.log" | tr '\n' ' ')"
  exit 1
fi

# ---- the two BIRDs ----------------------------------------------------------------------
GW_BFD= RT_BFD= BGP_BFD= KILL_LIMIT_MS=10000 KILL_WHY="Hold timer expired"
if [ "$VARIANT" = bfd ]; then
  GW_BFD='protocol bfd { interface "vipd-0" { interval 100 ms; multiplier 3; }; }'
  RT_BFD='protocol bfd { interface "eth0" { interval 100 ms; multiplier 3; }; }'
  BGP_BFD='bfd on;'
  KILL_LIMIT_MS=2000 KILL_WHY="BFD session down"
fi
# The gateway: routes of table 100 (vipd's) learned into its own table "vips",
# exported by BGP with itself (the port address) as next hop.
cat >"$TMP/gw-bird.conf" <<EOF_GW
log "$TMP/gw-bird.log" all;
router id 10.0.0.1;
protocol device { scan time 10; }
ipv4 table vips;
$GW_BFD
protocol kernel vipd_vips {
  kernel table 100;            # --announce-table 100
  learn;                       # take routes BIRD did not make (vipd's: proto static)
  scan time 10;                # changes arrive by netlink at once; this is a fallback
  ipv4 { table vips; import all; export none; };
}
protocol bgp uplink {
  local 10.0.0.1 as 64512;     # the port address, on vipd-0
  neighbor 10.0.0.2 as 64513;
  $BGP_BFD
  hold time 3; keepalive time 1;
  connect delay time 1; connect retry time 2; error wait time 1, 5;
  ipv4 { table vips; import none; export all; next hop self; };
}
EOF_GW
# The router: learns the VIPs by BGP and puts them in its kernel table.
cat >"$TMP/rt-bird.conf" <<EOF_RT
log "$TMP/rt-bird.log" all;
router id 10.0.0.2;
protocol device { scan time 10; }
$RT_BFD
protocol kernel {
  ipv4 { import none; export all; };
}
protocol bgp vipd_gw {
  local 10.0.0.2 as 64513;
  neighbor 10.0.0.1 as 64512;
  $BGP_BFD
  hold time 3; keepalive time 1;
  connect delay time 1; connect retry time 2; error wait time 1, 5;
  ipv4 { import all; export none; };
}
EOF_RT
for c in gw rt; do
  if ! out=$("$BIRD" -p -c "$TMP/$c-bird.conf" 2>&1); then
    fail bgp-established "BIRD rejects $TMP/$c-bird.conf: $out"
    exit 1
  fi
done
GW_SOCK=$TMP/gw-bird.ctl
RT_SOCK=$TMP/rt-bird.ctl
ip netns exec "${P}lb" "$BIRD" -f -c "$TMP/gw-bird.conf" -s "$GW_SOCK" -P "$TMP/gw-bird.pid" \
  >"$TMP/gw-bird.out" 2>&1 &
GW_BIRD_PID=$!
disown "$GW_BIRD_PID"   # killed in cleanup_extra, without a job notice
ip netns exec "${P}client" "$BIRD" -f -c "$TMP/rt-bird.conf" -s "$RT_SOCK" -P "$TMP/rt-bird.pid" \
  >"$TMP/rt-bird.out" 2>&1 &
RT_BIRD_PID=$!
disown "$RT_BIRD_PID"
gwc() { "$BIRDC" -s "$GW_SOCK" "$@" 2>&1; }
rtc() { "$BIRDC" -s "$RT_SOCK" "$@" 2>&1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# The router's kernel route to VIP, "" if none.
rt_route() { ip -n "${P}client" -4 route show "$1/32" proto bird 2>/dev/null; }
# Polls every 50 ms until `rt_route VIP` is non-empty (want=1) or empty (want=0);
# prints the milliseconds since T0, or "timeout".
wait_route() {
  local vip=$1 want=$2 t0=$3 limit_ms=$4 r
  while :; do
    r=$(rt_route "$vip")
    if { [ "$want" = 1 ] && [ -n "$r" ]; } || { [ "$want" = 0 ] && [ -z "$r" ]; }; then
      echo $(( $(now_ms) - t0 )); return 0
    fi
    [ $(( $(now_ms) - t0 )) -gt "$limit_ms" ] && { echo timeout; return 1; }
    sleep 0.05
  done
}

t0=$(now_ms)
st=
for _ in $(seq 1 100); do
  st=$(rtc show protocols vipd_gw | awk '$1 == "vipd_gw"')
  grep -q Established <<<"$st" && break
  sleep 0.2
done
if grep -q Established <<<"$st"; then
  pass bgp-established
  note "BGP session up $(( $(now_ms) - t0 )) ms after the BIRDs started"
else
  fail bgp-established "router's session not Established within 20 s: '$st'; gateway: '$(gwc show protocols uplink | awk '$1 == "uplink"')'"
  exit 1
fi

# ---- what the router learns ---------------------------------------------------------------
ms=$(wait_route 10.96.0.100 1 "$(now_ms)" 5000)
b=$(rtc show route 10.96.0.100/32 | tr '\n' ' ')
k=$(rt_route 10.96.0.100)
note "router: birdc '$b'; kernel '$k' (after $ms ms)"
if grep -q 'via 10\.0\.0\.1 on eth0' <<<"$b" && grep -q 'AS64512' <<<"$b" &&
   grep -q 'via 10\.0\.0\.1 dev eth0' <<<"$k"; then
  pass router-learns-vip
else
  fail router-learns-vip "want 10.96.0.100/32 via 10.0.0.1 (AS64512) in birdc and the kernel: birdc '$b', kernel '$k', gateway table vips '$(gwc show route table vips | tr '\n' ' ')', table 100 '$(ip -n "${P}lb" route show table 100 | tr '\n' ';')'"
fi
b=$(rtc show route 10.96.0.101/32 | tr '\n' ' ')
k=$(rt_route 10.96.0.101)
if ! grep -q '10\.96\.0\.101' <<<"$b" && [ -z "$k" ] && grep -q '10\.96\.0\.100' <<<"$(rtc show route protocol vipd_gw)"; then
  pass no-endpoints-not-announced
else
  fail no-endpoints-not-announced "10.96.0.101 (no endpoints) reached the router: birdc '$b', kernel '$k'"
fi

# ---- drain / undrain as seen by the router -------------------------------------------------
t0=$(now_ms)
out=$(vipctl drain 2>&1); rc=$?
ms=$(wait_route 10.96.0.100 0 "$t0" 5000)
note "drain: route gone at the router after $ms ms"
if [ "$rc" = 0 ] && [ "$ms" != timeout ]; then
  pass drain-withdrawn-at-router
else
  fail drain-withdrawn-at-router "want rc 0 and 10.96.0.100 gone at the router within 5 s: rc $rc ($(tr '\n' ' ' <<<"$out")), $ms, birdc '$(rtc show route 10.96.0.100/32 | tr '\n' ' ')'"
fi
t0=$(now_ms)
out=$(vipctl undrain 2>&1); rc=$?
ms=$(wait_route 10.96.0.100 1 "$t0" 5000)
note "undrain: route back at the router after $ms ms"
if [ "$rc" = 0 ] && [ "$ms" != timeout ]; then
  pass undrain-back-at-router
else
  fail undrain-back-at-router "want rc 0 and 10.96.0.100 back at the router within 5 s: rc $rc ($(tr '\n' ' ' <<<"$out")), $ms"
fi

# ---- kill -9: the session drops, the route goes --------------------------------------------
timers=$(rtc show protocols all vipd_gw | grep -iE 'hold timer|keepalive timer|session:' | tr -s ' \t\n' ' ')
t0=$(now_ms)
kill -KILL "$VIPD_PID" 2>/dev/null
{ wait "$VIPD_PID"; } 2>/dev/null
VIPD_PID=
reaped=$(( $(now_ms) - t0 ))
tap=timeout
while [ $(( $(now_ms) - t0 )) -le "$KILL_LIMIT_MS" ]; do
  ip -n "${P}lb" -o link show vipd-0 >/dev/null 2>&1 || { tap=$(( $(now_ms) - t0 )); break; }
  sleep 0.05
done
ms=$(wait_route 10.96.0.100 0 "$t0" "$KILL_LIMIT_MS")
st=$(rtc show protocols vipd_gw | awk '$1 == "vipd_gw"')
note "kill -9: vipd reaped after $reaped ms, vipd-0 gone after $tap ms, route gone at the router after $ms ms; router's session: '$st' (before the kill: $timers)"
if [ "$ms" != timeout ] && ! grep -q Established <<<"$st" && grep -q "$KILL_WHY" <<<"$st"; then
  pass kill-withdrawn-at-router
else
  fail kill-withdrawn-at-router "want the route gone and the session down ($KILL_WHY) within $KILL_LIMIT_MS ms: $ms, session '$st', birdc '$(rtc show route 10.96.0.100/32 | tr '\n' ' ')'"
fi
