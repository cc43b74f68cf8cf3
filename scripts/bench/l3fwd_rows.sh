#!/usr/bin/env bash
# usage: scripts/bench/l3fwd_rows.sh [--cases "S:F ..."] [--cg-cases "S:F ..."]
#                                    [--packets N] [--reps N] [--out FILE] [--no-build]
# Benchmark 1's two baselines beside the pipeline, on their own (without a whole
# scripts/bench.sh run): for each case S services / F flows, one timed
# `vipd_bench pipeline --phases fill,est,baseline,l3fwd` (established TCP, full
# NAT; the I/O-only and the l3fwd baseline in the same process, on the same port
# and frames), and for each --cg-cases case the same phases under callgrind
# (instructions per packet, exact). Appends one JSON line per case to FILE
# (default bench/results/added/l3fwd.jsonl), with the commands, the commit, the
# date and the load; scripts/bench/report.py shows them in docs/benchmarks.md
# ("Baselines: I/O only and l3fwd") until a full scripts/bench.sh run, whose
# pipeline runs include the l3fwd phase, replaces them.
# Defaults: cases 1:1000 100000:1000 100000:1000000, each also under callgrind,
# 1,000,000 packets x 5 repetitions (a few minutes on a 2-core VM).
# Safety: only DPDK's in-process net_ring0 vdev, as scripts/bench.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
CASES="1:1000 100000:1000 100000:1000000" CG_CASES="1:1000 100000:1000 100000:1000000"
PKTS=1000000 REPS=5 OUT=bench/results/added/l3fwd.jsonl BUILD=1
CMDLINE="scripts/bench/l3fwd_rows.sh $*"
while [ $# -gt 0 ]; do
  case $1 in
    --cases) CASES=$2; shift ;;
    --cg-cases) CG_CASES=$2; shift ;;
    --packets) PKTS=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --out) OUT=$2; shift ;;
    --no-build) BUILD=0 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "l3fwd_rows.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
NAME=l3fwd_rows.sh
. "$(dirname "$0")/bench_bin.sh"
TMPD=$(mktemp -d /tmp/vipd-l3fwd-rows.XXXXXX)
trap 'rm -rf "$TMPD"' EXIT
mkdir -p "$(dirname "$OUT")"

for c in $CASES; do
  s=${c%%:*} f=${c##*:}
  args=(pipeline --services "$s" --flows "$f" --packets "$PKTS" --reps "$REPS" --phases fill,est,baseline,l3fwd)
  echo "l3fwd_rows: $BIN ${args[*]}" >&2
  timeout 600 "$BIN" "${args[@]}" 2>>"$TMPD/log" | tail -n 1 >"$TMPD/timed.json" || { tail -5 "$TMPD/log" >&2; exit 1; }
  cg=""
  cgcmd=""
  if [[ " $CG_CASES " == *" $c "* ]] && command -v valgrind >/dev/null 2>&1; then
    d=$TMPD/cg-$s-$f
    mkdir -p "$d"
    cgargs=(pipeline --services "$s" --flows "$f" --packets 20000 --reps 1 --no-warmup --phases fill,est,baseline,l3fwd)
    echo "l3fwd_rows: valgrind --tool=callgrind $BIN ${cgargs[*]}" >&2
    timeout 600 valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$d/cg.%p" \
      "$BIN" "${cgargs[@]}" >"$d/out.json" 2>>"$TMPD/log" || { tail -5 "$TMPD/log" >&2; exit 1; }
    python3 scripts/bench/callgrind_summary.py "$d" "$s" "$f" "$d" >"$TMPD/cg.json"
    cg=$TMPD/cg.json
    cgcmd="valgrind --tool=callgrind --collect-atstart=no vipd_bench ${cgargs[*]}"
  fi
  python3 - "$TMPD/timed.json" "$cg" "vipd_bench ${args[*]}" "$cgcmd" "$CMDLINE" >>"$OUT" <<'EOF'
import json, subprocess, sys
t = json.load(open(sys.argv[1]))
row = {"bench": "l3fwd", "services": t["services"], "flows": t["flows"], "proto": t["proto"], "fwd": t["fwd"]}
for p in ("est", "baseline", "l3fwd"):
    for k in ("ns", "ns_p10", "ns_p90", "mpps", "packets", "drops"):
        row[f"{p}_{k}"] = t.get(f"{p}_{k}")
if sys.argv[2]:
    cg = json.load(open(sys.argv[2]))
    for p in ("est", "baseline", "l3fwd"):
        if f"{p}_ir_per_pkt" in cg:
            row[f"{p}_ir_per_pkt"] = cg[f"{p}_ir_per_pkt"]
sh = lambda c: subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
row["command"] = sys.argv[3]
if sys.argv[4]:
    row["cg_command"] = sys.argv[4]
row["script"] = sys.argv[5]
row["commit"] = sh("git rev-parse --short HEAD")
row["dirty_files"] = int(sh("git status --porcelain --untracked-files=no | wc -l") or 0)
row["measured"] = sh("date -u +%Y-%m-%d")
row["load"] = sh("cut -d' ' -f1-3 /proc/loadavg")
print(json.dumps(row))
EOF
  tail -n 1 "$OUT" >&2
done
