#!/usr/bin/env bash
# usage: tests/integration/metrics_test.sh
#
# vipd's Prometheus metrics and health endpoints, checked by a real Prometheus
# server. In a private network-namespace lab (scripts/lab.sh, unique
# LAB_PREFIX), vipd runs in dpdk mode (af_packet vdevs, fnat, one worker) with
# /metrics on 127.0.0.1:10249 and /healthz, /livez on 127.0.0.1:10256 of the lb
# namespace; Prometheus (Debian package prometheus) runs in the same namespace
# on 127.0.0.1:19090 and scrapes vipd every second. The client sends HTTP
# requests (one TCP connection each) to the seed service; the test asks
# Prometheus's HTTP API (from inside the lb namespace) for the per-backend
# connection counters and compares them with what the client got from each pod.
# Then pod4 is removed from the EndpointSlice: its series must go away and its
# counter must not grow while more requests are sent. Also: promtool check
# metrics on a scrape, /healthz, /livez, the programming-latency histogram,
# vipctl explain, slow clients (100 slowloris connections on each of /metrics,
# /healthz and the admin socket while a probe, a scrape and vipctl status must
# each answer within 1 s) and a manifest change made while vipd is out of
# descriptors (RLIMIT_NOFILE lowered with prlimit), which must be applied once
# descriptors are back, without another file event.
#
# Each check prints exactly "PASS: <name>" or "FAIL: <name>: <detail>"; other
# output is indented. Exit status: 0 if all passed, 1 if any failed, 77 (with
# "SKIP: ..." lines) when the test cannot run here (not root, no network
# namespaces, prometheus/promtool not installed).
# Env: VIPD_BIN / VIPCTL_BIN (default $VIPD_BUILD_DIR/vipd, same for vipctl;
# VIPD_BUILD_DIR defaults to build), PROMETHEUS / PROMTOOL (default from PATH).
set -uo pipefail

NAME="metrics_test"

# ---- can we run here? ---------------------------------------------------------
CHECKS=(vipd-starts prometheus-starts prometheus-scrapes healthz livez promtool-check-metrics
        backend-counts-match service-count-match removed-pod-series-gone removed-pod-not-growing
        counts-after-removal-match programming-latency vipctl-explain
        slow-clients-healthz slow-clients-scrape slow-clients-vipctl slow-clients-counted
        descriptors-exhausted-change-applied vipd-alive)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_netns bridge
PROMETHEUS=${PROMETHEUS:-$(command -v prometheus || true)}
PROMTOOL=${PROMTOOL:-$(command -v promtool || true)}
[ -n "$PROMETHEUS" ] && [ -n "$PROMTOOL" ] ||
  skip_all "prometheus/promtool not installed (Debian package prometheus; scripts/bootstrap.sh installs it)"
require_vipd

export LAB_PREFIX="vm$$-"
P=$LAB_PREFIX
TMP=$(mktemp -d /tmp/vipd-metrics.XXXXXX)
PROM_PID=
CONF=config/demo/vipd.conf
METRICS=127.0.0.1:10249
HEALTH=127.0.0.1:10256
PROM=127.0.0.1:19090

cleanup_extra() {
  if [ "$NFAIL" -gt 0 ] && [ -s "$TMP/prometheus.log" ]; then
    note "---- last lines of the prometheus log ----"
    tail -n 20 "$TMP/prometheus.log" | sed 's/^/    | /'
  fi
  stop_pid "$PROM_PID"
}
lib_traps

# HTTP GET from inside the lb namespace: prints the status code, a newline, the body.
http_get() {
  inlb "$PYTHON" - "$1" <<'PY'
import sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        code, body = r.status, r.read()
except urllib.error.HTTPError as e:
    code, body = e.code, e.read()
except Exception as e:
    code, body = 0, str(e).encode()
sys.stdout.write("%d\n%s" % (code, body.decode(errors="replace")))
PY
}

