#!/usr/bin/env bash
# usage: scripts/bench/callgrind_rows.sh [--rows "S:F:FAMILY ..."] [--cp "S ..."]
#                                        [--packets N] [--newconn-packets N]
#                                        [--out DIR] [--no-build] [--no-doc]
# Section 5 of docs/benchmarks.md (instructions per packet, callgrind) alone,
# without a whole scripts/bench.sh run: the same callgrind runs as bench.sh's
# step 5, on the current tree, each row stamped with the commit, the date and
# the command. Callgrind counts are exact whatever the machine's load, so this
# is what to rerun after a fast-path change (the timed sections keep the full
# run's numbers and its commit).
#   --rows   pipeline cases, services:flows:family (TCP, full NAT); default
#            every case of section 5: 1:1000:4 100000:1000:4 1000:10000:4
#            100000:1000000:4 1:1000:6 100000:1000000:6
#   --cp     control-plane cases (vipd_bench cp --worker offline, 20 changes),
#            services; default "1000 10000"; --cp "" for none
#   --packets / --newconn-packets  per phase (default 20000 / 10000, as bench.sh)
# Appends one JSON line per case to DIR (default bench/results/added):
# IPv4 pipeline and control-plane rows to callgrind.jsonl (with the top
# functions of est and newconn), IPv6 rows to callgrind_ipv6.jsonl (with the
# IPv4 row of the same case from this run, when --rows has it); then
# regenerates docs/benchmarks.md (scripts/bench/report.py), unless --no-doc
# or --out is given. report.py shows the latest row per case in section 5,
# in place of the full run's, when it is newer than that run.
# A 100k-services / 1M-flows case takes minutes under valgrind (the fill's
# million SYNs); vipd_bench drives the worker's clock itself under valgrind
# (--clock virtual), so no connection times out however slow that is.
# Safety: only DPDK's in-process net_ring0 vdev, as scripts/bench.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
ROWS="1:1000:4 100000:1000:4 1000:10000:4 100000:1000000:4 1:1000:6 100000:1000000:6"
CPS="1000 10000" PKTS=20000 NCP=10000 OUT= BUILD=1 DOC=1
CMDLINE="scripts/bench/callgrind_rows.sh $*"
while [ $# -gt 0 ]; do
  case $1 in
    --rows) ROWS=$2; shift ;;
    --cp) CPS=$2; shift ;;
    --packets) PKTS=$2; shift ;;
    --newconn-packets) NCP=$2; shift ;;
    --out) OUT=$2; DOC=0; shift ;;
    --no-build) BUILD=0 ;;
    --no-doc) DOC=0 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "callgrind_rows.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
OUT=${OUT:-bench/results/added}
for c in $ROWS; do
  [[ $c =~ ^[0-9]+:[0-9]+:[46]$ ]] || { echo "callgrind_rows.sh: --rows takes services:flows:family (4 or 6), not '$c'" >&2; exit 2; }
done
command -v valgrind >/dev/null 2>&1 || { echo "callgrind_rows.sh: valgrind not installed (scripts/bench-bootstrap.sh)" >&2; exit 1; }
NAME=callgrind_rows.sh
. "$(dirname "$0")/bench_bin.sh"
TMPD=$(mktemp -d /tmp/vipd-cg-rows.XXXXXX)
trap 'rm -rf "$TMPD"' EXIT
mkdir -p "$OUT"
COMMIT=$(git rev-parse --short HEAD)
# Uncommitted changes to what is measured: named in each row.
DIRTY=$(git status --porcelain --untracked-files=no -- dataplane controlplane bench | awk '{print $2}' | tr '\n' ' ')
log() { echo "callgrind_rows: $*" >&2; }

# stamp SUMMARY_JSON DIR COMMAND KIND: the row with its provenance and profiles.
stamp() {
  python3 - "$@" "$COMMIT" "$DIRTY" "$CMDLINE" <<'EOF'
import json, os, sys, time
row, d, cmd, kind, commit, dirty, script = sys.argv[1:8]
r = json.loads(row)
r["commit"] = commit
if dirty.strip():
    r["dirty"] = dirty.split()
r["measured"] = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())
r["command"] = cmd
r["script"] = script
r["load"] = open("/proc/loadavg").read().split()[0]
if kind == "pipeline":
    sfx = "_v6" if r.get("family") == 6 else ""
    for ph in ("est", "newconn"):
        p = os.path.join(d, f"callgrind_{ph}_{r['services']}_{r['flows']}{sfx}.txt")
        if os.path.exists(p):
            r[ph + "_profile"] = open(p).read().splitlines()[:15]
print(json.dumps(r))
EOF
}

# IPv4 first: an IPv6 row carries the IPv4 row of its case measured here.
declare -A V4
for c in $(for c in $ROWS; do echo "$c"; done | sort -t: -k3,3 -s); do
  IFS=: read -r s f fam <<<"$c"
  d=$TMPD/cg-$s-$f-$fam
  mkdir -p "$d"
  args=(pipeline --family "$fam" --services "$s" --flows "$f" --packets "$PKTS" --reps 1 --newconn-packets "$NCP" --no-warmup)
  cmd="valgrind --tool=callgrind --collect-atstart=no vipd_bench ${args[*]}"
  log "$cmd"
  t0=$(date +%s)
  if ! valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$d/cg.%p" \
       "$BIN" "${args[@]}" >"$d/out.json" 2>"$d/log"; then
    tail -5 "$d/log" >&2
    log "FAILED: $cmd"
    exit 1
  fi
  sum=$(python3 scripts/bench/callgrind_summary.py "$d" "$s" "$f" "$d")
  row=$(stamp "$sum" "$d" "$cmd" pipeline)
  if [ "$fam" = 4 ]; then
    V4[$s:$f]=$sum
    echo "$row" >>"$OUT/callgrind.jsonl"
  else
    if [ -n "${V4[$s:$f]:-}" ]; then
      row=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); v=json.loads(sys.argv[2])
for k in ("bench", "services", "flows"): v.pop(k, None)
r["ipv4"] = v; print(json.dumps(r))' "$row" "${V4[$s:$f]}")
    fi
    echo "$row" >>"$OUT/callgrind_ipv6.jsonl"
  fi
  log "$s / $f, IPv$fam: $(( $(date +%s) - t0 )) s: $sum"
done

for s in $CPS; do
  d=$TMPD/cp-$s
  mkdir -p "$d"
  args=(cp --services "$s" --endpoints 10 --changes 20 --worker offline)
  cmd="valgrind --tool=callgrind --collect-atstart=no vipd_bench ${args[*]}"
  log "$cmd"
  if ! valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$d/cg.%p" \
       "$BIN" "${args[@]}" >"$d/out.json" 2>"$d/log"; then
    tail -5 "$d/log" >&2
    log "FAILED: $cmd"
    exit 1
  fi
  sum=$(python3 scripts/bench/callgrind_summary.py --cp "$d" "$s" "$d")
  stamp "$sum" "$d" "$cmd" cp >>"$OUT/callgrind.jsonl"
done

if [ $DOC = 1 ]; then
  python3 scripts/bench/report.py
fi
log "done: rows in $OUT/callgrind.jsonl and $OUT/callgrind_ipv6.jsonl"
