#!/usr/bin/env bash
# usage: tests/integration/fuzz_test.sh
#
# The CI smoke run of the libFuzzer targets (tests/fuzz, docs/reliability.md): builds them
# with clang + ASan + UBSan in build-fuzz and runs each for
# $VIPD_FUZZ_SECONDS seconds (default 35) on its seed corpus, replaying every
# regression input in tests/fuzz/regressions/ first (scripts/fuzz.sh).
# Prints "PASS: <target> ..." or "FAIL: <target> ..." per target (a crash,
# a sanitizer report, a hang over 10 s, an invariant violation or a build
# failure fails it; the input is saved under tests/fuzz/crashes/<target>/).
# Exit status: 0 all passed, 1 a target failed, 77 (with SKIP lines) when
# clang or libFuzzer is not installed.
# timeout: 1800
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
TARGETS=(fuzz_packet fuzz_watch fuzz_manifest fuzz_config)

bash scripts/fuzz.sh --seconds "${VIPD_FUZZ_SECONDS:-35}" "${TARGETS[@]}"
rc=$?
if [ "$rc" -eq 77 ]; then
  for t in "${TARGETS[@]}"; do echo "SKIP: $t: clang/libFuzzer unavailable (scripts/bootstrap.sh installs clang and libclang-rt-14-dev)"; done
  echo "!!! fuzz_test: all ${#TARGETS[@]} fuzz targets SKIPPED: clang/libFuzzer unavailable" >&2
  exit 77
fi
exit "$rc"
