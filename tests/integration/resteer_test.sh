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
# A second service in the same lab, dbmh (10.96.0.102:8080, annotation
# vipd.io/scheduler: mh, the same four pods), is reached from 32 client
# addresses (10.0.0.10-41, each one fixed source address; Maglev hashes it):
#   all alive: each address always lands on one pod, some of them on pod4;
#   pod4's server stopped (with db's checks): 4 rounds over the addresses,
#     0 failed; an address that hashed to pod4 is re-steered (rst), every time
#     to the same backend (the order is drawn from the address alone), and,
#     once dbmh's pod4 is ejected after 3 failures, sent by the ejection to
#     that same backend without a re-steer; the other addresses keep their pod;
#     vipctl list and the log mark dbmh's pod4 ejected.
# A slow but alive pod: pod4's server answering every request 250 ms late
# (LAB_POD_DELAY_MS; the SYN-ACK comes from its kernel at once, so the delay is
# above --resteer-timeout-ms but does not matter to it): 40 requests, 0 failed,
# pod4 gets its share, nothing re-steered, pod4 not ejected.
# IPv6 in the same lab and the same vipd (LAB_IPV6=1; RESTEER_IPV6=0 turns it
# off): db6 fd00:96::100:8080 over the four pods' IPv6 addresses, dpdk IPv6
# forwarding (--port-ipv6; fnat: --fnat-local-addrs6), right after pod4-ejected
# (pod4's server still stopped):
#   200 requests to db6, 0 failed, none answered by pod4, 3..20 re-steered by
#     reason rst; vipctl list marks db6's pod4 (only) ejected;
#   a connection held open (GET /keepalive) on its pod, that pod then taken out
#     of db6's EndpointSlice: its next request gets vipd's RST at once
#     (ConnectionResetError within 1 s, rst_sent counted), not a hang.
# Each check prints "PASS: <name>" / "FAIL: <name>: <detail>" / "SKIP: ...";
# exit 0, 1 on failures, 77 when it cannot run here.
set -uo pipefail

VARIANT=${1:-}
case $VARIANT in
  fnat|nat) ;;
  *) echo "usage: tests/integration/resteer_test.sh fnat|nat" >&2; exit 2 ;;
esac
NAME="resteer_test($VARIANT)"
CHECKS=(vipd-starts baseline-all-alive mh-baseline rst-dead-pod-no-failures rst-counted pod4-ejected
        mh-resteer-consistent mh-pod4-ejected pod4-readmitted slow-pod-not-ejected link-down-no-failures
        timeout-counted all-dead-refused vipd-alive)
V6_CHECKS=(v6-rst-dead-pod-no-failures v6-pod4-ejected v6-midflow-rst)
V6=0
if [ "${RESTEER_IPV6:-1}" = 1 ]; then
  V6=1
  export LAB_IPV6=1
  CHECKS+=("${V6_CHECKS[@]}")
fi
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
cat >"$TMP/manifests/service-dbmh.yaml" <<'YAML'
apiVersion: v1
kind: Service
metadata:
  name: dbmh
  namespace: default
  annotations: {vipd.io/scheduler: mh}
spec:
  clusterIP: 10.96.0.102
  ports: [{name: http, port: 8080, protocol: TCP}]
YAML
sed -e 's/name: db-abc12/name: dbmh-1/' -e 's/kubernetes.io\/service-name: db$/kubernetes.io\/service-name: dbmh/' \
  config/demo/manifests/endpointslice-db.yaml >"$TMP/manifests/endpointslice-dbmh.yaml"
# The mh clients: more addresses on the client's link (vipd answers them there).
MH_ADDRS=()
for i in $(seq 10 41); do
  ip -n "${P}client" addr add "10.0.0.$i/24" dev eth0 && MH_ADDRS+=("10.0.0.$i")
done
VARGS_V6=()
if [ "$V6" = 1 ]; then
  if why=$(kernel_v6_manifests); then
    VARGS_V6=(--port-ipv6 "fd00:10::1/64,fd00:244::1")
    [ "$VARIANT" = fnat ] && VARGS_V6+=(--fnat-local-addrs6 fd00:244::ff:1)
  else
    V6=0
    for c in "${V6_CHECKS[@]}"; do skip "$c" "$why"; done
  fi
