#!/usr/bin/env bash
# usage: scripts/test.sh [--unit-only]
#
# vipd's whole test run:
#  1. installs missing packages (scripts/bootstrap.sh) and builds
#     (meson setup build if needed; ninja -C build);
#  2. runs every GoogleTest executable under build/tests/unit (working directory:
#     the source root, as their meson workdir says) and counts its tests from the
#     --gtest_output JSON;
#  3. unless --unit-only, and only as root: runs tests/integration/*_test.sh,
#     once per variant named on a "# variants: a b" header line (seed_test.sh:
#     fnat, nat), counting their PASS:/FAIL:/SKIP: lines. Exit status 77 means
#     "cannot run here": its checks count as skipped, and it is said loudly.
#     Each runs under a 600 s limit, or the one of a "# timeout: N" header line.
#  2b. unless VIPD_ASAN=0 (ignored when CI=true: CI always runs it): builds the
#     unit tests again with ASan + UBSan in build-asan (gcc; meson setup
#     --buildtype debug -Db_sanitize=address,undefined -Db_lundef=false) and runs them there as the
#     suite "unit (asan)"; any sanitizer report fails that executable
#     (suppressions, each with its reason: tests/sanitizers/).
# Prints a summary per suite and ends with exactly one line
# "N passed, N failed, N skipped" summed over everything. Exit status 1 if
# anything failed (a build failure or a crashed test executable counts as one).
# Env: VIPD_BUILD_DIR (build directory, default "build"); VIPD_ASAN=0 skips the
# sanitizer suite (loudly, counted as skipped) unless CI=true, and with it
# tests/integration/leak_test.sh (LeakSanitizer on vipd from build-asan);
# VIPD_ASAN_BUILD_DIR (default "build-asan").
set -uo pipefail

