#!/usr/bin/env bash
# usage: tests/integration/leak_test.sh
# timeout: 1500
#
# No leaks in a long control-plane run: vipd runs in iptables mode (no DPDK)
# inside a private network namespace under a leak checker, and is driven for a
# while. The checker (LEAK_TOOL):
#   asan      (default when build-asan exists) vipd built with ASan + UBSan in
#             build-asan, the build directory of scripts/test.sh's "unit (asan)"
#             suite (only the vipd target is added to it), LeakSanitizer on;
#   valgrind  (the fallback when build-asan does not exist) valgrind memcheck
#             on the normal build's vipd: definite and indirect leaks and
#             memory errors count.
# The drive:
#  1. by the test API server (tests/kube/fake_apiserver.py, HTTPS on the
#     namespace's loopback): rounds of watch events (services and slices added,
#     modified, deleted), 1,000 services at once (200 under valgrind), dropped watches, 410s and
#     relists, HTTP 500s, malformed JSON in watches and lists, a Service with
#     garbage fields, an API server restart; the admin API and /metrics are read
#     in between;
#  2. by a manifests directory: rounds of rewritten files, syntax errors,
#     garbage objects, files deleted, the directory replaced by a file and back.
# Each run ends with SIGTERM: vipd must exit with status 0 and the checker may
# report nothing. A positive control first proves that the checker reports a
# leak in this environment at all.
# Skipped (loudly) with VIPD_ASAN=0 unless CI=true (as the "unit (asan)" suite),
# and when neither build-asan nor valgrind is there.
# Prints PASS:/FAIL:/SKIP: lines; exit 0 all passed, 1 any failed, 77 cannot run.
# Env: VIPD_BUILD_DIR (default build), VIPD_ASAN_BUILD_DIR (default
# build-asan), LEAK_TOOL (asan|valgrind), LEAK_ROUNDS (rounds per run, default
# 48 with asan, 24 with valgrind), PYTHON.
set -uo pipefail
NAME=leak_test
CHECKS=(leak-checker checker-detects-leaks api-run-exercised api-run-exits-cleanly api-run-no-leaks
        manifests-run-exercised manifests-run-exits-cleanly manifests-run-no-leaks)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [ "${VIPD_ASAN:-1}" = "0" ] && [ "${CI:-}" != "true" ]; then
  skip_all "VIPD_ASAN=0: the sanitizer leak check is not run (CI=true always runs it)"
fi
BA=${VIPD_ASAN_BUILD_DIR:-build-asan}
TOOL=${LEAK_TOOL:-}
if [ -z "$TOOL" ]; then
  if [ -f "$BA/build.ninja" ]; then TOOL=asan; elif command -v valgrind >/dev/null 2>&1; then TOOL=valgrind; fi
fi
case $TOOL in
  asan) [ -f "$BA/build.ninja" ] || skip_all "no ASan build directory $BA (scripts/test.sh sets it up: meson setup $BA --buildtype debug -Db_sanitize=address,undefined -Db_lundef=false)" ;;
  valgrind) command -v valgrind >/dev/null 2>&1 || skip_all "valgrind not installed" ;;
  *) skip_all "no leak checker: neither an ASan build directory $BA nor valgrind (LEAK_TOOL '${TOOL}')" ;;
esac
require_netns
for t in iptables-restore openssl curl; do
  command -v "$t" >/dev/null 2>&1 || skip_all "'$t' not installed"
done
require_vipd   # vipctl from the normal build
# valgrind runs vipd about 30 times slower: fewer rounds, a smaller bulk.
if [ "$TOOL" = asan ]; then ROUNDS=${LEAK_ROUNDS:-48}; BULK=1000; else ROUNDS=${LEAK_ROUNDS:-24}; BULK=200; fi

P="vl$$-"
NS="${P}leak"
TMP=$(mktemp -d /tmp/vipd-leak.XXXXXX)
api_init "$NS"          # the test API server: API_PORT, CTL_PORT, API_PID (lib.sh)
API_BOOKMARK_S=1
cleanup_extra() {
  stop_pid "$API_PID"
  ip netns del "$NS" 2>/dev/null
  return 0
}
lib_traps