# promq EXPR: instant query at "now" against the test's Prometheus; prints
# lines "LABELS_JSON VALUE" (one per series, labels sorted), nothing if empty;
# exit status 1 when the query failed.
promq() {
  inlb "$PYTHON" - "http://$PROM/api/v1/query" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = sys.argv[1] + "?" + urllib.parse.urlencode({"query": sys.argv[2]})
try:
    d = json.load(urllib.request.urlopen(url, timeout=5))
except Exception as e:
    print("query failed: %s" % e, file=sys.stderr); sys.exit(1)
if d.get("status") != "success":
    print("query failed: %s" % d, file=sys.stderr); sys.exit(1)
for r in d["data"]["result"]:
    m = r["metric"]; m.pop("__name__", None)
    print(json.dumps(m, sort_keys=True, separators=(",", ":")), r["value"][1])
PY
}

# The newest scrape Prometheus has stored, as Unix seconds (float), or "".
last_scrape() { promq 'max(timestamp(vipd_start_time_seconds))' 2>/dev/null | awk '{print $2}'; }

# Waits (max ~10 s) until Prometheus stored a scrape taken after Unix time $1.
wait_scrape_after() {
  local t=$1 s _
  for _ in $(seq 1 100); do
    s=$(last_scrape)
    [ -n "$s" ] && "$PYTHON" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' "$s" "$t" && return 0
    sleep 0.1
  done
  return 1
}

now() { date +%s.%N; }

# backend counters of default/db:http as "ip:port value" lines, sorted.
backend_counts() {
  promq 'vipd_backend_connections_total{service="default/db:http"}' |
    "$PYTHON" -c '
import json, sys
for line in sys.stdin:
    labels, v = line.rsplit(" ", 1)
    print(json.loads(labels)["backend"], int(float(v)))' | sort
}

# ---- lab + vipd ---------------------------------------------------------------
lab_up
mkdir -p "$TMP/manifests" "$TMP/stage"
cp config/demo/manifests/*.yaml "$TMP/manifests/"
EAL=$(sed -n 's/^[[:space:]]*eal-args[[:space:]]*=[[:space:]]*//p' "$CONF" | tail -n 1)
inlb "$VIPD" --config "$CONF" --forward-method fnat \
  --manifests-dir "$TMP/manifests" --admin-socket "$TMP/admin.sock" \
  --metrics-address "$METRICS" --health-address "$HEALTH" \
  "--eal-args=$EAL --file-prefix ${P}vipd" </dev/null >"$TMP/vipd.log" 2>&1 &
VIPD_PID=$!
gen=
for _ in $(seq 1 300); do   # ~30 s
  vipd_alive || break
  gen=$(generation)
  [ -n "$gen" ] && [ "$gen" -ge 1 ] && break
  gen=
  sleep 0.1
done
if [ -n "$gen" ]; then
  pass vipd-starts
else
  if vipd_alive; then fail vipd-starts "no generation >= 1 within 30 s"
  else fail vipd-starts "vipd exited during start-up: $(tail -n 1 "$TMP/vipd.log")"; fi
  exit 1
fi

# ---- health endpoints ----------------------------------------------------------
# /healthz needs the worker's poll counter to be seen moving: the first check
# only records it, so ask twice.
http_get "http://$HEALTH/healthz" >/dev/null
sleep 0.3
out=$(http_get "http://$HEALTH/healthz")
code=$(head -n 1 <<<"$out")
body=$(tail -n +2 <<<"$out")
note "/healthz: $code $body"
st=$("$PYTHON" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["status"], d["generation"])' "$body" 2>/dev/null)
if [ "$code" = 200 ] && [ "$st" = "ok $gen" ]; then pass healthz
else fail healthz "want 200 with status ok, generation $gen; got $code: $(head -c 300 <<<"$body")"; fi
out=$(http_get "http://$HEALTH/livez")
code=$(head -n 1 <<<"$out")
if [ "$code" = 200 ] && grep -q '"status":"ok"' <<<"$out"; then pass livez
else fail livez "want 200 with status ok; got: $(tr '\n' ' ' <<<"$out" | head -c 300)"; fi

