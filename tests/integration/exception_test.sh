#!/usr/bin/env bash
# usage: tests/integration/exception_test.sh [1w|2w]
# variants: 1w 2w
# timeout: 300
#
# The kernel exception path of dpdk mode (docs/gateway.md): vipd (fnat, one
# worker, or with 2w two workers sharing a CPU so that frames for the kernel
# come from both; af_packet ports) in the lab's ${P}lb namespace with
# --exception-path tap, and from the client namespace:
#   tap-created          vipd-0 / vipd-1 exist with their ports' MACs and addresses
#   ping-kernel          ping of the port address 10.0.0.1 is answered by the kernel
#                        through vipd-0 (its to_kernel and from_kernel counters move;
#                        `vipctl stats` shows its line)
#   bgp-port-tcp         a TCP connection to 10.0.0.1:179 (a listener bound in ${P}lb
#                        on the tap's address) exchanges bytes both ways
#   vip-still-served     seed-like HTTP requests to the VIP: 0 failed
#   flood-rate-limited   a UDP flood to the port address beyond --exception-pps is
#                        cut to about that rate (rate_limited counted in vipctl stats
#                        and /metrics) while the VIP keeps answering (0 failed)
#   announce-routes      (--announce-table 100) table 100 holds 10.96.0.100/32 dev vipd-0
#                        (a service with ready endpoints), not 10.96.0.101 (none)
#   announce-withdrawn   once the EndpointSlice is removed, 10.96.0.100 leaves table 100
#   announce-back        and comes back with it
#   drain-withdrawn      `vipctl drain`: 10.96.0.100 leaves table 100 at once
#   drain-still-served   while draining, HTTP requests to the VIP still succeed
#   drain-status         `vipctl status` says draining with a connection count;
#                        /metrics has vipd_draining 1 and vipd_announced_vips 0
#   undrain-back         `vipctl undrain`: the route is back, vipd_draining 0
#   tap-gone-after-kill  after kill -9 of vipd, vipd-0 and vipd-1 are gone, and so
#                        are the routes of table 100
# Prints PASS/FAIL/SKIP lines (tests/integration/lib.sh); exit 77 when it cannot run.
set -uo pipefail

VARIANT=${1:-1w}
case $VARIANT in
  1w|2w) ;;
  *) echo "usage: tests/integration/exception_test.sh [1w|2w]" >&2; exit 2 ;;
esac
NAME="exception_test($VARIANT)"
CHECKS=(vipd-starts tap-created ping-kernel bgp-port-tcp vip-still-served flood-rate-limited
        announce-routes announce-withdrawn announce-back drain-withdrawn drain-still-served
        drain-status undrain-back tap-gone-after-kill)
SKIP_HINT="run as root on a kernel with network namespaces, veth, bridge and /dev/net/tun"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_netns bridge
require_vipd
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun: DPDK's net_tap cannot create the exception interfaces"

export LAB_PREFIX="vx${VARIANT:0:1}$$-"
P=$LAB_PREFIX
TMP=$(mktemp -d /tmp/vipd-exception.XXXXXX)
CONF=config/demo/vipd.conf
PPS=200
LISTEN_PID=
METRICS_PORT=$(( 30000 + $$ % 20000 ))
cleanup_extra() { [ -n "$LISTEN_PID" ] && kill -KILL "$LISTEN_PID" 2>/dev/null; return 0; }
lib_traps

lab_up
mkdir -p "$TMP/manifests"
cp config/demo/manifests/*.yaml "$TMP/manifests/"
EAL=$(sed -n 's/^[[:space:]]*eal-args[[:space:]]*=[[:space:]]*//p' "$CONF" | tail -n 1)
VARGS=()
if [ "$VARIANT" = 2w ]; then
  EAL="$EAL --lcores 0@0,1@1,2@1"   # two workers, both on CPU 1
  VARGS+=(--worker-lcores 1,2)
fi
ip netns exec "${P}lb" "$VIPD" --config "$CONF" --forward-method fnat \
  --manifests-dir "$TMP/manifests" --admin-socket "$TMP/admin.sock" \
  --metrics-address "127.0.0.1:$METRICS_PORT" --health-address off \
  --exception-path tap --exception-pps "$PPS" --announce-table 100 \
  "--eal-args=$EAL --file-prefix ${P}vipd" "${VARGS[@]}" </dev/null >"$TMP/vipd.log" 2>&1 &
VIPD_PID=$!
if wait_generation 1; then
  pass vipd-starts
else
  fail vipd-starts "no generation >= 1 within 30 s: $(tail -n 2 "$TMP/vipd.log" | tr '\n' ' ')"
  exit 1
fi