# ---- the checked vipd --------------------------------------------------------------------
mkdir -p "$TMP/san"
SUPP=$ROOT/tests/sanitizers
t0=$(date +%s)
if [ "$TOOL" = asan ]; then
  if ! nice ninja -C "$BA" vipd >"$TMP/build.log" 2>&1; then
    fail leak-checker "ninja -C $BA vipd failed: $(grep -m3 -E 'error|FAILED' "$TMP/build.log" | tr '\n' ' ' | cut -c1-300)"
    exit 1
  fi
  AVIPD=$BA/vipd
  [ -x "$AVIPD" ] || AVIPD=$BA/cmd/vipd
  if [ -x "$AVIPD" ] && libs=$(ldd "$AVIPD" 2>/dev/null) && grep -q libasan <<<"$libs" && grep -q libubsan <<<"$libs"; then
    pass leak-checker; note "LeakSanitizer: $AVIPD (ASan + UBSan), ninja: $(( $(date +%s) - t0 )) s"
  else fail leak-checker "$AVIPD is not linked with libasan and libubsan"; exit 1; fi
else
  AVIPD=$VIPD
  pass leak-checker; note "valgrind memcheck ($(valgrind --version)) on $AVIPD"
fi
# checker LOG-PREFIX: sets CHK to the command prefix that runs a program under
# the checker with its reports in LOG-PREFIX.<pid> (valgrind must be the
# program's direct parent command: it does not follow exec by default)
checker() {
  if [ "$TOOL" = asan ]; then
    CHK=(env "ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=0:log_path=$1"
         "LSAN_OPTIONS=suppressions=$SUPP/lsan.supp:print_suppressions=0"
         "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$SUPP/ubsan.supp:log_path=$1")
  else
    CHK=(valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect
         --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --num-callers=30
         --child-silent-after-fork=yes --suppressions="$SUPP/valgrind.supp" --log-file="$1.%p")
  fi
}
# reports LOG-PREFIX: what the checker reported (nothing when clean)
reports() {
  if [ "$TOOL" = asan ]; then cat "$1".* 2>/dev/null
  else
    # valgrind always writes a log; only errors and leaks count.
    local f
    for f in "$1".*; do
      [ -f "$f" ] || continue
      grep -q 'ERROR SUMMARY: 0 errors' "$f" && ! grep -qE '(definitely|indirectly) lost: [1-9]' "$f" && continue
      cat "$f"
    done
  fi
}

# ---- positive control: the checker reports a leak here ------------------------------------------
cat >"$TMP/leaky.cc" <<'CC'
#include <cstdlib>
#include <cstring>
void* volatile keep;
int main() {
  char* p = static_cast<char*>(std::malloc(4242));
  std::memset(p, 1, 4242);
  keep = p;
  keep = nullptr;  // the only pointer is gone: a leak
  return 0;
}
CC
if [ "$TOOL" = asan ]; then cflags=(-fsanitize=address); else cflags=(); fi
if g++ -g -O1 "${cflags[@]}" -o "$TMP/leaky" "$TMP/leaky.cc" 2>"$TMP/leaky.err"; then
  checker "$TMP/san/control"
  "${CHK[@]}" "$TMP/leaky" >/dev/null 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] && grep -qE 'detected memory leaks|definitely lost: 4,242 bytes' <<<"$(reports "$TMP/san/control")" &&
     grep -qE '4242 byte|4,242 bytes' <<<"$(reports "$TMP/san/control")"; then
    pass checker-detects-leaks
  else fail checker-detects-leaks "a program that leaks 4242 bytes exited $rc without a report from $TOOL: $(reports "$TMP/san/control" | head -n 3 | tr '\n' ' ')"; fi
else fail checker-detects-leaks "g++ ${cflags[*]} failed: $(head -n 3 "$TMP/leaky.err" | tr '\n' ' ')"; fi

