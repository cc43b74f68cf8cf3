#!/usr/bin/env bash
# usage: tests/integration/resteer_test.sh fnat|nat
# variants: fnat nat
# timeout: 120
#
# Re-steering (docs/scheduling.md, "Re-steering") end to end: vipd in dpdk
# mode with the demo configuration (config/demo: service db, 10.96.0.100:8080,
# four pods, rr) in the namespace lab, the EndpointSlice never changed, so
# only re-steering can keep clients from seeing a dead pod:
#   pod4's server stopped (its kernel answers the SYN with RST): 400 requests,
#     0 failed, none answered by pod4, re-steered by reason rst; outlier
#     ejection (docs/scheduling.md, "Outlier ejection", defaults: 3 failures,
#     5 s) ejects pod4 after its third refusal: vipctl list marks it, the
#     later requests are not re-steered any more (pod4 is not picked);
#   pod4's server back: readmitted when its ejection time is up, answers again;
#   pod4's link down (no answer at all): 400 requests, 0 failed, re-steered
#     by reason timeout; the added latency (p50/p99 of the requests that took
#     longer than any with all pods alive) is reported;
#   every pod's server stopped: the client gets "refused" (today's error), at
#     once, not a hang.
# Each check prints "PASS: <name>" / "FAIL: <name>: <detail>" / "SKIP: ...";
# exit 0, 1 on failures, 77 when it cannot run here.
set -uo pipefail

VARIANT=${1:-}
case $VARIANT in
  fnat|nat) ;;
  *) echo "usage: tests/integration/resteer_test.sh fnat|nat" >&2; exit 2 ;;
esac
NAME="resteer_test($VARIANT)"
CHECKS=(vipd-starts baseline-all-alive rst-dead-pod-no-failures rst-counted pod4-ejected pod4-readmitted
        link-down-no-failures
        timeout-counted all-dead-refused vipd-alive)
SKIP_HINT="run as root on a kernel with network namespaces, veth and bridge"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_netns bridge
require_vipd

export LAB_PREFIX="vr${VARIANT:0:1}$$-"
P=$LAB_PREFIX
TMP=$(mktemp -d "/tmp/vipd-resteer-$VARIANT.XXXXXX")
CONF=config/demo/vipd.conf
lib_traps

lab_up
mkdir -p "$TMP/manifests"
cp config/demo/manifests/*.yaml "$TMP/manifests/"
EAL=$(sed -n 's/^[[:space:]]*eal-args[[:space:]]*=[[:space:]]*//p' "$CONF" | tail -n 1)
ip netns exec "${P}lb" "$VIPD" --config "$CONF" --forward-method "$VARIANT" \
  --manifests-dir "$TMP/manifests" --admin-socket "$TMP/admin.sock" \
  "--eal-args=$EAL --file-prefix ${P}vipd" </dev/null >"$TMP/vipd.log" 2>&1 &
VIPD_PID=$!
gen=
for _ in $(seq 1 300); do
  vipd_alive || break
  gen=$(generation) && [ -n "$gen" ] && [ "$gen" -ge 1 ] && break
  gen=
  sleep 0.1
done
if [ -n "$gen" ]; then pass vipd-starts; else fail vipd-starts "no generation >= 1 within 30 s: $(tail -n 1 "$TMP/vipd.log")"; exit 1; fi