fi
EAL=$(sed -n 's/^[[:space:]]*eal-args[[:space:]]*=[[:space:]]*//p' "$CONF" | tail -n 1)
ip netns exec "${P}lb" "$VIPD" --config "$CONF" --forward-method "$VARIANT" "${VARGS_V6[@]}" \
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

# N sequential GETs to db (or to HOST:8080), each on a new connection, timed one
# by one. One JSON line: ok, failed, by_pod, errors, and the latencies in ms (sorted).
timed() {
  ip netns exec "${P}client" "$PYTHON" - "$1" "${2:-10.96.0.100}" <<'PY'
import json, sys, time
sys.path.insert(0, "scripts/lab")
import client
n, host = int(sys.argv[1]), sys.argv[2]
res = {"ok": 0, "failed": 0, "by_pod": {}, "errors": {}, "lat_ms": []}
t_end = time.monotonic() + 60
for _ in range(n):
    if time.monotonic() > t_end:
        res["failed"] += 1
        continue
    t = time.monotonic()
    try:
        pod = client.http_once(host, 8080, "/", "db", 2.0)
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
# mh_map ROUNDS ADDR...: ROUNDS rounds of one GET to dbmh from each address (its
# own source address, a new connection each). One JSON line: ok, failed,
# errors, by_addr (address -> the pods that answered, in order).
mh_map() {
  ip netns exec "${P}client" "$PYTHON" - "$@" <<'PY'
import json, socket, sys
rounds, addrs = int(sys.argv[1]), sys.argv[2:]
res = {"ok": 0, "failed": 0, "errors": {}, "by_addr": {a: [] for a in addrs}}
for _ in range(rounds):
    for a in addrs:
        try:
            s = socket.create_connection(("10.96.0.102", 8080), timeout=2.0, source_address=(a, 0))
            try:
                s.settimeout(2.0)
                s.sendall(b"GET / HTTP/1.1\r\nHost: dbmh\r\nConnection: close\r\n\r\n")
                data = b""
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            finally:
                s.close()
            head, _, body = data.partition(b"\r\n\r\n")
            if b" 200 " not in head.split(b"\r\n", 1)[0] + b" ":
                raise ValueError("bad answer")
            res["by_addr"][a].append(body.split(b"\n", 1)[0].decode(errors="replace"))
            res["ok"] += 1
        except Exception as e:
            res["failed"] += 1
            k = type(e).__name__
            res["errors"][k] = res["errors"].get(k, 0) + 1
            res["by_addr"][a].append("-")
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
wstat() {
  vipctl stats --json 2>/dev/null | "$PYTHON" -c '
import json, sys
print(sum(w.get(sys.argv[1], 0) for w in json.load(sys.stdin)["workers"]))' "$1"
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
mh0=$(mh_map 2 "${MH_ADDRS[@]}")
# MH_POD4: the addresses Maglev sends to pod4; MH_HOME: address -> its pod.
MH_POD4=$("$PYTHON" -c 'import json,sys; r=json.loads(sys.argv[1]); print(" ".join(a for a,p in r["by_addr"].items() if p and p[0]=="pod4"))' "$mh0" 2>/dev/null)
d=$(judge "$mh0" 'r["failed"] == 0 and len(r["by_addr"]) == 32 and all(len(set(p)) == 1 for p in r["by_addr"].values()) and len({p[0] for p in r["by_addr"].values()}) >= 3 and any(p[0] == "pod4" for p in r["by_addr"].values())')
note "mh: $("$PYTHON" -c 'import json,sys,collections; r=json.loads(sys.argv[1]); print(r["ok"], "ok,", r["failed"], "failed; addresses per pod:", dict(sorted(collections.Counter(p[0] for p in r["by_addr"].values() if p).items())))' "$mh0" 2>/dev/null); on pod4: ${MH_POD4:-none}"
if [ -z "$d" ] && [ -n "$mh0" ]; then pass mh-baseline
else fail mh-baseline "want 0 failed, each of the 32 addresses on one pod, >= 3 pods, pod4 among them: ${d:-no result}"; fi

# ---- pod4's server stopped: RST -------------------------------------------------
rst0=$(resteers rst)
scripts/lab.sh kill-pod 4 >/dev/null 2>&1 || note "warning: kill-pod 4 failed"
r=$(timed 400)
rst1=$(resteers rst)
note "pod4 stopped: $(brief "$r")"
note "pod4 stopped, latency: $(slow_summary "$r" "$base_max" 2>/dev/null); re-steered (rst): $((rst1 - rst0))"
d=$(judge "$(brief "$r")" 'r["failed"] == 0 and r["ok"] == 400 and n("pod4") == 0')
if [ -z "$d" ] && [ -n "$r" ]; then pass rst-dead-pod-no-failures; else fail rst-dead-pod-no-failures "want 400 ok, none from pod4: ${d:-no result}"; fi
# Why 3..20 and not "about a quarter": outlier ejection is on by default
# (--eject-failures 3), so pod4 leaves the rotation after its third refused
# SYN in a row and only the connections sent to it until then are
# re-steered: at least the 3 whose failures ejected it, a few more for SYNs
# already on their way to it (concurrent requests, several workers whose
# shared failure count may race: eject.h). Re-steers skip an ejected backend
# too, so none lands there afterwards. Without ejection it would be about 100
# of the 400 (rr over four pods): over 20 means the ejection did not take.
if [ $((rst1 - rst0)) -ge 3 ] && [ $((rst1 - rst0)) -le 20 ]; then pass rst-counted
else fail rst-counted "re-steered by rst: $((rst1 - rst0)), want 3..20 (ejected after 3)"; fi
# vipctl list marks pod4 and only pod4; 40 more requests are not re-steered.
list=$(vipctl list 2>/dev/null)
ej=$(grep -c ' ejected (' <<<"$list")
r=$(timed 40)
rst2=$(resteers rst)
note "pod4 ejected: $(grep -m1 '10.244.3.44:8080' <<<"$list" | sed 's/^ *//'); 40 more: $(brief "$r"), re-steered $((rst2 - rst1))"
# ... and vipd logged the ejection (one line; the log is read once a second).
logged() { local i; for i in $(seq 1 30); do grep -q "$1" "$TMP/vipd.log" && return 0; sleep 0.1; done; return 1; }
ejlog=no; logged 'backend .* -> 10\.244\.3\.44:8080 ejected: ' && ejlog=yes
if grep -q '10.244.3.44:8080 .* ejected (' <<<"$list" && [ "$ej" = 1 ] && [ $((rst2 - rst1)) = 0 ] &&
   [ "$ejlog" = yes ] && [ -z "$(judge "$(brief "$r")" 'r["ok"] == 40')" ]; then pass pod4-ejected
else fail pod4-ejected "want pod4 (only) marked ejected in vipctl list ($ej marked), its log line ($ejlog) and 40 ok, none re-steered ($((rst2 - rst1)))"; fi

# ---- IPv6 (db6), pod4's server still stopped: re-steered, ejected; mid-flow RST ---
if [ "$V6" = 1 ]; then
  rst0=$(resteers rst)
  r=$(timed 200 fd00:96::100)
  rst1=$(resteers rst)
  # db6's backend lines in vipctl list (those under its service line).
  v6list=$(awk '/^ *->/ { if (s) print; next } { s = /\[fd00:96::100\]:8080/ }' <<<"$(vipctl list 2>/dev/null)")
  note "IPv6, pod4 stopped: $(brief "$r"); re-steered (rst): $((rst1 - rst0)); $(grep -m1 'fd00:244::3:44' <<<"$v6list" | sed 's/^ *//')"
  d=$(judge "$(brief "$r")" 'r["failed"] == 0 and r["ok"] == 200 and n("pod4") == 0')
  if [ -z "$d" ] && [ -n "$r" ] && [ $((rst1 - rst0)) -ge 3 ] && [ $((rst1 - rst0)) -le 20 ]; then pass v6-rst-dead-pod-no-failures
  else fail v6-rst-dead-pod-no-failures "want 200 ok, none from pod4, 3..20 re-steered by rst ($((rst1 - rst0))): ${d:-no result}"; fi
  if grep -q 'fd00:244::3:44\]:8080 .* ejected (' <<<"$v6list" && [ "$(grep -c ' ejected (' <<<"$v6list")" = 1 ]; then
    pass v6-pod4-ejected
  else fail v6-pod4-ejected "want db6's pod4 (only) marked ejected in vipctl list: $(tr '\n' ';' <<<"$v6list")"; fi
  # A connection held open on its pod; the pod leaves db6's EndpointSlice.
  ip netns exec "${P}client" "$PYTHON" - "$TMP/midflow6.go" >"$TMP/midflow6.out" 2>&1 <<'PY' &
import os, socket, sys, time
def get(s):
    s.sendall(b"GET /keepalive HTTP/1.1\r\nHost: db6\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data or b"\n" not in data.split(b"\r\n\r\n", 1)[1]:
        chunk = s.recv(4096)
        if not chunk:
            raise EOFError("closed")
        data += chunk
    return data.split(b"\r\n\r\n", 1)[1].split(b"\n", 1)[0].strip().decode(errors="replace")
s = socket.create_connection(("fd00:96::100", 8080), timeout=3)
print(get(s), flush=True)
end = time.monotonic() + 20
while not os.path.exists(sys.argv[1]) and time.monotonic() < end:
    time.sleep(0.02)
t = time.monotonic()
try:
    print("answered", get(s))
except ConnectionResetError:
    print("reset %d" % ((time.monotonic() - t) * 1000))
except Exception as e:
    print("%s %d" % (type(e).__name__, (time.monotonic() - t) * 1000))
PY
  held=$!
  for _ in $(seq 1 100); do [ -s "$TMP/midflow6.out" ] && break; sleep 0.05; done
  hpod=$(head -n 1 "$TMP/midflow6.out")
  declare -A POD6=([pod1]=fd00:244::1:15 [pod2]=fd00:244::2:88 [pod3]=fd00:244::3:12 [pod4]=fd00:244::3:44)
  keep=()
  for p in pod1 pod2 pod3 pod4; do [ "$p" = "$hpod" ] || keep+=("${POD6[$p]}"); done
  rs0=$(wstat rst_sent)
  gen_before=$(generation)
  kernel_write_slice6 "$TMP/slice6.new" "${keep[@]}"
  replace_file "$TMP/manifests/endpointslice-db6.yaml" "$TMP/slice6.new"
  wait_generation $(( ${gen_before:-0} + 1 )) 100
  touch "$TMP/midflow6.go"
  wait "$held"
  res=$(tail -n 1 "$TMP/midflow6.out")
  rs1=$(wstat rst_sent)
  note "IPv6 held connection on ${hpod:-?}, removed from db6: '$res'; rst_sent +$((rs1 - rs0))"
  if [ "${#keep[@]}" = 3 ] && [ "${res% *}" = reset ] && [ "${res#* }" -lt 1000 ] 2>/dev/null && [ $((rs1 - rs0)) -ge 1 ]; then
    pass v6-midflow-rst
  else fail v6-midflow-rst "want the held connection (on '${hpod}') reset by vipd within 1 s after its pod left db6, rst_sent counted (+$((rs1 - rs0))): got '$res'"; fi
fi

# ---- mh, pod4's server still stopped: re-steered consistently, then ejected ------------
rst0=$(resteers rst)
mh1=$(mh_map 4 "${MH_ADDRS[@]}")
rst1=$(resteers rst)
list=$(vipctl list 2>/dev/null)
# Per address: the pods of the 4 rounds (as one string), and its pod before.
note "mh, pod4 stopped: $("$PYTHON" -c '
import json,sys
r0, r1 = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(r1["ok"], "ok,", r1["failed"], "failed", r1["errors"], "; was pod4 ->", {a: ",".join(p) for a, p in r1["by_addr"].items() if r0["by_addr"][a][:1] == ["pod4"]})' "$mh0" "$mh1" 2>/dev/null); re-steered (rst): $((rst1 - rst0))"
d=$("$PYTHON" -c '
import json,sys
try:
    r0, r = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    ok = r["failed"] == 0 and r["ok"] == 128 and all(
        len(set(p)) == 1 and p[0] != "pod4" and (p[0] == r0["by_addr"][a][0] or r0["by_addr"][a][0] == "pod4")
        for a, p in r["by_addr"].items())
except Exception as e:
    ok = False
print("" if ok else json.dumps(r.get("by_addr") if "r" in dir() else sys.argv[2]))' "$mh0" "$mh1" 2>&1)
np4=$(wc -w <<<"$MH_POD4")
if [ -z "$d" ] && [ -n "$mh1" ] && [ "$np4" -ge 1 ] && [ $((rst1 - rst0)) -ge 3 ] && [ $((rst1 - rst0)) -le $((np4 * 4)) ]; then pass mh-resteer-consistent
else fail mh-resteer-consistent "want 128 ok, each address one pod in all rounds (pod4's addresses ($np4) moved to one other, the others kept theirs), 3..$((np4 * 4)) re-steered ($((rst1 - rst0))): ${d:-no result}"; fi
ejlog=no; logged 'backend default/dbmh:http .* -> 10\.244\.3\.44:8080 ejected: ' && ejlog=yes
# dbmh's backend lines in vipctl list (those under its service line).
mhlist=$(awk '/^ *->/ { if (s) print; next } { s = /10\.96\.0\.102:8080/ }' <<<"$list")
mhej=$(grep -c ' ejected (' <<<"$mhlist")
if grep -q '10.244.3.44:8080 .* ejected (' <<<"$mhlist" && [ "$mhej" = 1 ] && [ "$ejlog" = yes ]; then pass mh-pod4-ejected
else fail mh-pod4-ejected "want dbmh's pod4 (only) marked ejected in vipctl list ($mhej of $(wc -l <<<"$mhlist") backends) and its ejection logged ($ejlog)"; fi

scripts/lab.sh start-pod 4 >/dev/null 2>&1 || note "warning: start-pod 4 failed"
# Its ejection time is up (5 s after the ejection): back in the rotation.
for _ in $(seq 1 150); do
  grep -q '10.244.3.44:8080 .* ejected (' <<<"$(vipctl list 2>/dev/null)" || break
  sleep 0.2
done
r=$(timed 40)
d=$(judge "$(brief "$r")" 'r["ok"] == 40 and n("pod4") > 0')
rdlog=no; logged 'backend .* -> 10\.244\.3\.44:8080 readmitted: ' && rdlog=yes
if [ -z "$d" ] && [ -n "$r" ] && [ "$rdlog" = yes ] && ! grep -q ' ejected (' <<<"$(vipctl list 2>/dev/null)"; then pass pod4-readmitted
else fail pod4-readmitted "want pod4 not ejected, its readmission logged ($rdlog) and answering again: ${d:-no result}"; fi

# ---- pod4 slow but alive: its answers 250 ms late, its SYN-ACKs at once -------------
scripts/lab.sh kill-pod 4 >/dev/null 2>&1 || note "warning: kill-pod 4 failed"
LAB_POD_DELAY_MS=250 scripts/lab.sh start-pod 4 >/dev/null 2>&1 || note "warning: start-pod 4 (slow) failed"
rs0=$(( $(resteers rst) + $(resteers timeout) + $(resteers icmp) + $(resteers retransmit) ))
r=$(timed 40)
rs1=$(( $(resteers rst) + $(resteers timeout) + $(resteers icmp) + $(resteers retransmit) ))
d=$(judge "$(brief "$r")" 'r["failed"] == 0 and r["ok"] == 40 and n("pod4") >= 8')
nslow=$("$PYTHON" -c 'import json,sys; print(sum(1 for x in json.loads(sys.argv[1])["lat_ms"] if x >= 250))' "$r" 2>/dev/null || echo 0)
note "pod4 slow: $(brief "$r"); $nslow took >= 250 ms; re-steered: $((rs1 - rs0))"
if [ -z "$d" ] && [ -n "$r" ] && [ "$nslow" -ge 8 ] && [ "$rs1" = "$rs0" ] && ! grep -q ' ejected (' <<<"$(vipctl list 2>/dev/null)"; then pass slow-pod-not-ejected
else fail slow-pod-not-ejected "want 40 ok, >= 8 from pod4 and >= 8 taking >= 250 ms ($nslow), none re-steered ($((rs1 - rs0))), nothing ejected: ${d:-no result}"; fi

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