# ---- the namespace, PKI, API server ---------------------------------------------------------
ip netns add "$NS" || { fail setup "ip netns add $NS failed"; exit 1; }
ip -n "$NS" link set dev lo up
ns() { ip netns exec "$NS" "$@"; }
# iptables mode needs netfilter inside the namespace.
if ! probe=$(ns iptables-restore --noflush -w 5 2>&1 <<'EOF'
*nat
:VIPD-PROBE - [0:0]
-A VIPD-PROBE -m statistic --mode random --probability 0.5000000000 -j MARK --or-mark 0x4000
COMMIT
EOF
); then
  skip_all "iptables-restore does not work inside a network namespace here: $probe"
fi
tests/kube/gen_certs.sh "$TMP/pki" >/dev/null 2>&1 || { fail setup "gen_certs.sh failed"; exit 1; }
api_kubeconfig "$TMP/kubeconfig"
echo '{"items": []}' >"$TMP/objects.json"
start_api --load "$TMP/objects.json" || { fail setup "the API server did not start: $(tail -n 3 "$TMP/api.log")"; exit 1; }

# start_avipd LOG-PREFIX ARGS...: the sanitized vipd in iptables mode in $NS
start_avipd() {
  checker "$1"; shift
  ip netns exec "$NS" "${CHK[@]}" "$AVIPD" --mode iptables --forward-method nat \
    --admin-socket "$TMP/admin.sock" --metrics-address 127.0.0.1:10249 --health-address 127.0.0.1:10256 \
    --sync-full-resync-s 5 "$@" </dev/null >>"$TMP/vipd.log" 2>&1 &
  VIPD_PID=$!
  wait_generation 1 600   # slower under the checker
}
# stop_avipd CHECK-PREFIX LOG-PREFIX: SIGTERM, exit status 0 within 60 s, no reports
stop_avipd() {
  local rc=timeout _
  kill -TERM "$VIPD_PID" 2>/dev/null
  for _ in $(seq 1 600); do kill -0 "$VIPD_PID" 2>/dev/null || break; sleep 0.1; done
  if ! kill -0 "$VIPD_PID" 2>/dev/null; then wait "$VIPD_PID"; rc=$?; fi
  stop_pid "$VIPD_PID" KILL
  VIPD_PID=
  if [ "$rc" = 0 ]; then pass "$1-exits-cleanly"
  else fail "$1-exits-cleanly" "exit status $rc after SIGTERM (23: LeakSanitizer found leaks)"; fi
  local rep
  rep=$(reports "$2"; grep -E 'Sanitizer|runtime error' "$TMP/vipd.log")
  if [ -z "$rep" ]; then pass "$1-no-leaks"
  else
    fail "$1-no-leaks" "$(grep -m1 -E 'ERROR|SUMMARY|runtime error' <<<"$rep" | cut -c1-200)"
    grep -E '^==|^SUMMARY|^    #[0-9] |^Direct|^Indirect|runtime error' <<<"$rep" | head -n 40 | sed 's/^/    ! /'
  fi
}
admin_poke() {  # reads every admin endpoint and /metrics (their allocations count too)
  vipctl status >/dev/null 2>&1; vipctl list >/dev/null 2>&1; vipctl stats >/dev/null 2>&1
  vipctl dump >/dev/null 2>&1
  ns curl -s -m 5 http://127.0.0.1:10249/metrics >/dev/null
  ns curl -s -m 5 http://127.0.0.1:10256/healthz >/dev/null
}

# ---- run 1: the Kubernetes API, for ROUNDS rounds ---------------------------------------------
T1=$(date +%s)
if ! start_avipd "$TMP/san/api" --kubeconfig "$TMP/kubeconfig" --api-backoff-initial-ms 50 --api-backoff-max-ms 400 --api-qps 50; then
  fail api-run-exercised "vipd (ASan) did not program a table within 60 s: $(tail -n 3 "$TMP/vipd.log" | tr '\n' ' ')"