# N sequential GETs, each on a new connection, timed one by one. One JSON line:
# ok, failed, by_pod, errors, and the latencies in ms (sorted).
timed() {
  ip netns exec "${P}client" "$PYTHON" - "$1" <<'PY'
import json, sys, time
sys.path.insert(0, "scripts/lab")
import client
n = int(sys.argv[1])
res = {"ok": 0, "failed": 0, "by_pod": {}, "errors": {}, "lat_ms": []}
t_end = time.monotonic() + 60
for _ in range(n):
    if time.monotonic() > t_end:
        res["failed"] += 1
        continue
    t = time.monotonic()
    try:
        pod = client.http_once("10.96.0.100", 8080, "/", "db", 2.0)
        res["ok"] += 1
        res["by_pod"][pod] = res["by_pod"].get(pod, 0) + 1
        res["lat_ms"].append(round((time.monotonic() - t) * 1000, 3))
    except Exception as e:
        res["failed"] += 1
        k = type(e).__name__
        res["errors"][k] = res["errors"].get(k, 0) + 1
res["lat_ms"].sort()
print(json.dumps(res))
PY
}
# The result without its latencies (for judge and the log).
brief() { "$PYTHON" -c 'import json,sys; r=json.loads(sys.argv[1]); r.pop("lat_ms", None); print(json.dumps(r))' "$1" 2>/dev/null; }
# Sum of a worker counter over the workers (resteers: by reason).
resteers() {
  vipctl stats --json 2>/dev/null | "$PYTHON" -c '
import json, sys
print(sum(w.get("resteers", {}).get(sys.argv[1], 0) for w in json.load(sys.stdin)["workers"]))' "$1"
}
# p50/p99/max of the latencies above `floor` ms, and how many.
slow_summary() {
  "$PYTHON" - "$1" "$2" <<'PY'
import json, sys
lat = json.loads(sys.argv[1])["lat_ms"]
floor = float(sys.argv[2])
slow = [x for x in lat if x > floor]
pct = lambda a, q: a[min(len(a) - 1, int(q * len(a)))] if a else 0
print("all: p50 %.2f ms p99 %.2f ms max %.2f ms; %d above %.2f ms (the re-steered): p50 %.2f ms p99 %.2f ms" %
      (pct(lat, .5), pct(lat, .99), lat[-1] if lat else 0, len(slow), floor, pct(slow, .5), pct(slow, .99)))
PY
}

# ---- baseline: all alive -----------------------------------------------------------
r=$(timed 200)
d=$(judge "$(brief "$r")" 'r["failed"] == 0 and all(n("pod%d" % i) > 0 for i in range(1, 5))')
if [ -z "$d" ] && [ -n "$r" ]; then pass baseline-all-alive; else fail baseline-all-alive "want 0 failed, all pods: ${d:-no result}"; fi
base_max=$("$PYTHON" -c 'import json,sys; l=json.loads(sys.argv[1])["lat_ms"]; print(l[-1] if l else 0)' "$r" 2>/dev/null || echo 0)
note "baseline: $(slow_summary "$r" "$base_max" 2>/dev/null)"

# ---- pod4's server stopped: RST -------------------------------------------------
rst0=$(resteers rst)
scripts/lab.sh kill-pod 4 >/dev/null 2>&1 || note "warning: kill-pod 4 failed"
r=$(timed 400)
rst1=$(resteers rst)
note "pod4 stopped: $(brief "$r")"
note "pod4 stopped, latency: $(slow_summary "$r" "$base_max" 2>/dev/null); re-steered (rst): $((rst1 - rst0))"
d=$(judge "$(brief "$r")" 'r["failed"] == 0 and r["ok"] == 400 and n("pod4") == 0')
if [ -z "$d" ] && [ -n "$r" ]; then pass rst-dead-pod-no-failures; else fail rst-dead-pod-no-failures "want 400 ok, none from pod4: ${d:-no result}"; fi
# With ejection (3 failures) only the first few connections to pod4 are
# re-steered (without it: about 100 of 400, rr).
if [ $((rst1 - rst0)) -ge 3 ] && [ $((rst1 - rst0)) -le 20 ]; then pass rst-counted
else fail rst-counted "re-steered by rst: $((rst1 - rst0)), want 3..20 (ejected after 3)"; fi
# vipctl list marks pod4 and only pod4; 40 more requests are not re-steered.
list=$(vipctl list 2>/dev/null)
ej=$(grep -c ' ejected (' <<<"$list")
r=$(timed 40)
rst2=$(resteers rst)
note "pod4 ejected: $(grep '10.244.3.44:8080' <<<"$list" | sed 's/^ *//'); 40 more: $(brief "$r"), re-steered $((rst2 - rst1))"
# ... and vipd logged the ejection (one line; the log is read once a second).
logged() { local i; for i in $(seq 1 30); do grep -q "$1" "$TMP/vipd.log" && return 0; sleep 0.1; done; return 1; }
ejlog=no; logged 'backend .* -> 10\.244\.3\.44:8080 ejected: ' && ejlog=yes
if grep -q '10.244.3.44:8080 .* ejected (' <<<"$list" && [ "$ej" = 1 ] && [ $((rst2 - rst1)) = 0 ] &&
   [ "$ejlog" = yes ] && [ -z "$(judge "$(brief "$r")" 'r["ok"] == 40')" ]; then pass pod4-ejected
