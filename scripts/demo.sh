#!/usr/bin/env bash
# usage: scripts/demo.sh            (as root, from anywhere in the repository)
#
# The seed scenario, end to end, in a network-namespace lab (scripts/lab.sh):
#  1. installs missing packages (scripts/bootstrap.sh) and builds (meson/ninja);
#  2. builds the lab, starts vipd in the lb namespace with config/demo/vipd.conf
#     on a temporary copy of config/demo/manifests;
#  3. 400 HTTP requests to the Service VIP 10.96.0.100:8080, per-pod table;
#  4. removes pod4 from the EndpointSlice (atomic mv), waits for the new
#     generation, stops pod4's server, 400 more requests: 0 failed, none to pod4;
#  5. prints the change-to-dataplane latency, `vipctl list` and `vipctl stats`;
#  6. tears everything down (also on failure or Ctrl-C).
# Exits non-zero, with a "demo: FAILED: ..." line, if any expectation fails.
# Env: LAB_PREFIX (namespace prefix, default "vipd-"); VIPD_BIN and VIPCTL_BIN
# (use these prebuilt binaries and skip the build).
set -euo pipefail

case ${1:-} in
  "") ;;
  -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: scripts/demo.sh" >&2; exit 2 ;;
esac

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export LAB_PREFIX=${LAB_PREFIX:-vipd-}
P=$LAB_PREFIX
CONF=config/demo/vipd.conf
VIP=10.96.0.100
REQUESTS=400
# The distribution's python3 (standard library only) unless PYTHON is set.
if [ -z "${PYTHON:-}" ]; then if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi; fi

