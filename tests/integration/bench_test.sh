#!/usr/bin/env bash
# usage: tests/integration/bench_test.sh [--report-only]
# timeout: 1200
#
# The benchmark suite (scripts/bench.sh) runs end to end, so that a change which
# breaks a benchmark or the report shows here and not at the next benchmark
# run. vipd_bench is built into the test build ($VIPD_BUILD_DIR, default
# build: `meson configure -Dbench=true`, after which only bench/ compiles),
# `scripts/bench.sh --smoke --no-kernel` runs every benchmark but the kernel
# modes at tiny sizes into a temporary directory, and scripts/bench/report.py
# renders a report from them. No time is checked (the numbers of a debug
# build at tiny sizes mean nothing; docs/benchmarks.md is where times go):
#   report-committed  docs/benchmarks.md is what `scripts/bench/report.py --check`
#                  renders from the committed results (bench/results/full,
#                  changes.jsonl, not_kept.jsonl, added/) and the template
#   build          vipd_bench builds
#   suite-runs     bench.sh exits 0, every benchmark left its result line,
#                  run.log names no failed run
#   pipeline       benchmark 1: every case forwarded all of its packets (0
#                  drops in every phase, the l3fwd baseline's included), held
#                  every flow in its connection table, and measured every phase
#                  and both baselines (I/O-only, l3fwd)
#   memfloor       the memory floor: every shape measured, the established
#                  packet read as 4 lines in 3 levels
#   control-plane, control-plane-sync, control-plane-decode
#                  benchmarks 2, 2b and 2c: every change applied and measured
#                  (both with a polling worker and offline), the list decoded
#   memory         benchmark 4: the connection table really holds the flows,
#                  and RSS grew while they were added (the pages are touched)
#   callgrind      benchmark 5: instruction counts per packet for each phase,
#                  of IPv4 and of IPv6 (--family 6),
#                  I/O-only < l3fwd baseline < established (skipped, loudly, without valgrind: scripts/bootstrap.sh
#                  installs it)
#   callgrind-rows scripts/bench/callgrind_rows.sh (section 5 alone) at tiny
#                  sizes into a temporary directory: an IPv4, an IPv6 (with
#                  its IPv4 row) and a control-plane row, each stamped with the
#                  commit, the date and the command, counted on the bench's
#                  virtual clock, with the est and newconn profiles
#   report         report.py renders every section from these results, and
#                  the two pipeline plots when gnuplot is installed
#   report-bad-input  report.py refuses a directory without results with one
#                  clear line (no traceback), and skips a truncated result
#                  line with a warning instead of failing
# --report-only runs report-committed and report-bad-input alone (on the
# committed results; no build, no benchmark run: seconds).
# Safety: benchmarks 1, 2, 4, 5 use only DPDK's in-process net_ring0 vdev;
# nothing is sent on any interface.
# Prints PASS:/FAIL:/SKIP: lines; exit 0 all passed, 1 any failed.
# Env: VIPD_BUILD_DIR (default build), PYTHON.
set -uo pipefail
NAME=bench_test
REPORT_ONLY=0
[ "${1:-}" = --report-only ] && REPORT_ONLY=1
if [ $REPORT_ONLY = 1 ]; then
  CHECKS=(report-committed report-bad-input)
else
  CHECKS=(report-committed build suite-runs pipeline memfloor control-plane control-plane-sync control-plane-decode
          memory callgrind callgrind-rows report report-bad-input)
