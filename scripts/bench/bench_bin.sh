# Sourced by scripts/bench/callgrind_rows.sh and l3fwd_rows.sh: the release
# bench binary, built when BUILD=1 (meson setup on first use), its path in BIN.
# NAME (the calling script) prefixes the error.
BUILD_DIR=${BENCH_BUILD_DIR:-build-bench}
BIN=$BUILD_DIR/bench/vipd_bench
if [ "${BUILD:-1}" = 1 ]; then
  [ -f "$BUILD_DIR/build.ninja" ] || meson setup "$BUILD_DIR" -Dbench=true -Dtests=false --buildtype=release >&2
  ninja -C "$BUILD_DIR" bench/vipd_bench >&2
fi
[ -x "$BIN" ] || { echo "$NAME: $BIN missing (run without --no-build)" >&2; exit 1; }
# Every symbol bound at start-up, as scripts/bench.sh does (lazy binding
# would be counted in the first packets measured).
export LD_BIND_NOW=1