# Counters of port N's exception path from `vipctl stats --json`, as "to from rate_limited".
exc() {
  vipctl stats --json 2>/dev/null | "$PYTHON" -c '
import json, sys
e = json.load(sys.stdin)["ports"][int(sys.argv[1])].get("exception", {})
print(e.get("to_kernel", -1), e.get("from_kernel", -1), e.get("rate_limited", -1))' "$1"
}
mac_of() { ip -n "$1" -o link show "$2" 2>/dev/null | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p'; }

# ---- the interfaces -----------------------------------------------------------------
d=
for pair in "vipd-0 c0 10.0.0.1/24" "vipd-1 p0 10.244.0.1/16"; do
  read -r tap port addr <<<"$pair"
  tm=$(mac_of "${P}lb" "$tap"); pm=$(mac_of "${P}lb" "$port")
  [ -n "$tm" ] && [ "$tm" = "$pm" ] || d+="$tap mac '${tm:-none}' != $port mac '$pm'; "
  grep -q "inet $addr " <<<"$(ip -n "${P}lb" -o addr show dev "$tap" 2>/dev/null)" || d+="$tap lacks $addr; "
  grep -q '[<,]UP[,>]' <<<"$(ip -n "${P}lb" -o link show "$tap" 2>/dev/null)" || d+="$tap not up; "
done
if [ -z "$d" ]; then pass tap-created; else fail tap-created "$d"; fi

# ---- ping: answered by the kernel -------------------------------------------------------
read -r to0 from0 _ <<<"$(exc 0)"
r=$(client ping 10.0.0.1 --count 3 --timeout 1)
read -r to1 from1 _ <<<"$(exc 0)"
line=$(vipctl stats 2>/dev/null | grep '^Exception path vipd-0: to kernel')
note "ping: $r; vipd-0 to_kernel $to0 -> $to1, from_kernel $from0 -> $from1; vipctl stats: $line"
if [ "$(json_field "$r" received)" = 3 ] && [ $((to1 - to0)) -ge 3 ] && [ $((from1 - from0)) -ge 3 ] &&
   [ -n "$line" ]; then
  pass ping-kernel
else
  fail ping-kernel "want 3 replies, >= 3 frames each way through vipd-0 and its line in vipctl stats: $r, to_kernel +$((to1 - to0)), from_kernel +$((from1 - from0)), line '$line'"
fi

# ---- TCP 179 to a kernel listener on the tap's address ---------------------------------
ip netns exec "${P}lb" "$PYTHON" -c '
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.0.0.1", 179)); s.listen(4)
while True:
    c, a = s.accept()
    data = c.recv(100)
    c.sendall(b"kernel got " + data)
    c.close()' >"$TMP/listener.log" 2>&1 &
LISTEN_PID=$!
disown "$LISTEN_PID"   # killed in cleanup_extra, without a job notice
sleep 0.5
r=$(ip netns exec "${P}client" "$PYTHON" -c '
import socket
try:
    s = socket.create_connection(("10.0.0.1", 179), timeout=3)
    s.sendall(b"OPEN")
    print(s.recv(100).decode())
except Exception as e:
    print("error: %r" % e)' 2>&1)
if [ "$r" = "kernel got OPEN" ]; then pass bgp-port-tcp; else fail bgp-port-tcp "want 'kernel got OPEN': $r ($(cat "$TMP/listener.log"))"; fi

# ---- VIP traffic alongside ------------------------------------------------------------
r=$(client http http://10.96.0.100:8080/ --count 100 --timeout 2 --max-time 30)
d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 100')
if [ -z "$d" ] && [ -n "$r" ]; then pass vip-still-served; else fail vip-still-served "want 100 ok: ${d:-no result}"; fi

# ---- a flood to the port address: rate limited, VIP unaffected --------------------------
read -r to0 _ rl0 <<<"$(exc 0)"
client http http://10.96.0.100:8080/ --count 100 --timeout 5 --interval 0.01 --max-time 40 >"$TMP/http.json" &
HTTP_PID=$!
t0=$(date +%s%N)
flood=$(ip netns exec "${P}client" "$PYTHON" -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
n, end = 0, time.time() + 2.0
while time.time() < end:
    for _ in range(20):  # about 10000/s: 50 x --exception-pps, and the CPUs left to the worker
        try:
            s.sendto(b"x" * 32, ("10.0.0.1", 9))
            n += 1
        except OSError:
            pass
    time.sleep(0.002)
print(n)')
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
sleep 0.3
read -r to1 _ rl1 <<<"$(exc 0)"
wait "$HTTP_PID"
r=$(cat "$TMP/http.json")
passed=$((to1 - to0)); limited=$((rl1 - rl0))
# Allowed: the bucket (max(PPS/10, 32)) plus PPS per second of the flood, plus the
# few pings/ARP around it.
allow=$(( 32 + PPS * (ms + 300) / 1000 + 20 ))
metric=$(ip netns exec "${P}lb" curl -s -m 5 "http://127.0.0.1:$METRICS_PORT/metrics" |
         grep '^vipd_exception_drops_total{.*interface="vipd-0".*reason="rate_limited"' | awk '{print $NF}')
note "flood: $flood datagrams in $ms ms; vipd-0 passed $passed (allowed $allow), rate_limited +$limited, metric $metric; http: $r"
d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 100')
if [ "${flood:-0}" -gt 2000 ] && [ "$passed" -le "$allow" ] && [ "$limited" -ge $(( flood / 2 )) ] &&
   [ -n "$metric" ] && [ "${metric%.*}" -ge "$limited" ] && [ -z "$d" ]; then
  pass flood-rate-limited
else
  fail flood-rate-limited "want > 2000 sent, <= $allow passed, >= half rate_limited (also in /metrics), 0 failed VIP requests: sent ${flood:-?}, passed $passed, rate_limited $limited, metric '${metric}', http ${d:-ok}"
fi

# ---- VIP announcement: /32 routes in table 100 -----------------------------------------
routes() { ip -n "${P}lb" -4 route show table 100 2>/dev/null | tr '\n' ';'; }
r=$(routes)
if grep -q '10\.96\.0\.100 dev vipd-0' <<<"$r" && ! grep -q '10\.96\.0\.101' <<<"$r"; then
  pass announce-routes
else
  fail announce-routes "want 10.96.0.100 dev vipd-0 and not 10.96.0.101 in table 100: '$r'"
fi
gen=$(generation)
rm -f "$TMP/manifests/endpointslice-db.yaml"
wait_generation $(( ${gen:-0} + 1 )) 100
r=$(routes)
if ! grep -q '10\.96\.0\.100' <<<"$r"; then pass announce-withdrawn
else fail announce-withdrawn "10.96.0.100 still in table 100 after its endpoints went: '$r'"; fi
cp config/demo/manifests/endpointslice-db.yaml "$TMP/manifests/"
wait_generation $(( ${gen:-0} + 2 )) 100
r=$(routes)
if grep -q '10\.96\.0\.100 dev vipd-0' <<<"$r"; then pass announce-back
else fail announce-back "10.96.0.100 not back in table 100 with its endpoints: '$r'"; fi

# ---- drain: routes withdrawn, forwarding goes on; undrain: back ---------------------------
metric() {
  ip netns exec "${P}lb" curl -s -m 5 "http://127.0.0.1:$METRICS_PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'
}
out=$(vipctl drain 2>&1); rc=$?
r=$(routes)
if [ "$rc" = 0 ] && grep -q '^Draining: *yes' <<<"$out" && ! grep -q '10\.96\.0\.100' <<<"$r"; then
  pass drain-withdrawn
else
  fail drain-withdrawn "want rc 0, 'Draining: yes' and no 10.96.0.100 in table 100: rc $rc, '$(tr '\n' ' ' <<<"$out")', table '$r'"
fi
r=$(client http http://10.96.0.100:8080/ --count 20 --timeout 2 --max-time 20)
d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 20')
if [ -z "$d" ] && [ -n "$r" ]; then pass drain-still-served; else fail drain-still-served "want 20 ok while draining: ${d:-no result}"; fi
st=$(vipctl status 2>&1 | grep '^Draining:')
dm=$(metric vipd_draining); am=$(metric vipd_announced_vips)
note "draining: status '$st', vipd_draining $dm, vipd_announced_vips $am"
if grep -qE '^Draining: +yes, since [0-9.]+s ago, [0-9]+ connection\(s\) left' <<<"$st" && [ "$dm" = 1 ] && [ "$am" = 0 ]; then
  pass drain-status
else
  fail drain-status "want 'Draining: yes, since ..s ago, N connection(s) left', vipd_draining 1, vipd_announced_vips 0: '$st', $dm, $am"
fi
out=$(vipctl undrain 2>&1); rc=$?
r=$(routes)
dm=$(metric vipd_draining); am=$(metric vipd_announced_vips)
if [ "$rc" = 0 ] && grep -q '^Draining: *no' <<<"$out" && grep -q '10\.96\.0\.100 dev vipd-0' <<<"$r" &&
   [ "$dm" = 0 ] && [ "$am" = 1 ]; then
  pass undrain-back
else
  fail undrain-back "want rc 0, 'Draining: no', 10.96.0.100 back in table 100, vipd_draining 0, vipd_announced_vips 1: rc $rc, '$(tr '\n' ' ' <<<"$out")', table '$r', $dm, $am"
fi

# ---- kill -9: the interfaces go with the process ------------------------------------------
kill -KILL "$VIPD_PID" 2>/dev/null
{ wait "$VIPD_PID"; } 2>/dev/null
VIPD_PID=
left=
for _ in $(seq 1 30); do
  left=$(ip -n "${P}lb" -o link show 2>/dev/null | grep -oE 'vipd-[0-9]+' | tr '\n' ' ')
  [ -z "$left" ] && break
  sleep 0.1
done
r=$(routes)
if [ -z "$left" ] && [ -z "$r" ]; then pass tap-gone-after-kill
else fail tap-gone-after-kill "still there 3 s after kill -9: interfaces '$left', table 100 '$r'"; fi