UNIT_ONLY=0
for a in "$@"; do
  case $a in
    --unit-only) UNIT_ONLY=1 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: scripts/test.sh [--unit-only]" >&2; exit 2 ;;
  esac
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
# The distribution's python3 (standard library only) unless PYTHON is set.
if [ -z "${PYTHON:-}" ]; then if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi; fi
export PYTHON
B=${VIPD_BUILD_DIR:-build}
TMP=$(mktemp -d /tmp/vipd-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
T_START=$(date +%s)

PASSED=0
FAILED=0
SKIPPED=0
SUMMARY=()
add_suite() {  # name passed failed skipped [note]
  PASSED=$((PASSED + $2)); FAILED=$((FAILED + $3)); SKIPPED=$((SKIPPED + $4))
  SUMMARY+=("$(printf '  %-24s %4d passed, %3d failed, %3d skipped%s' "$1" "$2" "$3" "$4" "${5:+   ($5)}")")
}
finish() {
  echo
  echo "== summary ($(( $(date +%s) - T_START )) s)"
  local s
  for s in "${SUMMARY[@]}"; do echo "$s"; done
  echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
  [ "$FAILED" -eq 0 ]
  exit $?
}
section() { echo; echo "== $*"; }

# ---- packages -----------------------------------------------------------------
need_bootstrap() {
  local c m
  for c in ip ethtool sysctl "$PYTHON" meson ninja pkg-config g++ promtool prometheus; do
    command -v "$c" >/dev/null 2>&1 || return 0
  done
  for m in libdpdk yaml-cpp nlohmann_json cpp-httplib gtest gmock prometheus-cpp-core prometheus-cpp-pull; do
    pkg-config --exists "$m" 2>/dev/null || return 0
  done
  [ -e /usr/include/boost/program_options.hpp ] || return 0
  # Anything else on bootstrap.sh's list (it answers quickly when all is there).
  bash scripts/bootstrap.sh --check >/dev/null 2>&1 || return 0
  return 1
}
section "packages"
if need_bootstrap; then
  echo "something is missing; running scripts/bootstrap.sh"
  if ! bash scripts/bootstrap.sh; then
    add_suite bootstrap 0 1 0 "scripts/bootstrap.sh failed"
    finish
  fi
else
  echo "all present"
fi

# ---- build ------------------------------------------------------------------------
section "build"
if [ ! -f "$B/build.ninja" ]; then
  echo "meson setup $B"
  if ! meson setup "$B" >"$TMP/meson.log" 2>&1; then
    tail -n 40 "$TMP/meson.log"
    add_suite build 0 1 0 "meson setup failed"
    finish
  fi
fi
echo "ninja -C $B"
if ! ninja -C "$B" >"$TMP/build.log" 2>&1; then
  grep -E -A8 'error|FAILED' "$TMP/build.log" | head -n 60
  echo "... (last lines of the build log)"
  tail -n 15 "$TMP/build.log"
  add_suite build 0 1 0 "ninja failed"
  finish
fi
tail -n 1 "$TMP/build.log"

# ---- layers -------------------------------------------------------------------------
# The include graph between top-level folders follows the layers (scripts/layers.sh).
section "layers (scripts/layers.sh --check)"
if bash scripts/layers.sh --check; then
  add_suite layers 1 0 0
else
  add_suite layers 0 1 0 "an include crosses the layers the wrong way"
fi

# ---- docs ---------------------------------------------------------------------------
# The docs stand on their own: relative links and anchors resolve, cited paths
# exist, nothing cites an outside contract or an issue number (tests/check_docs.py).
section "docs (tests/check_docs.py)"
if "$PYTHON" tests/check_docs.py; then
  add_suite docs 1 0 0
else
  add_suite docs 0 1 0 "a broken link or path, an outside reference or an issue number"
fi

# ---- unit tests -------------------------------------------------------------------
section "unit tests ($B/tests/unit)"
# Counts one gtest JSON report: prints "passed failed skipped" then failed names.
gtest_count() {
  "$PYTHON" - "$1" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(1)
p = f = s = 0
names = []
for suite in d.get("testsuites", []):
    for t in suite.get("testsuite", []):
        name = "%s.%s" % (suite.get("name", "?"), t.get("name", "?"))
        if t.get("failures"):
            f += 1
            names.append(name)
        elif t.get("result") in ("SKIPPED", "SUPPRESSED") or t.get("status") == "NOTRUN":
            s += 1
        else:
            p += 1
print(p, f, s)
for n in names:
    print(n)
PY
}
# Runs every unit test executable under $1/tests/unit; sets UP UF US NBIN.
run_unit_bins() {
local B=$1 bin rel json log rc counts p f s
mapfile -t UNIT_BINS < <(
  [ -d "$B/tests/unit" ] && find "$B/tests/unit" -type f -perm -u+x -not -path '*.p/*' -print 2>/dev/null | sort)
UP=0; UF=0; US=0; NBIN=0
for bin in "${UNIT_BINS[@]}"; do
  # ELF executables only (skip scripts or stray files)
  [ "$(head -c 4 "$bin" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  NBIN=$((NBIN + 1))
  rel=${bin#"$B"/}
  json=$TMP/unit-$NBIN.json
  log=$TMP/unit-$NBIN.log
  # (braces + 2>/dev/null: no "Aborted" job message from bash when a test crashes)
  # Working directory: the source root, as the tests' meson workdir says
  # (they read fixtures from tests/data).
  { (cd "$ROOT" && timeout 300 "$(cd "$B" && pwd)/$rel" --gtest_output="json:$json" >"$log" 2>&1); } 2>/dev/null
  rc=$?
  if counts=$(gtest_count "$json"); then
    read -r p f s <<<"$(head -n 1 <<<"$counts")"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
      f=1
      echo "  $rel: exited with status $rc although no test failed"
    fi
  else
    p=0; f=1; s=0
    if [ "$rc" -eq 124 ]; then echo "  $rel: timed out after 300 s (no JSON report)"
    else echo "  $rel: no JSON report (crashed? exit status $rc)"; fi
  fi
  printf '  %-50s %4d passed, %3d failed, %3d skipped\n' "$rel" "$p" "$f" "$s"
  if [ "$f" -gt 0 ]; then
    tail -n +2 <<<"${counts:-}" | sed 's/^/    FAILED: /'
    # A sanitizer report's first lines say what and where (the tail is its shadow map).
    grep -m 12 -E '^==[0-9]+==ERROR|runtime error:|^SUMMARY:|^(READ|WRITE) of size|^    #[0-9] ' "$log" |
      sed 's/^/    ! /'
    echo "    ---- last lines of its output ----"
    tail -n 25 "$log" | sed 's/^/    | /'
  fi
  UP=$((UP + p)); UF=$((UF + f)); US=$((US + s))
done
if [ "$NBIN" -eq 0 ]; then
  echo "  !!! no unit test executables found under $B/tests/unit"
fi
}
run_unit_bins "$B"
add_suite unit "$UP" "$UF" "$US" "$NBIN executables"

# ---- unit tests under ASan + UBSan -------------------------------------------------
BA=${VIPD_ASAN_BUILD_DIR:-build-asan}
if [ "${VIPD_ASAN:-1}" = "0" ] && [ "${CI:-}" != "true" ]; then
  section "unit tests (asan): SKIPPED"
  echo "  !!! VIPD_ASAN=0: the ASan + UBSan unit suite is NOT run (CI=true always runs it)"
  add_suite "unit (asan)" 0 0 1 "SKIPPED: VIPD_ASAN=0"
else
  section "unit tests under ASan + UBSan ($BA/tests/unit)"
  TA=$(date +%s)
  asan_ok=1
  if [ ! -f "$BA/build.ninja" ]; then
    # -O0 (buildtype debug): the sanitized build is a second full build in CI;
    # unoptimized code compiles much faster and the unit tests stay quick.
    echo "meson setup $BA --buildtype debug -Db_sanitize=address,undefined -Db_lundef=false"
    if ! meson setup "$BA" --buildtype debug -Db_sanitize=address,undefined -Db_lundef=false >"$TMP/meson-asan.log" 2>&1; then
      tail -n 40 "$TMP/meson-asan.log"
      add_suite "unit (asan)" 0 1 0 "meson setup failed"
      asan_ok=0
    fi
  fi
  if [ "$asan_ok" -eq 1 ]; then
    # Only the unit test executables (not vipd/vipctl): saves build time.
    mapfile -t ASAN_TARGETS < <(ninja -C "$BA" -t targets all 2>/dev/null |
      sed -n 's/^\(tests\/unit\/[^:]*\): cpp_LINKER.*/\1/p' | grep -v '\.p/')
    echo "ninja -C $BA (${#ASAN_TARGETS[@]} unit test executables)"
    if [ "${#ASAN_TARGETS[@]}" -eq 0 ] || ! ninja -C "$BA" "${ASAN_TARGETS[@]}" >"$TMP/build-asan.log" 2>&1; then
      grep -E -A8 'error|FAILED' "$TMP/build-asan.log" | head -n 60
      tail -n 15 "$TMP/build-asan.log"
      add_suite "unit (asan)" 0 1 0 "ninja failed"
      asan_ok=0
    fi
  fi
  if [ "$asan_ok" -eq 1 ]; then
    TB=$(date +%s)
    echo "   build: $((TB - TA)) s"
    SUPP=$ROOT/tests/sanitizers
    # Any report fails the executable: ASan/UBSan abort, LSan exits non-zero.
    export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=0"
    export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:suppressions=$SUPP/ubsan.supp"
    run_unit_bins "$BA"
    unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS
    echo "   run: $(( $(date +%s) - TB )) s"
    add_suite "unit (asan)" "$UP" "$UF" "$US" "$NBIN executables, build+run $(( $(date +%s) - TA )) s"
  fi
fi

# ---- integration tests -------------------------------------------------------------
if [ "$UNIT_ONLY" -eq 1 ]; then
  section "integration tests: not run (--unit-only)"
  finish
fi
section "integration tests (tests/integration)"
RUNS=()
for t in tests/integration/*_test.sh; do
  [ -f "$t" ] || continue
  variants=$(sed -n 's/^# variants:[[:space:]]*//p' "$t" | head -n 1)
  if [ -n "$variants" ]; then
    for v in $variants; do RUNS+=("$t $v"); done
  else
    RUNS+=("$t")
  fi
done
if [ "${#RUNS[@]}" -eq 0 ]; then
  echo "  !!! no integration tests found"
elif [ "$(id -u)" -ne 0 ]; then
  echo "  !!! INTEGRATION TESTS SKIPPED: not root (they need network namespaces); run scripts/test.sh as root"
  for r in "${RUNS[@]}"; do
    # shellcheck disable=SC2086
    set -- $r
    add_suite "$(basename "$1" .sh)${2:+($2)}" 0 0 1 "skipped: not root"
  done
else
  for r in "${RUNS[@]}"; do
    # shellcheck disable=SC2086
    set -- $r
    name="$(basename "$1" .sh)${2:+($2)}"
    log=$TMP/integ.log
    # A "# timeout: N" header line gives a test more than the default 600 s
    # (fuzz_test.sh builds its own clang tree first).
    limit=$(sed -n 's/^# timeout:[[:space:]]*\([0-9][0-9]*\).*/\1/p' "$1" | head -n 1)
    limit=${limit:-600}
    echo "-- $name"
    timeout "$limit" bash "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    p=$(grep -c '^PASS: ' "$log")
    f=$(grep -c '^FAIL: ' "$log")
    s=$(grep -c '^SKIP: ' "$log")
    note=
    if [ "$rc" -eq 77 ]; then
      [ "$s" -eq 0 ] && s=1
      echo "  !!! $name: SKIPPED (exit status 77): $(grep -m1 '^SKIP: ' "$log" | cut -c7-)"
      note="SKIPPED: cannot run here"
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
      f=1
      if [ "$rc" -eq 124 ]; then note="timed out after $limit s"; else note="exit status $rc without a FAIL line"; fi
      echo "  !!! $name: $note"
    fi
    add_suite "$name" "$p" "$f" "$s" "$note"
  done
fi
finish