else
  # The driver: each round changes the cluster (a service added, one deleted, 20
  # slices modified) plus one fault by turn; it waits until vipd has programmed
  # the round (generation advanced) before the next one.
  drive() {  # FIRST LAST
    ns "$PYTHON" - "$CTL_PORT" "$VIPCTL" "$TMP/admin.sock" "$1" "$2" "$BULK" <<'PY'
import json, subprocess, sys, time, urllib.request
port, vipctl, sock, first, last = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
bulk = int(sys.argv[6])
def post(path, doc=None):
    req = urllib.request.Request("http://127.0.0.1:%s/%s" % (port, path), data=json.dumps(doc or {}).encode(), method="POST")
    return urllib.request.urlopen(req, timeout=20).read()
def gen():
    try:
        out = subprocess.run([vipctl, "--socket", sock, "status", "--json"], capture_output=True, timeout=10).stdout
        return json.loads(out)["generation"]
    except Exception:
        return -1
def svc(i, ip=None, port=8080):
    ip = ip or "10.97.%d.%d" % (i // 200, i % 200 + 1)
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s%d" % i, "namespace": "leak"},
            "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": port, "protocol": "TCP"}]}}
def slc(i, r):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "s%d-x" % i, "namespace": "leak", "labels": {"kubernetes.io/service-name": "s%d" % i}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["10.250.%d.%d" % (i, (r + k) % 250 + 1)], "conditions": {"ready": k != 1}}
                          for k in range(1 + (r + i) % 4)]}
stalls, events, stalled, slowest = 0, 0, [], 0.0
for r in range(first, last):
    t0 = time.monotonic()
    g0 = gen()
    items = [svc(100 + r)] + [slc(i, r) for i in range(20)]
    if r == first:
        items += [svc(i) for i in range(20)]
    post("apply", {"items": items})
    events += len(items)
    if r > 0:
        try:
            post("delete", {"resource": "services", "namespace": "leak", "name": "s%d" % (100 + r - 1)})
            events += 1
        except Exception:
            pass
    f = r % 8
    if f == 1:
        post("drop")
    elif f == 2:
        post("drop"); post("apply", {"items": [slc(0, r + 7)]}); post("compact")  # -> 410, relist
    elif f == 3:
        post("fault", {"garbage_lists": 1, "garbage": 1}); post("garbage")
    elif f == 4:
        post("apply", svc(5, ip="banana", port="eighty"))  # invalid: the good s5 stays
    elif f == 5:
        post("apply", svc(5))
        post("fault", {"fail": 4})
    elif f == 6 and r < 8:
        post("bulk", {"services": bulk, "endpoints": 2})
        events += 2 * bulk
    deadline = time.monotonic() + 30
    while gen() <= g0 and time.monotonic() < deadline:
        time.sleep(0.1)
    if gen() <= g0:
        stalls += 1
        stalled.append(r)
    slowest = max(slowest, time.monotonic() - t0)
print(json.dumps({"rounds": last - first, "objects_applied": events, "stalls": stalls, "stalled_rounds": stalled,
                  "slowest_round_s": round(slowest, 1), "generation": gen()}))
PY
  }
  g_start=$(generation)
  half=$((ROUNDS / 2))
  d1=$(drive 0 "$half" 2>&1 | tail -n 1)
  admin_poke
  st1=$(api_stats)   # its counters start from 0 again after the restart
  # The API server restarts (its history is gone: watches resume with a 410).
  stop_pid "$API_PID" KILL; API_PID=
  start_api || fail api-run-exercised "the API server did not come back"
  d2=$(drive "$half" "$ROUNDS" 2>&1 | tail -n 1)
  admin_poke
  st=$("$PYTHON" -c '
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({k: a.get(k, 0) + b.get(k, 0) for k in ("lists", "watches", "gone", "garbage_sent")}))' "$st1" "$(api_stats)" 2>/dev/null)
  g_end=$(generation)
  rss=$(awk '/VmHWM/ {print $2 " " $3}' "/proc/$VIPD_PID/status" 2>/dev/null)
  note "API driver: $d1 / $d2"
  note "API server: $(json_field "$st" lists) lists, $(json_field "$st" watches) watches, $(json_field "$st" gone) x 410, $(json_field "$st" garbage_sent) garbage answers; vipd generation $g_start -> $g_end, peak RSS $rss, $(( $(date +%s) - T1 )) s"
  ok=$("$PYTHON" - "$d1" "$d2" "$st" "$g_start" "$g_end" "$ROUNDS" <<'PY'
import json, sys
try:
    d1, d2, st = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
    g0, g1, rounds = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    ok = (d1["stalls"] + d2["stalls"] == 0 and g1 - g0 >= rounds and st["gone"] >= 3
          and st["garbage_sent"] >= 3 and st["lists"] >= 10)
    print("" if ok else "stalls %d, generations %d (want >= %d), 410s %d, garbage %d, lists %d" % (
        d1["stalls"] + d2["stalls"], g1 - g0, rounds, st["gone"], st["garbage_sent"], st["lists"]))
except Exception as e:
    print("no driver result: %s" % e)
PY
)
  if [ -z "$ok" ]; then pass api-run-exercised; else fail api-run-exercised "$ok"; fi
  stop_avipd api-run "$TMP/san/api"
