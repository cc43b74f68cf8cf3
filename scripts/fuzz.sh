#!/usr/bin/env bash
# usage: scripts/fuzz.sh [--seconds N] [--jobs N] [TARGET...]
#
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan, in the
# build directory build-fuzz, or $VIPD_FUZZ_BUILD_DIR) and runs each for N
# seconds (default 40: a smoke run of a few minutes for the four targets).
# Each run starts from the seed corpus tests/fuzz/corpus/<target>/ plus the
# regression inputs tests/fuzz/regressions/<target>/ (inputs that once
# crashed; all of them are replayed first); new corpus entries go to a
# scratch directory, not into the tree. Prints "PASS: <target> ..." or
# "FAIL: <target> ..." per target with executions, coverage and corpus size,
# and copies any crashing input to tests/fuzz/crashes/<target>/ (fix the bug,
# then move the input to tests/fuzz/regressions/<target>/).
# Exit status: 0 all passed, 1 a target failed, 77 clang/libFuzzer missing.
# Env: VIPD_FUZZ_KEEP=DIR keeps the scratch corpora and logs in DIR.
set -uo pipefail

SECONDS_PER=40
JOBS=2
TARGETS=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) SECONDS_PER=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    fuzz_*) TARGETS+=("$1"); shift ;;
    *) echo "usage: scripts/fuzz.sh [--seconds N] [--jobs N] [TARGET...]" >&2; exit 2 ;;
  esac
done
[ "${#TARGETS[@]}" -eq 0 ] && TARGETS=(fuzz_packet fuzz_watch fuzz_manifest fuzz_config)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
B=${VIPD_FUZZ_BUILD_DIR:-build-fuzz}

# ---- clang + libFuzzer --------------------------------------------------------
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz.sh: clang++ not installed (scripts/bootstrap.sh installs clang); no fuzzing"
  exit 77
fi
probe=$(mktemp -d /tmp/vipd-fuzz-probe.XXXXXX)
printf '#include <cstdint>\n#include <cstddef>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' >"$probe/p.cc"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cc" -o "$probe/p" >"$probe/log" 2>&1; then
  echo "fuzz.sh: clang++ cannot link a libFuzzer target (libclang-rt-*-dev missing?):"
  sed 's/^/  /' "$probe/log" | head -n 5
  rm -rf "$probe"
  exit 77
fi
rm -rf "$probe"

# ---- build ------------------------------------------------------------------------
T0=$(date +%s)
if [ ! -f "$B/build.ninja" ]; then
  echo "== meson setup $B (clang, -Dfuzz=true, address+undefined)"
  if ! CC=clang CXX=clang++ meson setup "$B" -Dfuzz=true -Dtests=false \
      -Db_sanitize=address,undefined -Db_lundef=false >"/tmp/vipd-fuzz-setup.$$.log" 2>&1; then
    tail -n 30 "/tmp/vipd-fuzz-setup.$$.log"
    for t in "${TARGETS[@]}"; do echo "FAIL: $t (meson setup of $B failed)"; done
    exit 1
  fi
  rm -f "/tmp/vipd-fuzz-setup.$$.log"
fi
echo "== building ${TARGETS[*]} in $B"
ninja_targets=()
for t in "${TARGETS[@]}"; do ninja_targets+=("tests/fuzz/$t"); done
if ! nice -n 10 ninja -C "$B" -j "$JOBS" "${ninja_targets[@]}" >"/tmp/vipd-fuzz-build.$$.log" 2>&1; then
  grep -E -A8 'error|FAILED' "/tmp/vipd-fuzz-build.$$.log" | head -n 40
  for t in "${TARGETS[@]}"; do echo "FAIL: $t (build failed)"; done
  exit 1
fi
rm -f "/tmp/vipd-fuzz-build.$$.log"
echo "   build: $(( $(date +%s) - T0 )) s"

# ---- run --------------------------------------------------------------------------
WORK=${VIPD_FUZZ_KEEP:-$(mktemp -d /tmp/vipd-fuzz.XXXXXX)}
mkdir -p "$WORK"
[ -z "${VIPD_FUZZ_KEEP:-}" ] && trap 'rm -rf "$WORK"' EXIT
# Any sanitizer report is fatal; leaks count (libFuzzer checks per input).
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
FAILS=0
for t in "${TARGETS[@]}"; do
  bin=$B/tests/fuzz/$t
  corpus=tests/fuzz/corpus/$t
  regress=tests/fuzz/regressions/$t
  scratch=$WORK/$t
  crashes=$WORK/$t-crashes
  mkdir -p "$scratch" "$crashes"
  log=$WORK/$t.log
  dirs=("$scratch" "$corpus")
  [ -d "$regress" ] && dirs+=("$regress")
  # -rss_limit_mb: 2 GB (the packet target maps 256 MB of DPDK memory);
  # -timeout: a single input slower than 10 s is a hang.
  echo "== $t: $SECONDS_PER s"
  (cd "$ROOT" && timeout $((SECONDS_PER + 120)) "$bin" -max_total_time="$SECONDS_PER" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$crashes/" "${dirs[@]}") >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -n 1)
  seeds=$(find "$corpus" -type f | wc -l)
  nreg=0; [ -d "$regress" ] && nreg=$(find "$regress" -type f | wc -l)
  summary="execs=${execs:-?} ${cov:-cov: ?} seeds=$seeds regressions=$nreg rc=$rc"
  ncrash=$(find "$crashes" -type f | wc -l)
  if [ "$rc" -eq 0 ] && [ "$ncrash" -eq 0 ]; then
    echo "PASS: $t $summary"
  else
    FAILS=$((FAILS + 1))
    mkdir -p "tests/fuzz/crashes/$t"
    cp "$crashes"/* "tests/fuzz/crashes/$t/" 2>/dev/null
    echo "FAIL: $t $summary; inputs saved in tests/fuzz/crashes/$t/:"
    ls "tests/fuzz/crashes/$t" | sed 's/^/  /'
    echo "  ---- last lines of $t's log ----"
    grep -vE '^#[0-9]+|^\s*$' "$log" | tail -n 30 | sed 's/^/  | /'
  fi
done
echo "== fuzz: ${#TARGETS[@]} targets, $FAILS failed, $(( $(date +%s) - T0 )) s in all"
[ "$FAILS" -eq 0 ]