else fail pod4-ejected "want pod4 (only) marked ejected in vipctl list ($ej marked), its log line ($ejlog) and 40 ok, none re-steered ($((rst2 - rst1)))"; fi
scripts/lab.sh start-pod 4 >/dev/null 2>&1 || note "warning: start-pod 4 failed"
# Its ejection time is up (5 s after the ejection): back in the rotation.
for _ in $(seq 1 100); do
  vipctl list 2>/dev/null | grep -q '10.244.3.44:8080 .* ejected (' || break
  sleep 0.2
done
r=$(timed 40)
d=$(judge "$(brief "$r")" 'r["ok"] == 40 and n("pod4") > 0')
rdlog=no; logged 'backend .* -> 10\.244\.3\.44:8080 readmitted: ' && rdlog=yes
if [ -z "$d" ] && [ -n "$r" ] && [ "$rdlog" = yes ] && ! vipctl list 2>/dev/null | grep -q ' ejected ('; then pass pod4-readmitted
else fail pod4-readmitted "want pod4 not ejected, its readmission logged ($rdlog) and answering again: ${d:-no result}"; fi

# ---- pod4's link down: no answer -------------------------------------------------
to0=$(resteers timeout)
ip -n "${P}sw" link set dev pod4 down
r=$(timed 400)
to1=$(resteers timeout)
note "pod4 link down: $(brief "$r")"
note "pod4 link down, latency: $(slow_summary "$r" "$base_max" 2>/dev/null); re-steered (timeout): $((to1 - to0))"
d=$(judge "$(brief "$r")" 'r["failed"] == 0 and r["ok"] == 400 and n("pod4") == 0')
if [ -z "$d" ] && [ -n "$r" ]; then pass link-down-no-failures; else fail link-down-no-failures "want 400 ok, none from pod4: ${d:-no result}"; fi
if [ $((to1 - to0)) -ge 3 ]; then pass timeout-counted; else fail timeout-counted "re-steered by timeout: $((to1 - to0)), want >= 3 (then ejected)"; fi
ip -n "${P}sw" link set dev pod4 up

# ---- every pod dead: the client's error, at once ----------------------------------
for i in 1 2 3 4; do scripts/lab.sh kill-pod "$i" >/dev/null 2>&1; done
t0=$(date +%s%N)
out=$(client connect 10.96.0.100:8080 --timeout 3)
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
note "all pods stopped: connect gave '$out' after $ms ms (gave up: $(vipctl stats --json 2>/dev/null | "$PYTHON" -c 'import json,sys; print(sum(w.get("resteer_gave_up",0) for w in json.load(sys.stdin)["workers"]))' 2>/dev/null))"
if [ "$out" = refused ] && [ "$ms" -lt 1500 ]; then pass all-dead-refused; else fail all-dead-refused "want 'refused' within 1.5 s, got '$out' after $ms ms"; fi

if vipd_alive && status_json >/dev/null; then pass vipd-alive; else fail vipd-alive "vipd is not running at the end"; fi