# ---- promtool on a scrape --------------------------------------------------------
out=$(http_get "http://$METRICS/metrics")
if [ "$(head -n 1 <<<"$out")" != 200 ]; then
  fail promtool-check-metrics "GET /metrics: $(head -c 200 <<<"$out")"
else
  tail -n +2 <<<"$out" >"$TMP/scrape.txt"
  note "/metrics: $(grep -c '^vipd_' "$TMP/scrape.txt") vipd_ samples, $(wc -c <"$TMP/scrape.txt") bytes"
  if lint=$("$PROMTOOL" check metrics <"$TMP/scrape.txt" 2>&1) && [ -z "$lint" ]; then
    pass promtool-check-metrics
  else
    fail promtool-check-metrics "promtool check metrics says: $(head -c 400 <<<"$lint" | tr '\n' ' ')"
  fi
fi

# ---- Prometheus ---------------------------------------------------------------------
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: vipd
    static_configs:
      - targets: ["$METRICS"]
EOF
inlb "$PROMETHEUS" --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/prometheus-data" \
  --web.listen-address="$PROM" --storage.tsdb.retention.time=1h --log.level=warn \
  </dev/null >"$TMP/prometheus.log" 2>&1 &
PROM_PID=$!
ready=
for _ in $(seq 1 150); do   # ~15 s
  kill -0 "$PROM_PID" 2>/dev/null || break
  [ "$(http_get "http://$PROM/-/ready" | head -n 1)" = 200 ] && { ready=1; break; }
  sleep 0.1
done
if [ -n "$ready" ]; then pass prometheus-starts
else fail prometheus-starts "not ready on $PROM within 15 s: $(tail -n 2 "$TMP/prometheus.log" | tr '\n' ' ')"; exit 1; fi

t0=$(now)
if wait_scrape_after "$t0" && [ "$(promq 'up{job="vipd"}' | awk '{print $2}')" = 1 ]; then
  pass prometheus-scrapes
else
  fail prometheus-scrapes "no successful scrape of $METRICS stored within 10 s (up: '$(promq 'up' 2>&1 | tr '\n' ' ')')"
  exit 1
fi

# The admin API's view of the same counters: "ip:port conns" lines of default/db:http.
admin_counts() {
  vipctl list --json 2>/dev/null | "$PYTHON" -c '
import json, sys
for s in json.load(sys.stdin)["services"]:
    if s["name"] == "default/db:http":
        for b in s["backends"]:
            print("%s:%d %d" % (b["ip"], b["port"], b["stats"]["conns"]))' | sort
}
# compare BEFORE AFTER CLIENT_RESULT ADMIN PODS...: per pod, Prometheus's value
# must equal the admin API's (the same counters, read while nothing flows), and
# the growth must equal what the client got from that pod. A SYN retransmitted
# under load can make the dataplane schedule one connection more than the
# client completed; up to 2 of those per pod are tolerated and reported on
# stderr. Prints "" when everything matches, else the differences.
compare() {
  "$PYTHON" - "$@" <<'PY'
import json, sys
before = dict(l.split() for l in sys.argv[1].splitlines() if l.strip())
after = dict(l.split() for l in sys.argv[2].splitlines() if l.strip())
r = json.loads(sys.argv[3])
admin = dict(l.split() for l in sys.argv[4].splitlines() if l.strip())
ips = {"pod1": "10.244.1.15", "pod2": "10.244.2.88", "pod3": "10.244.3.12", "pod4": "10.244.3.44"}
bad = []
if r["failed"]:
    bad.append("client saw %d failed requests" % r["failed"])
for pod in sys.argv[5:]:
    be = ips[pod] + ":8080"
    if be not in after:
        bad.append("%s: no series in Prometheus" % be); continue
    if admin.get(be) != after[be]:
        bad.append("%s: Prometheus has %s, the admin API %s" % (be, after[be], admin.get(be)))
    grew = int(after[be]) - int(before.get(be, 0))
    want = r["by_pod"].get(pod, 0)
    if not want <= grew <= want + 2:
        bad.append("%s (%s): counter grew by %d, client got %d answers" % (be, pod, grew, want))
    elif grew != want:
        print("    note: %s (%s): %d connections scheduled, %d answered (SYN retransmission?)"
              % (be, pod, grew, want), file=sys.stderr)
print("; ".join(bad))
PY
}

# ---- traffic, counted by Prometheus ------------------------------------------------
before=$(backend_counts)
svc_before=$(promq 'vipd_service_connections_total{service="default/db:http"}' | awk '{print int($2)}')
r1=$(client http http://10.96.0.100:8080/ --count 200 --timeout 2 --max-time 30)
note "200 requests: $r1"
t1=$(now)
wait_scrape_after "$t1" || note "warning: no scrape after the traffic within 10 s"
after=$(backend_counts)
note "vipd_backend_connections_total before: $(tr '\n' ' ' <<<"$before")"
note "vipd_backend_connections_total after:  $(tr '\n' ' ' <<<"$after")"
d=$(compare "$before" "$after" "$r1" "$(admin_counts)" pod1 pod2 pod3 pod4)
if [ -n "$r1" ] && [ -z "$d" ]; then pass backend-counts-match; else fail backend-counts-match "${d:-no client result}"; fi
svc_after=$(promq 'vipd_service_connections_total{service="default/db:http"}' | awk '{print int($2)}')
ok1=$("$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["ok"])' "$r1" 2>/dev/null)
svc_grew=$(( ${svc_after:-0} - ${svc_before:-0} ))
if [ -n "$svc_after" ] && [ -n "$ok1" ] && [ "$svc_grew" -ge "$ok1" ] && [ "$svc_grew" -le $((ok1 + 2)) ]; then
  pass service-count-match
else
  fail service-count-match "vipd_service_connections_total grew from '${svc_before}' to '${svc_after}', client got '${ok1}' answers"
fi

# ---- remove pod4 --------------------------------------------------------------------
pod4_before=$(awk '$1 == "10.244.3.44:8080" {print $2}' <<<"$after")
gen_before=$(generation)
slice_without "$TMP/manifests/endpointslice-db.yaml" 10.244.3.44 >/dev/null || note "warning: could not rewrite the EndpointSlice"
gen_after=
for _ in $(seq 1 100); do   # ~10 s
  g=$(generation)
  [ -n "$g" ] && [ -n "$gen_before" ] && [ "$g" -gt "$gen_before" ] && { gen_after=$g; break; }
  sleep 0.1
done
note "generation $gen_before -> ${gen_after:-?} (pod4 removed)"
t2=$(now)
wait_scrape_after "$t2" || note "warning: no scrape after the removal within 10 s"
gone=$(promq 'vipd_backend_connections_total{backend="10.244.3.44:8080"}')
if [ -n "$gen_after" ] && [ -z "$gone" ]; then pass removed-pod-series-gone
else fail removed-pod-series-gone "generation '${gen_after}'; pod4's series still there: '$gone'"; fi

r2=$(client http http://10.96.0.100:8080/ --count 150 --timeout 2 --max-time 30)
note "150 requests after the removal: $r2"
t3=$(now)
wait_scrape_after "$t3" || note "warning: no scrape after the traffic within 10 s"
after2=$(backend_counts)
note "vipd_backend_connections_total now: $(tr '\n' ' ' <<<"$after2")"
# Every sample of pod4's series over the whole test is at most its value
# before the removal, and the client got nothing from pod4.
pod4_max=$(promq 'max_over_time(vipd_backend_connections_total{backend="10.244.3.44:8080"}[5m])' | awk '{print int($2)}')
pod4_now=$(promq 'vipd_backend_connections_total{backend="10.244.3.44:8080"}')
pod4_got=$("$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["by_pod"].get("pod4", 0))' "$r2" 2>/dev/null)
if [ -n "$pod4_before" ] && [ "$pod4_max" = "$pod4_before" ] && [ -z "$pod4_now" ] && [ "$pod4_got" = 0 ]; then
  pass removed-pod-not-growing
  note "pod4: $pod4_before before the removal, max over the test $pod4_max, no sample since"
else
  fail removed-pod-not-growing "pod4 counter before removal '$pod4_before', max over 5m '$pod4_max', current '$pod4_now', client answers from pod4 '$pod4_got'"
fi
d=$(compare "$after" "$after2" "$r2" "$(admin_counts)" pod1 pod2 pod3)
if [ -n "$r2" ] && [ -z "$d" ]; then pass counts-after-removal-match; else fail counts-after-removal-match "${d:-no client result}"; fi

# ---- programming latency histogram -------------------------------------------------
n=$(promq 'vipd_network_programming_duration_seconds_count' | awk '{print int($2)}')
p99=$(promq 'histogram_quantile(0.99, sum by (le) (rate(vipd_network_programming_duration_seconds_bucket[5m])))' | awk '{print $2}')
note "programming latency: $n observations, p99 $p99 s"
if [ -n "$n" ] && [ "$n" -ge 2 ] && "$PYTHON" -c 'import sys; v=float(sys.argv[1]); sys.exit(0 if 0 < v < 1 else 1)' "${p99:-x}" 2>/dev/null; then
  pass programming-latency
else
  fail programming-latency "want >= 2 observations (start, removal) and a p99 between 0 and 1 s; got count '$n', p99 '$p99'"
fi

# ---- vipctl explain -------------------------------------------------------------------
out=$(vipctl explain tcp 10.0.0.99:40000 10.96.0.100:8080 2>&1); rc=$?
note "vipctl explain tcp 10.0.0.99:40000 10.96.0.100:8080 (a client address with no connections):"
sed 's/^/      /' <<<"$out"
out2=$(vipctl explain udp 10.0.0.2:40000 10.96.0.77:53 2>&1); rc2=$?
if [ "$rc" -eq 0 ] && grep -q '^Service: *default/db:http' <<<"$out" && grep -q '^Decision: *schedule' <<<"$out" &&
   grep -Eq '^Backend: *10\.244\.(1\.15|2\.88|3\.12):8080' <<<"$out" &&
   [ "$rc2" -eq 0 ] && grep -q '^Decision: *not_a_service' <<<"$out2"; then
  pass vipctl-explain
else
  fail vipctl-explain "exit $rc/$rc2: $(tr '\n' ' ' <<<"$out" | head -c 300) / $(tr '\n' ' ' <<<"$out2" | head -c 200)"
fi

note "dataplane drops: $(vipctl stats 2>/dev/null | sed -n '/^Drops by reason/,$p' | tr -s ' \n' ' ')"

# ---- slow clients ---------------------------------------------------------------------
# 100 connections on each listener (half idle, half sending one header byte a
# second, reopened when vipd closes them); meanwhile a probe, a scrape and
# vipctl status, after 0.5 s and after 2.5 s (past the 2 s header deadline).
drops_metric() {
  http_get "http://$METRICS/metrics" |
    awk '/^vipd_http_connections_dropped_total/ && /reason="(limit|header_timeout)"/ {n += $2} END {print n + 0}'
}
dropped_before=$(drops_metric)
out=$(inlb "$PYTHON" scripts/lab/slowclients.py probe --tcp "$METRICS" --tcp "$HEALTH" --unix "$TMP/admin.sock" \
  --count 100 --healthz "http://$HEALTH/healthz" --metrics "http://$METRICS/metrics" -- \
  "$VIPCTL" --socket "$TMP/admin.sock" status 2>&1)
note "slow clients: $out"
sc=$("$PYTHON" - "$out" <<'PY'
import json, sys
try:
    d = json.loads(sys.argv[1].strip().splitlines()[-1])
except Exception:
    print("no-result no-result no-result"); sys.exit()
def ok(key, want):
    bad = [r[key] for r in d["rounds"] if r[key].get("code", r[key].get("rc")) != want or r[key]["s"] >= 1.0]
    return "ok" if not bad else json.dumps(bad).replace(" ", "")
print(ok("healthz", 200), ok("metrics", 200), ok("vipctl", 0))
PY
)
read -r sc_h sc_m sc_v <<<"$sc"
if [ "$sc_h" = ok ]; then pass slow-clients-healthz; else fail slow-clients-healthz "want 200 within 1 s in both rounds: $sc_h"; fi
if [ "$sc_m" = ok ]; then pass slow-clients-scrape; else fail slow-clients-scrape "want 200 within 1 s in both rounds: $sc_m"; fi
if [ "$sc_v" = ok ]; then pass slow-clients-vipctl; else fail slow-clients-vipctl "want exit 0 within 1 s in both rounds: $sc_v"; fi
dropped=$(( $(drops_metric) - dropped_before ))
note "vipd_http_connections_dropped_total, reasons limit + header_timeout, all listeners: +$dropped"
# 300 connections past the 2 s header deadline (or the cap of 64 per listener).
if [ "$dropped" -ge 300 ]; then pass slow-clients-counted
else fail slow-clients-counted "want >= 300 more connections counted as limit/header_timeout drops, got $dropped"; fi

# ---- out of descriptors during a manifest change -----------------------------------------
# vipd's soft RLIMIT_NOFILE is lowered to its lowest free descriptor number, so
# no descriptor can be opened (what enough slow clients did to the old
# listeners). A manifest renamed into the directory then cannot be read ("Too
# many open files"); once the limit is back, the source must retry by itself
# (no other file event comes) and apply the change.
cat >"$TMP/stage/fdtest.yaml" <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: fdtest, namespace: default}
spec:
  clusterIP: 10.96.0.199
  ports: [{name: http, port: 8080}]
YAML
gen_before=$(generation)
# $VIPD_PID is the shell that started `ip netns exec vipd`; find vipd itself.
vpid=$VIPD_PID
for _ in 1 2 3; do
  [ "$(basename "$(readlink "/proc/$vpid/exe" 2>/dev/null)")" = vipd ] && break
  vpid=$(pgrep -P "$vpid" | head -n 1)
  [ -n "$vpid" ] || break
done
soft=$(prlimit --pid "$vpid" --nofile --output SOFT --noheadings | tr -d ' ')
lowest_free=$(ls "/proc/$vpid/fd" | sort -n | awk 'BEGIN {n = 0} $1 == n {n++} END {print n}')
prlimit --pid "$vpid" --nofile="$lowest_free:"
mv "$TMP/stage/fdtest.yaml" "$TMP/manifests/fdtest.yaml"
failed=
for _ in $(seq 1 50); do   # ~5 s
  grep -q 'manifests: .*Too many open files' "$TMP/vipd.log" && { failed=1; break; }
  sleep 0.1
done
sleep 1   # a few retries fail too
prlimit --pid "$vpid" --nofile="$soft:"
t_back=$(now)
applied=
for _ in $(seq 1 100); do   # ~10 s
  g=$(generation)
  [ -n "$g" ] && [ -n "$gen_before" ] && [ "$g" -gt "$gen_before" ] &&
    grep -q '"default/fdtest:http"' <<<"$(vipctl list --json 2>/dev/null)" && { applied=$g; break; }
  sleep 0.1
done
t_applied=$(now)
note "vipd (pid $vpid): soft RLIMIT_NOFILE $soft lowered to $lowest_free, then restored; change applied $("$PYTHON" -c 'import sys; print("%.1f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$t_back" "$t_applied") s later (generation $gen_before -> ${applied:-?})"
grep -E 'manifests: .*(Too many open files|works again)' "$TMP/vipd.log" | tail -n 2 | sed 's/^/      /'
if [ -n "$failed" ] && [ -n "$applied" ] && grep -q 'manifests: reading .* works again' "$TMP/vipd.log"; then
  pass descriptors-exhausted-change-applied
else
  fail descriptors-exhausted-change-applied "want the read failure logged ('$failed'), the change applied within 10 s of the limit's return (generation $gen_before -> '${applied}') and the recovery logged"
fi

# ---- still alive --------------------------------------------------------------------
if vipd_alive && [ "$(http_get "http://$HEALTH/healthz" | head -n 1)" = 200 ]; then pass vipd-alive
else fail vipd-alive "vipd is not running or /healthz is not 200 at the end of the test"; fi