fi
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# report_bad_input SRC: report.py on an empty directory and on a copy of the
# results in SRC with a truncated pipeline line.
report_bad_input() {
  local src=$1 erc crc
  mkdir -p "$TMP/empty" "$TMP/cut"
  "$PYTHON" scripts/bench/report.py "$TMP/empty" "$TMP/empty.md" "$TMP/empty-img" >"$TMP/empty.log" 2>&1
  erc=$?
  cp "$src"/*.json* "$TMP/cut/"
  head -c 100 "$src/pipeline.jsonl" >>"$TMP/cut/pipeline.jsonl"  # a run cut short
  "$PYTHON" scripts/bench/report.py "$TMP/cut" "$TMP/cut.md" "$TMP/cut-img" >"$TMP/cut.log" 2>&1
  crc=$?
  if [ "$erc" -ne 0 ] && grep -q "has no machine.json" "$TMP/empty.log" && ! grep -q Traceback "$TMP/empty.log" &&
     [ "$crc" -eq 0 ] && grep -q "is not JSON" "$TMP/cut.log" && grep -qF "## Results summary" "$TMP/cut.md"; then
    pass report-bad-input
  else
    fail report-bad-input "empty dir: exit $erc, $(head -c 200 "$TMP/empty.log" | tr '\n' ' '); truncated line: exit $crc, $(tail -n 2 "$TMP/cut.log" | tr '\n' ' ')"
  fi
}

TMP=$(mktemp -d /tmp/vipd-bench-test.XXXXXX)
lib_traps

# ---- the committed report ----
if "$PYTHON" scripts/bench/report.py --check >"$TMP/check.log" 2>&1; then
  pass report-committed
else
  head -n 30 "$TMP/check.log" | sed 's/^/    | /'
  fail report-committed "docs/benchmarks.md differs from what scripts/bench/report.py renders (run it)"
fi
if [ $REPORT_ONLY = 1 ]; then
  report_bad_input bench/results/full
  exit 0
fi

B=${VIPD_BUILD_DIR:-build}
if [ ! -f "$B/build.ninja" ]; then
  fail build "no build directory $B (scripts/test.sh sets it up: meson setup $B)"
  exit 1
fi

# ---- build ----
if ! meson configure "$B" -Dbench=true >"$TMP/configure.log" 2>&1; then
  fail build "meson configure $B -Dbench=true failed: $(tail -n 3 "$TMP/configure.log" | tr '\n' ' ')"
  exit 1
fi
if ! ninja -C "$B" bench/vipd_bench >"$TMP/build.log" 2>&1; then
  tail -n 30 "$TMP/build.log" | sed 's/^/    | /'
  fail build "ninja -C $B bench/vipd_bench failed"
  exit 1
fi
pass build

# ---- the suite, at tiny sizes ----
OUT=$TMP/results/smoke
BENCH_BUILD_DIR=$B timeout 900 scripts/bench.sh --smoke --no-kernel --no-build --no-doc --out "$OUT" \
  >"$TMP/bench.log" 2>&1
rc=$?
missing=()
for f in machine.json pipeline.jsonl memfloor.jsonl memory.jsonl cp.jsonl sync.jsonl decode.jsonl; do
  [ -s "$OUT/$f" ] || missing+=("$f")
done
failed=$(grep -E '^bench: .*(FAILED|no result from|failed)' "$OUT/run.log" 2>/dev/null | head -n 3)
if [ "$rc" -eq 0 ] && [ "${#missing[@]}" -eq 0 ] && [ -z "$failed" ]; then
  pass suite-runs
  note "bench.sh --smoke: $(tail -n 1 "$OUT/run.log" | sed 's/^bench: //')"
else
  tail -n 20 "$TMP/bench.log" | sed 's/^/    | /'
  fail suite-runs "exit $rc; results missing: ${missing[*]:-none}; ${failed:-no failed run logged}"
fi

# check NAME FILE PYTHON: PYTHON sees `rows` (the JSON lines of FILE) and
# prints nothing when they are right, else what is wrong.
check() {
  local name=$1 file=$2 code=$3 out
  if [ ! -s "$OUT/$file" ]; then
    fail "$name" "no $file"
    return
  fi
  out=$("$PYTHON" - "$OUT/$file" "$code" <<'EOF' 2>&1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = []
def want(cond, what):
    if not cond:
        bad.append(what)
exec(sys.argv[2])
print("; ".join(bad))
EOF
)
  if [ -z "$out" ]; then pass "$name"; else fail "$name" "$out"; fi
}

check pipeline pipeline.jsonl '
want(sorted((r["services"], r["flows"]) for r in rows) == [(1, 1000), (1000, 1000), (1000, 10000)], "cases: %s" % [(r.get("services"), r.get("flows")) for r in rows])
for r in rows:
    c = "%s/%s" % (r.get("services"), r.get("flows"))
    for ph in ("fill", "est", "reply", "newconn"):
        want(r.get(ph + "_drops") == 0, "%s: %s_drops %s" % (c, ph, r.get(ph + "_drops")))
        want((r.get(ph + "_ns") or 0) > 0 and (r.get(ph + "_packets") or 0) > 0, "%s: no %s measurement" % (c, ph))
    want((r.get("baseline_ns") or 0) > 0, "%s: no I/O-only baseline" % c)
    want((r.get("l3fwd_ns") or 0) > 0 and (r.get("l3fwd_packets") or 0) > 0, "%s: no l3fwd baseline" % c)
    want(r.get("l3fwd_drops") == 0, "%s: the l3fwd baseline dropped %s frames" % (c, r.get("l3fwd_drops")))
    want(r.get("conn_entries") == r.get("flows"), "%s: %s entries in the connection table" % (c, r.get("conn_entries")))
'
check memfloor memfloor.jsonl '
want(len(rows) == 1, "%d rows" % len(rows))
for r in rows:
    want(r.get("est_lines") == 4 and r.get("est_levels") == 3, "established packet: %s lines, %s levels" % (r.get("est_lines"), r.get("est_levels")))
    for k in ("est", "reply", "chain1", "chain2", "chain3", "wide", "size1", "size4", "size16", "size64", "xlat"):
        want((r.get(k + "_ns") or 0) > 0, "no %s measurement" % k)
'
check control-plane cp.jsonl '
want(sorted(r.get("worker") for r in rows) == ["offline", "running"], "workers: %s" % [r.get("worker") for r in rows])
for r in rows:
    want(r.get("changes") == 20 and (r.get("change_total_p99_us") or 0) > 0, "cp %s: %s changes, p99 %s" % (r.get("worker"), r.get("changes"), r.get("change_total_p99_us")))
    want((r.get("initial_total_ms") or 0) > 0, "cp %s: no initial list time" % r.get("worker"))
'
check control-plane-sync sync.jsonl '
want(len(rows) == 2, "%d rows" % len(rows))
for r in rows:
    want(r.get("changes") == 20 and (r.get("change_p99_us") or 0) > 0 and (r.get("baseline_change_p50_us") or 0) > 0,
         "sync %s: %s changes, p99 %s, baseline p50 %s" % (r.get("worker"), r.get("changes"), r.get("change_p99_us"), r.get("baseline_change_p50_us")))
'
check control-plane-decode decode.jsonl '
want(len(rows) == 1 and (rows[0].get("slices") or 0) > 0 and (rows[0].get("decode_s") or 0) > 0, "decode: %s" % rows)
'
check memory memory.jsonl '
want(len(rows) == 1, "%d rows" % len(rows))
for r in rows:
    want(r.get("conn_entries") == r.get("flows") == 10000, "%s entries for %s flows" % (r.get("conn_entries"), r.get("flows")))
    want(r.get("rss_kb_with_flows", 0) > r.get("rss_kb_setup", 0), "RSS did not grow with the flows: %s -> %s kB" % (r.get("rss_kb_setup"), r.get("rss_kb_with_flows")))
'
if command -v valgrind >/dev/null 2>&1; then
  check callgrind callgrind.jsonl '
pk = [r for r in rows if r.get("bench") != "cp" and r.get("family", 4) == 4]
pk6 = [r for r in rows if r.get("bench") != "cp" and r.get("family") == 6]
want(len(pk) == 1 and len(pk6) == 1 and len(rows) == 3,
     "%d IPv4 pipeline, %d IPv6 pipeline and %d cp rows" % (len(pk), len(pk6), len(rows) - len(pk) - len(pk6)))
for r in pk6:
    for ph in ("est", "reply", "newconn", "baseline"):
        want(0 < (r.get(ph + "_ir_per_pkt") or 0) < 1e6, "IPv6 %s: %s instructions per packet" % (ph, r.get(ph + "_ir_per_pkt")))
    want(r.get("baseline_ir_per_pkt", 0) < r.get("est_ir_per_pkt", 0), "IPv6: the I/O-only baseline costs more than forwarding")
for r in pk:
    for ph in ("est", "reply", "newconn", "baseline", "l3fwd"):
        want(0 < (r.get(ph + "_ir_per_pkt") or 0) < 1e6, "%s: %s instructions per packet" % (ph, r.get(ph + "_ir_per_pkt")))
    want(r.get("baseline_ir_per_pkt", 0) < r.get("est_ir_per_pkt", 0), "the I/O-only baseline costs more than forwarding")
    want(r.get("baseline_ir_per_pkt", 0) < r.get("l3fwd_ir_per_pkt", 0) < r.get("est_ir_per_pkt", 0),
         "not I/O-only < l3fwd < established: %s / %s / %s instructions" % (r.get("baseline_ir_per_pkt"), r.get("l3fwd_ir_per_pkt"), r.get("est_ir_per_pkt")))
'
  # Section 5 alone (scripts/bench/callgrind_rows.sh), tiny, into $TMP.
  if BENCH_BUILD_DIR=$B scripts/bench/callgrind_rows.sh --no-build --rows "1:1000:4 1:1000:6" --cp 200 \
       --packets 2000 --newconn-packets 1000 --out "$TMP/cgrows" >"$TMP/cgrows.log" 2>&1; then
    OUT_RUN=$OUT OUT=$TMP/cgrows
    cat "$OUT/callgrind_ipv6.jsonl" >>"$OUT/callgrind.jsonl" 2>/dev/null
    check callgrind-rows callgrind.jsonl '
pk = [r for r in rows if r.get("bench") == "pipeline" and r.get("family", 4) == 4]
pk6 = [r for r in rows if r.get("bench") == "pipeline" and r.get("family") == 6]
cp = [r for r in rows if r.get("bench") == "cp"]
want(len(pk) == 1 and len(pk6) == 1 and len(cp) == 1, "%d IPv4, %d IPv6, %d cp rows" % (len(pk), len(pk6), len(cp)))
for r in rows:
    want(r.get("commit") and r.get("measured") and "vipd_bench" in r.get("command", ""), "no stamp: %s" % r)
for r in pk + pk6:
    want(r.get("clock") == "virtual", "clock %s under valgrind" % r.get("clock"))
    want(0 < (r.get("est_ir_per_pkt") or 0) < 1e6 and r.get("est_profile") and r.get("newconn_profile"),
         "est %s, profiles %s / %s" % (r.get("est_ir_per_pkt"), bool(r.get("est_profile")), bool(r.get("newconn_profile"))))
for r in pk6:
    want((r.get("ipv4") or {}).get("est_ir_per_pkt") == pk[0].get("est_ir_per_pkt") if pk else False, "IPv6 row without its IPv4 row")
'
    OUT=$OUT_RUN
  else
    tail -n 5 "$TMP/cgrows.log" | sed 's/^/    | /'
    fail callgrind-rows "scripts/bench/callgrind_rows.sh failed"
  fi
else
  skip callgrind "valgrind not installed (scripts/bootstrap.sh installs it)"
  skip callgrind-rows "valgrind not installed (scripts/bootstrap.sh installs it)"
fi

# ---- the report ----
if "$PYTHON" scripts/bench/report.py "$OUT" "$TMP/doc.md" "$TMP/img" >"$TMP/report.log" 2>&1; then
  lacks=()
  for s in "Report for vipd " "## Platform" "## Configuration" "## Results summary" "### Design targets" \
           "## 1. Dataplane pipeline" "### Baselines: I/O only and l3fwd" "ratio to l3fwd" "### The memory floor" "one line of a packed 16 MiB region" \
           "## 2. Control plane" "### 2b." "## 3." "## 4." "## 5." "## Measured changes" "## How to reproduce" \
           "## Published numbers"; do
    grep -qF -- "$s" "$TMP/doc.md" || lacks+=("$s")
  done
  if command -v gnuplot >/dev/null 2>&1; then
    for p in pipeline_services pipeline_flows; do
      [ -s "$TMP/img/$p.svg" ] && grep -qF "img/$p.svg" "$TMP/doc.md" || lacks+=("plot $p (gnuplot is installed)")
    done
  fi
  if [ "${#lacks[@]}" -eq 0 ]; then
    pass report
  else
    fail report "the report lacks: ${lacks[*]}"
  fi
else
  tail -n 10 "$TMP/report.log" | sed 's/^/    | /'
  fail report "report.py failed"
fi

# ---- report.py on bad input ----
report_bad_input "$OUT"