step() { printf '==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
FAILED=0
expect_fail() { echo "demo: FAILED: $*" >&2; FAILED=$((FAILED + 1)); }
die() { echo "demo: FAILED: $*" >&2; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: must run as root (it creates network namespaces and runs DPDK); try: sudo scripts/demo.sh" >&2
  exit 1
fi
T_START=$(date +%s)

# ---- packages ---------------------------------------------------------------
need_bootstrap() {
  local c m
  for c in ip ethtool sysctl "$PYTHON" meson ninja pkg-config g++; do
    command -v "$c" >/dev/null 2>&1 || return 0
  done
  for m in libdpdk yaml-cpp nlohmann_json cpp-httplib gtest; do
    pkg-config --exists "$m" 2>/dev/null || return 0
  done
  [ -e /usr/include/boost/program_options.hpp ] || return 0
  return 1
}
if need_bootstrap; then
  step "installing missing packages (scripts/bootstrap.sh)"
  bash scripts/bootstrap.sh
else
  step "packages: all present"
fi

# ---- state, teardown ----------------------------------------------------------
TMP=$(mktemp -d /tmp/vipd-demo.XXXXXX)
VIPD_PID=
LAB_STARTED=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  if [ "$rc" -ne 0 ] && [ -s "$TMP/vipd.log" ]; then
    echo "---- last lines of the vipd log ($TMP/vipd.log) ----" >&2
    tail -n 25 "$TMP/vipd.log" >&2
    echo "----" >&2
  fi
  step "tearing down"
  if [ -n "$VIPD_PID" ] && kill -0 "$VIPD_PID" 2>/dev/null; then
    kill -TERM "$VIPD_PID" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$VIPD_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$VIPD_PID" 2>/dev/null; then
      info "vipd did not stop within 5 s of SIGTERM; killing it"
      kill -KILL "$VIPD_PID" 2>/dev/null
    fi
    wait "$VIPD_PID" 2>/dev/null
    info "vipd stopped (exit status $?)"
  fi
  [ "$LAB_STARTED" -eq 1 ] && scripts/lab.sh down | sed 's/^/    /'
  rm -rf "$TMP"
  if [ "$rc" -eq 0 ]; then
    echo "demo: OK ($(( $(date +%s) - T_START )) s)"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- build ------------------------------------------------------------------
find_bin() { local b; for b in "build/$1" "build/cmd/$1"; do [ -x "$b" ] && { echo "$b"; return 0; }; done; return 1; }
if [ -n "${VIPD_BIN:-}" ] && [ -n "${VIPCTL_BIN:-}" ]; then
  step "using prebuilt binaries $VIPD_BIN, $VIPCTL_BIN (no build)"
  VIPD=$VIPD_BIN
  VIPCTL=$VIPCTL_BIN
else
  if [ ! -f build/build.ninja ]; then
    step "configuring the build (meson setup build)"
    meson setup build >"$TMP/meson.log" 2>&1 || { tail -n 30 "$TMP/meson.log" >&2; die "meson setup failed"; }
  fi
  step "building (ninja -C build)"
  ninja -C build >"$TMP/build.log" 2>&1 || { tail -n 40 "$TMP/build.log" >&2; die "build failed"; }
  if grep -q 'no work to do' "$TMP/build.log"; then info "up to date"; else info "$(tail -n 1 "$TMP/build.log")"; fi
  VIPD=$(find_bin vipd) || die "build/vipd not found after the build"
  VIPCTL=$(find_bin vipctl) || die "build/vipctl not found after the build"
fi

# ---- helpers ----------------------------------------------------------------
vipctl() { "$VIPCTL" --socket "$TMP/admin.sock" "$@"; }
status_json() { vipctl status --json 2>/dev/null; }
# generation from a status JSON document (empty if absent)
generation_of() { [[ $1 =~ \"generation\"[[:space:]]*:[[:space:]]*([0-9]+) ]] && echo "${BASH_REMATCH[1]}"; }
json_field() { "$PYTHON" -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("" if v is None else v)' "$1" "$2"; }
vipd_alive() { kill -0 "$VIPD_PID" 2>/dev/null; }

# Sends $REQUESTS GETs from the client namespace; prints the result JSON.
http_run() {
  ip netns exec "${P}client" "$PYTHON" scripts/lab/client.py http "http://$VIP:8080/" \
    --count "$REQUESTS" --timeout 2 --max-time 40
}

# Prints a per-pod table from a client.py result.
show_distribution() {
  "$PYTHON" - "$1" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
total = r["ok"] + r["failed"]
print("    %-8s %8s %7s" % ("pod", "requests", "share"))
for pod in sorted(set(r["by_pod"]) | {"pod1", "pod2", "pod3", "pod4"}):
    n = r["by_pod"].get(pod, 0)
    share = 100.0 * n / total if total else 0.0
    print("    %-8s %8d %6.1f%%  %s" % (pod, n, share, "#" * int(round(share / 2))))
print("    %-8s %8d %6.1f%%  %s" % ("failed", r["failed"], 100.0 * r["failed"] / total if total else 0.0,
                                   " ".join("%s=%d" % kv for kv in sorted(r["errors"].items()))))
print("    (%d requests in %.2f s)" % (total, r["elapsed_s"]))
PY
}

# Removes the endpoint with address $2 from EndpointSlice file $1 in one atomic
# rename from directory $3; prints the time of the rename in microseconds
# (scripts/lab/slice_without.py).
remove_endpoint() { "$PYTHON" scripts/lab/slice_without.py "$1" "$2" "$3"; }

# ---- lab ----------------------------------------------------------------------
step "building the lab (scripts/lab.sh up, prefix '$P')"
LAB_STARTED=1
scripts/lab.sh up >"$TMP/lab.log" 2>&1 || { cat "$TMP/lab.log" >&2; die "scripts/lab.sh up failed"; }
info "client 10.0.0.2 -> [c0 vipd p0] -> br0 -> pod1..pod4 (servers on tcp 8080, udp 9053)"

# ---- vipd ---------------------------------------------------------------------
mkdir -p "$TMP/manifests" "$TMP/stage"
cp config/demo/manifests/*.yaml "$TMP/manifests/"
EAL=$(sed -n 's/^[[:space:]]*eal-args[[:space:]]*=[[:space:]]*//p' "$CONF" | tail -n 1)
step "starting vipd in ${P}lb ($CONF, log $TMP/vipd.log)"
ip netns exec "${P}lb" "$VIPD" --config "$CONF" \
  --manifests-dir "$TMP/manifests" --admin-socket "$TMP/admin.sock" \
  "--eal-args=$EAL --file-prefix ${P}demo" \
  </dev/null >"$TMP/vipd.log" 2>&1 &
VIPD_PID=$!

t0=$(date +%s%N)
gen=
for _ in $(seq 1 300); do   # ~30 s
  if ! vipd_alive; then
    wait "$VIPD_PID" && rc=0 || rc=$?
    VIPD_PID=
    die "vipd exited during start-up (exit status $rc)"
  fi
  st=$(status_json) && gen=$(generation_of "$st") && [ -n "$gen" ] && [ "$gen" -ge 1 ] && break
  gen=
  sleep 0.1
done
[ -n "$gen" ] || die "vipd did not report generation >= 1 within 30 s (vipctl status --json)"
info "ready: generation $gen after $(( ($(date +%s%N) - t0) / 1000000 )) ms; mode $(json_field "$st" mode), forward method $(json_field "$st" forward_method)"

# ---- traffic: 4 pods ----------------------------------------------------------
step "sending $REQUESTS HTTP requests to http://$VIP:8080/ from ${P}client"
r1=$(http_run) || die "client.py failed"
show_distribution "$r1"
"$PYTHON" - "$r1" <<'PY' || expect_fail "first run: expected 0 failed and all four pods to answer"
import json, sys
r = json.loads(sys.argv[1])
sys.exit(0 if r["failed"] == 0 and all(r["by_pod"].get("pod%d" % i, 0) > 0 for i in range(1, 5)) else 1)
PY

# ---- remove pod4 ----------------------------------------------------------------
step "removing pod4 (10.244.3.44) from the EndpointSlice (write new file, mv over)"
st=$(status_json) || die "vipctl status failed"
gen_before=$(generation_of "$st") || die "no generation in vipctl status --json"
t_mv=$(remove_endpoint "$TMP/manifests/endpointslice-db.yaml" 10.244.3.44 "$TMP/stage") \
  || die "could not rewrite the EndpointSlice copy"
gen_after=
polls=0
for _ in $(seq 1 5000); do   # bounded: ~10 s
  t_poll=${EPOCHREALTIME/./}
  polls=$((polls + 1))
  st=$(status_json) && g=$(generation_of "$st") && [ -n "$g" ] && [ "$g" -gt "$gen_before" ] && { gen_after=$g; break; }
  [ $(( ${EPOCHREALTIME/./} - t_mv )) -ge 10000000 ] && break
  sleep 0.002
done
t_seen=${EPOCHREALTIME/./}
[ -n "$gen_after" ] || die "generation did not advance past $gen_before within 10 s of the manifest change"
outside_us=$(( t_seen - t_mv ))
outside_ms=$(printf '%d.%03d' $((outside_us / 1000)) $((outside_us % 1000)))
poll_ms=$(( (t_seen - t_poll) / 1000 ))
inside_ms=$(json_field "$st" last_change_to_applied_ms)
inside_ms=$(printf '%.3f' "$inside_ms" 2>/dev/null || echo "${inside_ms:-?}")
info "generation $gen_before -> $gen_after"

step "stopping pod4's server (scripts/lab.sh kill-pod 4)"
scripts/lab.sh kill-pod 4 >/dev/null || die "kill-pod 4 failed"

step "sending $REQUESTS more requests (expect 0 failed, none to pod4)"
r2=$(http_run) || die "client.py failed"
show_distribution "$r2"
"$PYTHON" - "$r2" <<'PY' || expect_fail "after removing pod4: expected 0 failed, nothing to pod4, pod1..pod3 all answering"
import json, sys
r = json.loads(sys.argv[1])
ok = r["failed"] == 0 and r["by_pod"].get("pod4", 0) == 0 and \
     all(r["by_pod"].get("pod%d" % i, 0) > 0 for i in range(1, 4))
sys.exit(0 if ok else 1)
PY

step "change-to-dataplane latency (pod4 removal)"
info "vipd (manifest change -> dataplane tables published): ${inside_ms:-?} ms   [vipctl status: last_change_to_applied_ms]"
info "outside (mv -> vipctl shows the new generation):      ${outside_ms} ms   [$polls vipctl polls; the last took ${poll_ms} ms]"
line=$(grep -E "generation $gen_after applied" "$TMP/vipd.log" | tail -n 1 || true)
[ -n "$line" ] && info "vipd log: ${line#*vipd }"

step "vipctl list"
vipctl list 2>&1 | sed 's/^/    /' || expect_fail "vipctl list failed"
step "vipctl stats"
vipctl stats 2>&1 | sed 's/^/    /' || expect_fail "vipctl stats failed"

vipd_alive || expect_fail "vipd is no longer running"
[ "$FAILED" -eq 0 ] || die "$FAILED expectation(s) failed (see above)"
