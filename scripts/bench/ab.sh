#!/usr/bin/env bash
# usage: scripts/bench/ab.sh BIN_A BIN_B ROUNDS [pipeline options...]
#
# Interleaved A/B comparison of two vipd_bench binaries (e.g. one built from
# the tree before a fast-path change, one after) on a noisy machine: runs
# `BIN pipeline OPTIONS` ROUNDS times for each, alternating A, B, A, B, ...,
# so that both see the same drift of the machine, and prints one JSON line
# per run and, last, the medians of est_ns / reply_ns / newconn_ns for each.
# Example (what docs/benchmarks.md quotes):
#   git worktree add /tmp/before <commit> && meson setup /tmp/before/b -Dbench=true \
#     --buildtype release /tmp/before && ninja -C /tmp/before/b bench/vipd_bench
#   scripts/bench/ab.sh /tmp/before/b/bench/vipd_bench build-bench/bench/vipd_bench 5 \
#     --services 100000 --flows 1000000 --packets 1000000 --reps 3 --newconn-packets 100000
# Bounded: ROUNDS x 2 runs, each under a 300 s limit.
set -uo pipefail
[ $# -ge 3 ] || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
A=$1 B=$2 ROUNDS=$3
shift 3
for b in "$A" "$B"; do [ -x "$b" ] || { echo "ab.sh: $b is not an executable" >&2; exit 2; }; done
case $ROUNDS in ''|*[!0-9]*) echo "ab.sh: ROUNDS must be a number" >&2; exit 2 ;; esac
export LD_BIND_NOW=1
OUT=$(mktemp /tmp/vipd-ab.XXXXXX)
trap 'rm -f "$OUT"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    bin=$A; [ $side = B ] && bin=$B
    line=$(timeout 300 "$bin" pipeline "$@" 2>/dev/null | tail -n 1)
    case $line in
      \{*) echo "{\"side\":\"$side\",\"round\":$r,${line#\{}" | tee -a "$OUT" ;;
      *) echo "ab.sh: no result from $bin (round $r)" >&2 ;;
    esac
  done
done
python3 - "$OUT" "$A" "$B" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out = {"a": sys.argv[2], "b": sys.argv[3]}
for side in ("A", "B"):
    rs = [r for r in rows if r["side"] == side]
    for k in ("est_ns", "reply_ns", "newconn_ns", "baseline_ns"):
        v = [r[k] for r in rs if r.get(k)]
        if v:
            out[f"{side.lower()}_{k}_median"] = round(statistics.median(v), 1)
            out[f"{side.lower()}_{k}_all"] = [round(x, 1) for x in v]
print(json.dumps(out))
EOF