fi
stop_pid "$API_PID"; API_PID=

# ---- run 2: a manifests directory -------------------------------------------------------------
T2=$(date +%s)
M=$TMP/manifests
mkdir -p "$M" "$TMP/stage"
cp config/demo/manifests/*.yaml "$M/"
if ! start_avipd "$TMP/san/man" --manifests-dir "$M"; then
  fail manifests-run-exercised "vipd (ASan) did not program a table within 60 s: $(tail -n 3 "$TMP/vipd.log" | tr '\n' ' ')"
else
  g_start=$(generation)
  stalls=0
  put() { printf '%s' "$2" >"$TMP/stage/$1" && mv -f "$TMP/stage/$1" "$M/$1"; }  # NAME TEXT
  for r in $(seq 1 "$ROUNDS"); do
    g0=$(generation)
    ips=$(for k in $(seq 0 $((r % 5))); do printf '"10.244.9.%d", ' $((k + r % 200 + 1)); done)
    put "svc-r.yaml" "apiVersion: v1
kind: Service
metadata: {name: r$((r % 7)), namespace: leak}
spec:
  clusterIP: 10.98.0.$((r % 7 + 1))
  ports: [{name: http, port: $((8000 + r)), protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: r$((r % 7))-x, namespace: leak, labels: {kubernetes.io/service-name: r$((r % 7))}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [${ips%, }]}]
"
    case $((r % 6)) in
      1) put "broken.yaml" "kind: Service
metadata: {name: x
spec: [" ;;
      2) put "junk.yaml" "apiVersion: v1
kind: Service
metadata: {name: junk, namespace: leak}
spec: {clusterIP: banana, ports: [{port: eighty}]}
" ;;
      3) rm -f "$M/broken.yaml" "$M/junk.yaml" ;;
      4) put "list.json" "{\"kind\":\"List\",\"items\":[{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"j$r\",\"namespace\":\"leak\"},\"spec\":{\"clusterIP\":\"10.99.0.$((r % 200 + 1))\",\"ports\":[{\"port\":80}]}}]}" ;;
      5) mv "$M" "$M.away"; printf 'not a directory\n' >"$M"; sleep 0.3; rm -f "$M"; mv "$M.away" "$M" ;;
    esac
    for _ in $(seq 1 100); do g=$(generation) && [ -n "$g" ] && [ "$g" -gt "$g0" ] && break; sleep 0.1; done
    [ "${g:-0}" -gt "$g0" ] || stalls=$((stalls + 1))
    [ $((r % 16)) -eq 0 ] && admin_poke
  done
  g_end=$(generation)
  rss=$(awk '/VmHWM/ {print $2 " " $3}' "/proc/$VIPD_PID/status" 2>/dev/null)
  note "manifests: $ROUNDS rounds, generation $g_start -> $g_end, stalls $stalls, peak RSS $rss, $(( $(date +%s) - T2 )) s"
  if [ "$stalls" -eq 0 ] && [ $((g_end - g_start)) -ge "$ROUNDS" ]; then pass manifests-run-exercised
  else fail manifests-run-exercised "stalls $stalls, generations $((g_end - g_start)) (want >= $ROUNDS)"; fi
  stop_avipd manifests-run "$TMP/san/man"
fi
