#!/usr/bin/env bash
# usage: scripts/bench.sh [--quick | --smoke] [--hugepages] [--huge-variant] [--rt]
#                         [--rounds N] [--no-kernel] [--no-build] [--no-doc] [--out DIR]
# Runs vipd's benchmark suite (docs/benchmarks.md) with bounded time:
#   full (default)  about 5-10 minutes on a 2-core VM
#   --quick         about 1-2 minutes: fewer cases, fewer packets
#   --smoke         seconds, at tiny sizes: that every benchmark runs and the
#                   report renders, on any build (tests/integration/bench_test.sh);
#                   its numbers mean nothing
# Writes raw results to DIR (default bench/results/full, .../quick or .../smoke):
#   machine.json, pipeline.jsonl, memfloor.jsonl, cp.jsonl, sync.jsonl, decode.jsonl, memory.jsonl, callgrind.jsonl,
#   ipt.jsonl, kernel.jsonl, callgrind_*.txt (per-function profiles), run.log
# (the previous results of the same mode move to DIR.prev; the report shows
# the change against them)
# and regenerates docs/benchmarks.md and docs/img/*.svg from them
# (scripts/bench/report.py, gnuplot), unless --no-doc.
# Section 5 (callgrind) alone, on the current commit, without the timed
# sections: scripts/bench/callgrind_rows.sh.
#   --hugepages  reserve 2 MiB hugepages (on top of what is reserved, on a
#                private hugetlbfs mount, restored on exit) instead of --no-huge
#   --huge-variant  run everything on --no-huge pages, and the largest
#                pipeline case once more on 2 MiB hugepages (reserved as above)
#   --rt         run the timed programs under SCHED_FIFO (chrt -f 10): steadier
#                numbers on a loaded machine, at the expense of its other users
#   --rounds N   run benchmark 1's TCP full-NAT cases N times, in rounds over
#                the whole matrix (default 3 in full mode, 1 with --quick); the
#                report shows each case's run with the median established time
#                and lists the others (a shared VM has slow phases of tens of
#                seconds, longer than one case)
#   --no-kernel  skip benchmark 3 (kernel modes: needs root, iptables, netns)
# Safety: benchmarks 1, 2, 4, 5 use only DPDK's in-process net_ring0 vdev.
# Benchmark 3 runs iptables-restore only inside a network namespace it creates
# (vipd_bench ipt refuses any other) and sends its connections only
# inside a private lab (scripts/bench/kernel_modes.sh, scripts/lab.sh); both
# are deleted on exit. The root namespace gets no address, route or rule.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
QUICK=0 SMOKE=0 HUGE=0 HVAR=0 RT=0 BUILD=1 DOC=1 OUT= KERNEL=1 ROUNDS=
CMDLINE="scripts/bench.sh $*"
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1 ;;
    --smoke) QUICK=1 SMOKE=1 ;;
    --hugepages) HUGE=1 ;;
    --huge-variant) HVAR=1 ;;
    --rt) RT=1 ;;
    --no-kernel) KERNEL=0 ;;
    --no-build) BUILD=0 ;;
    --no-doc) DOC=0 ;;
    --out) OUT=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
MODE=$([ $SMOKE = 1 ] && echo smoke || { [ $QUICK = 1 ] && echo quick || echo full; })
ROUNDS=${ROUNDS:-$([ $QUICK = 1 ] && echo 1 || echo 3)}
case $ROUNDS in ''|*[!0-9]*|0) echo "bench.sh: --rounds needs a number >= 1" >&2; exit 2 ;; esac
OUT=${OUT:-bench/results/$MODE}
BUILD_DIR=${BENCH_BUILD_DIR:-build-bench}
BIN=$BUILD_DIR/bench/vipd_bench
# The previous results of the same mode are kept in $OUT.prev: the report
# shows the change against them (to see what a fast-path change did).
if [ -f "$OUT/machine.json" ] && [ -f "$OUT/pipeline.jsonl" ]; then
  rm -rf "$OUT.prev"
  mv "$OUT" "$OUT.prev"
fi
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl "$OUT"/callgrind_*.txt "$OUT"/run.log
LOG=$OUT/run.log
T_START=$(date +%s)

log() { echo "bench: $*" | tee -a "$LOG" >&2; }

# ---- build ----
if [ $BUILD = 1 ]; then
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    meson setup "$BUILD_DIR" -Dbench=true -Dtests=false --buildtype=release >>"$LOG" 2>&1
  else
    meson configure "$BUILD_DIR" -Dbench=true -Dbuildtype=release >>"$LOG" 2>&1
  fi
  log "building $BIN (buildtype release: -O3, no -march)"
  ninja -C "$BUILD_DIR" bench/vipd_bench >>"$LOG" 2>&1 || { tail -30 "$LOG" >&2; exit 1; }
  if [ $KERNEL = 1 ]; then ninja -C "$BUILD_DIR" vipd vipctl >>"$LOG" 2>&1 || { tail -30 "$LOG" >&2; exit 1; }; fi
fi
[ -x "$BIN" ] || { echo "bench.sh: $BIN missing (run without --no-build)" >&2; exit 1; }

# ---- hugepages (opt-in) ----
HUGE_ARGS=()
HUGE_OLD= HUGE_MNT= IPT_NS=
cleanup() {
  if [ -n "$IPT_NS" ]; then ip netns del "$IPT_NS" 2>/dev/null || true; fi
  if [ -n "$HUGE_MNT" ]; then umount "$HUGE_MNT" 2>/dev/null || true; rmdir "$HUGE_MNT" 2>/dev/null || true; fi
  if [ -n "$HUGE_OLD" ]; then echo "$HUGE_OLD" >/proc/sys/vm/nr_hugepages 2>/dev/null || true; fi
}
trap cleanup EXIT
if [ $HUGE = 1 ] || [ $HVAR = 1 ]; then
  HUGE_OLD=$(cat /proc/sys/vm/nr_hugepages)
  echo $((HUGE_OLD + 512)) >/proc/sys/vm/nr_hugepages
  free=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
  HUGE_MNT=$(mktemp -d /tmp/vipd-bench-huge.XXXXXX)
  if [ "${free:-0}" -lt 400 ] || ! mount -t hugetlbfs -o pagesize=2M nodev "$HUGE_MNT"; then
    echo "bench.sh: cannot reserve 2 MiB hugepages (free: ${free:-0})" >&2
    exit 1
  fi
  log "hugepages: $free free, hugetlbfs on $HUGE_MNT"
  [ $HUGE = 1 ] && HUGE_ARGS=(--huge-dir "$HUGE_MNT")
fi
PRE=()
[ $RT = 1 ] && PRE=(chrt -f 10)
# Bind every symbol at start-up: lazy binding inside a timed region costs
# milliseconds with ~100 DPDK shared objects loaded.
export LD_BIND_NOW=1

# run FILE TIMEOUT ARGS...: one benchmark process, its JSON line appended to FILE.
run() {
  local file=$1 to=$2; shift 2
  log "$BIN $*"
  local line
  if ! line=$(timeout "$to" "${PRE[@]}" "$BIN" "$@" 2>>"$LOG" | tail -n 1); then
    log "FAILED (or timed out after ${to}s): $*"
    return 0
  fi
  case $line in
    \{*) echo "$line" >>"$file" ;;
    *) log "no result from: $*" ;;
  esac
}

# ---- machine ----
{
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  BUILD_DIR="$BUILD_DIR" python3 - "$CMDLINE" "$MODE" "$HUGE" "$RT" "$load0" <<'EOF'
import json, subprocess, sys, platform, os
def sh(c):
    try: return subprocess.run(c, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception: return ""
lscpu = {}
for l in sh("LC_ALL=C lscpu").splitlines():
    if ":" in l:
        k, v = l.split(":", 1); lscpu[k.strip()] = v.strip()
mem = sh("awk '/MemTotal/ {print $2}' /proc/meminfo")
dirty = sh("git status --porcelain --untracked-files=no | wc -l")
dirty_dp = sh("git status --porcelain --untracked-files=no -- dataplane controlplane | awk '{print $2}' | tr '\\n' ' '")
print(json.dumps({
  "command": sys.argv[1], "mode": sys.argv[2], "hugepages": sys.argv[3] == "1", "rt": sys.argv[4] == "1",
  "load_start": sys.argv[5],
  "commit": sh("git rev-parse HEAD"), "commit_short": sh("git rev-parse --short HEAD"),
  "describe": sh("git describe --always --tags"),
  "dirty_files": int(dirty or 0), "dirty_fastpath": dirty_dp,
  "date": sh("date -u +%Y-%m-%dT%H:%M:%SZ"),
  "cpu": lscpu.get("Model name", "?"), "cpus": lscpu.get("CPU(s)", "?"),
  "threads_per_core": lscpu.get("Thread(s) per core", "?"), "hypervisor": lscpu.get("Hypervisor vendor", ""),
  "l2": lscpu.get("L2 cache") or sh("cat /sys/devices/system/cpu/cpu0/cache/index2/size") or "?",
  "l3": lscpu.get("L3 cache") or sh("cat /sys/devices/system/cpu/cpu0/cache/index3/size") or "?",
  "mem_gib": round(int(mem or 0) / 1048576, 1), "kernel": platform.release(),
  "compiler": sh("c++ --version | head -1"), "dpdk": sh("pkg-config --modversion libdpdk"),
  "buildtype": sh("meson introspect --buildoptions " + os.environ.get("BUILD_DIR", "build-bench") + " | python3 -c \"import json,sys; print([o['value'] for o in json.load(sys.stdin) if o['name']=='buildtype'][0])\""),
}))
EOF
} >"$OUT/machine.json"

# ---- 1. pipeline ----
if [ $SMOKE = 1 ]; then
  PKTS=20000 REPS=1 NC=5000
  MATRIX="1:1000 1000:1000 1000:10000"
  EXTRA=""
elif [ $QUICK = 1 ]; then
  PKTS=200000 REPS=3 NC=50000
  MATRIX="1:1000 100000:1000 1000:100000"
  EXTRA=""
else
  PKTS=1000000 REPS=5 NC=200000
  MATRIX="1:1000 1000:1000 100000:1000 1:1000000 1000:1000000 100000:1000000"
  EXTRA="1000:10000 1000:100000"
fi
for round in $(seq 1 "$ROUNDS"); do
  [ "$ROUNDS" -gt 1 ] && log "benchmark 1, round $round of $ROUNDS"
  for c in $MATRIX $EXTRA; do
    run "$OUT/pipeline.jsonl" 300 pipeline --services "${c%%:*}" --flows "${c##*:}" --packets $PKTS \
      --reps $REPS --newconn-packets $NC "${HUGE_ARGS[@]}"
  done
done
if [ $QUICK = 0 ]; then
  run "$OUT/pipeline.jsonl" 300 pipeline --services 1000 --flows 1000 --packets $PKTS --reps $REPS \
    --newconn-packets $NC --proto udp --phases fill,est,baseline "${HUGE_ARGS[@]}"
  run "$OUT/pipeline.jsonl" 300 pipeline --services 1000 --flows 1000 --packets $PKTS --reps $REPS \
    --newconn-packets $NC --fwd nat "${HUGE_ARGS[@]}"
fi
# 1b. the memory floor of the largest case: its lines read, nothing else done
last=${MATRIX##* }
MFA=(--reps 3)
[ $SMOKE = 1 ] && MFA=(--reps 1 --packets 20000 --chain-mb 8 --max-chain 3)
run "$OUT/memfloor.jsonl" 300 memfloor --services "${last%%:*}" --flows "${last##*:}" "${MFA[@]}" "${HUGE_ARGS[@]}"
if [ $HVAR = 1 ] && [ $HUGE = 0 ]; then
  run "$OUT/pipeline.jsonl" 300 pipeline --services "${last%%:*}" --flows "${last##*:}" --packets $PKTS \
    --reps $REPS --newconn-packets $NC --huge-dir "$HUGE_MNT"
  run "$OUT/memfloor.jsonl" 300 memfloor --services "${last%%:*}" --flows "${last##*:}" "${MFA[@]}" --huge-dir "$HUGE_MNT"
fi

# ---- 4. memory: RSS with the flows really touched (no prefault) ----
if [ $SMOKE = 1 ]; then MF=10000 MS=100; elif [ $QUICK = 1 ]; then MF=100000 MS=1000; else MF=1000000 MS=100000; fi
run "$OUT/memory.jsonl" 300 pipeline --services $MS --flows $MF --phases fill --no-prefault --no-warmup "${HUGE_ARGS[@]}"

# ---- 2. control plane ----
if [ $SMOKE = 1 ]; then CH=20 CPS=1000; elif [ $QUICK = 1 ]; then CH=200 CPS=10000; else CH=1000 CPS=10000; fi
run "$OUT/cp.jsonl" 300 cp --services $CPS --endpoints 10 --changes $CH --worker running "${HUGE_ARGS[@]}"
run "$OUT/cp.jsonl" 300 cp --services $CPS --endpoints 10 --changes $CH --worker offline "${HUGE_ARGS[@]}"
if [ $QUICK = 0 ]; then
  run "$OUT/cp.jsonl" 300 cp --services 1000 --endpoints 10 --changes $CH --worker offline "${HUGE_ARGS[@]}"
  run "$OUT/cp.jsonl" 300 cp --services 100000 --endpoints 10 --changes 200 --worker offline --mem 2048 "${HUGE_ARGS[@]}"
fi

# ---- 2b/2c. control plane end to end, and the decoding of a 50 MB list ----
BCH=$([ $SMOKE = 1 ] && echo 2 || { [ $QUICK = 1 ] && echo 5 || echo 20; })
run "$OUT/sync.jsonl" 300 sync --services $CPS --endpoints 10 --changes $CH --baseline-changes $BCH --worker running "${HUGE_ARGS[@]}"
run "$OUT/sync.jsonl" 300 sync --services $CPS --endpoints 10 --changes $CH --baseline-changes $BCH --worker offline "${HUGE_ARGS[@]}"
run "$OUT/decode.jsonl" 300 decode --mb $([ $SMOKE = 1 ] && echo 2 || echo 50) --endpoints 10 --reps $([ $QUICK = 1 ] && echo 1 || echo 3)

# ---- 3. kernel modes: iptables and nftables sync time (3a), new connections/s per mode (3b) ----
if [ $KERNEL = 1 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v iptables-restore >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
    log "benchmark 3 skipped: needs root, ip and iptables-restore"
  else
    IPT_NS=vipd-bench-ipt-$$
    if ip netns add "$IPT_NS" 2>>"$LOG"; then
      if [ $QUICK = 1 ]; then IPTS="100 1000" IPTC=10; else IPTS="100 1000 10000" IPTC=20; fi
      # The system's iptables (nf_tables here) and, where installed, iptables-legacy.
      IPTV="default"
      command -v iptables-legacy-restore >/dev/null 2>&1 && IPTV="default legacy"
      for v in $IPTV; do
        if [ "$v" = legacy ]; then iptv=$(iptables-legacy -V 2>/dev/null | head -n 1); else iptv=$(iptables -V 2>/dev/null | head -n 1); fi
        for s in $IPTS; do
          # nf_tables' iptables-restore needs minutes for 10k services here: bounded at 120 s.
          # 10k services: one sync takes 10-20 s, so 1 full resync and 5 changes.
          to=300 ch=$IPTC fr=3
          [ "$s" -ge 10000 ] && ch=5 fr=1
          [ "$v" = default ] && [ "$s" -ge 10000 ] && to=120
          log "ip netns exec $IPT_NS $BIN ipt --services $s --changes $ch --full-reps $fr --iptables $v --timeout-s $to"
          line=$(timeout 900 ip netns exec "$IPT_NS" "$BIN" ipt --services "$s" --changes "$ch" --full-reps "$fr" \
                   --iptables "$v" --timeout-s "$to" 2>>"$LOG" | tail -n 1) || true
          if [[ $line == \{* ]]; then
            echo "${line%\}}, \"iptables\": \"$iptv\"}" >>"$OUT/ipt.jsonl"
          else
            log "FAILED: ipt --services $s --iptables $v"
          fi
        done
      done
      ip netns del "$IPT_NS" 2>/dev/null || true
      # nftables mode (the same driver, --backend nftables), a fresh namespace
      # per run: rows beside iptables' in 3a ("iptables" = the nft version and
      # the layout: fnat compact chains, nat-mode endpoint chains, ClientIP
      # affinity), each with --baseline (one-element commits, not vipd's, on
      # the same ruleset).
      nftv="nftables $(nft -v 2>/dev/null | awk '{print $2}') (vipd nftables mode"
      for lay in fnat:0 nat:0 fnat:10800; do
        IFS=: read -r fw aff <<<"$lay"
        lab="$nftv)"
        [ "$fw" = nat ] && lab="$nftv, nat)"
        [ "$aff" != 0 ] && lab="$nftv, ClientIP affinity)"
        for s in $IPTS; do
          ch=$IPTC fr=3
          [ "$s" -ge 10000 ] && fr=1
          ip netns add "$IPT_NS" 2>>"$LOG" || { log "cannot create $IPT_NS"; break; }
          log "ip netns exec $IPT_NS $BIN ipt --backend nftables --services $s --changes $ch --full-reps $fr --forward $fw --affinity $aff --baseline 50"
          line=$(timeout 900 ip netns exec "$IPT_NS" "$BIN" ipt --backend nftables --services "$s" --changes "$ch" \
                   --full-reps "$fr" --forward "$fw" --affinity "$aff" --baseline 50 2>>"$LOG" | tail -n 1) || true
          if [[ $line == \{* ]]; then
            echo "${line%\}}, \"iptables\": \"$lab\"}" >>"$OUT/ipt.jsonl"
          else
            log "FAILED: ipt --backend nftables --services $s --forward $fw --affinity $aff"
          fi
          ip netns del "$IPT_NS" 2>/dev/null || true
        done
      done
      IPT_NS=
    else
      log "benchmark 3a skipped: cannot create a network namespace"
    fi
    if [ $QUICK = 1 ]; then KS="10 1000" KD=3; else KS="10 10000" KD=5; fi
    log "scripts/bench/kernel_modes.sh $OUT/kernel.jsonl --services \"$KS\" --seconds $KD --procs 2"
    BENCH_BUILD_DIR=$BUILD_DIR timeout 1200 scripts/bench/kernel_modes.sh "$OUT/kernel.jsonl" --services "$KS" \
      --seconds "$KD" --procs 2 2>>"$LOG" || log "kernel_modes.sh failed or was skipped (exit $?)"
  fi
fi

# ---- 5. callgrind: instructions per packet ----
if command -v valgrind >/dev/null 2>&1; then
  # IPv4 cases, then IPv6 (--family 6, the same phases) at 1 / 1k and
  # 100k / 1M: report.py shows the families side by side.
  if [ $QUICK = 1 ]; then CG="1:1000:4 1:1000:6"; else
    CG="1:1000:4 100000:1000:4 1000:10000:4 100000:1000000:4 1:1000:6 100000:1000000:6"; fi
  CGP=20000 CGN=10000
  [ $SMOKE = 1 ] && CGP=2000 CGN=1000
  for c in $CG; do
    IFS=: read -r s f fam <<<"$c"
    d=$(mktemp -d /tmp/vipd-bench-cg.XXXXXX)
    log "valgrind --tool=callgrind $BIN pipeline --family $fam --services $s --flows $f"
    if timeout 600 valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$d/cg.%p" \
         "$BIN" pipeline --family "$fam" --services "$s" --flows "$f" --packets "$CGP" --reps 1 \
         --newconn-packets "$CGN" --no-warmup >"$d/out.json" 2>>"$LOG"; then
      python3 scripts/bench/callgrind_summary.py "$d" "$s" "$f" "$OUT" >>"$OUT/callgrind.jsonl" || log "callgrind summary failed"
    else
      log "callgrind run failed"
    fi
    rm -rf "$d"
  done
  # control plane: instructions per call of each part (one dump per call)
  if [ $SMOKE = 1 ]; then CGS="200"; elif [ $QUICK = 1 ]; then CGS="1000"; else CGS="1000 10000"; fi
  for s in $CGS; do
    d=$(mktemp -d /tmp/vipd-bench-cg.XXXXXX)
    log "valgrind --tool=callgrind $BIN cp --services $s --changes 20 --worker offline"
    if timeout 600 valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$d/cg.%p" \
         "$BIN" cp --services "$s" --endpoints 10 --changes 20 --worker offline >"$d/out.json" 2>>"$LOG"; then
      python3 scripts/bench/callgrind_summary.py --cp "$d" "$s" "$OUT" >>"$OUT/callgrind.jsonl" || log "callgrind summary failed"
    else
      log "callgrind run failed"
    fi
    rm -rf "$d"
  done
else
  log "valgrind not installed: no instruction counts (scripts/bench-bootstrap.sh installs it)"
fi

T_END=$(date +%s)
python3 - "$OUT/machine.json" "$((T_END - T_START))" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, sys
p = sys.argv[1]; m = json.load(open(p)); m["wall_s"] = int(sys.argv[2]); m["load_end"] = sys.argv[3]
json.dump(m, open(p, "w"))
EOF
log "done in $((T_END - T_START)) s; raw results in $OUT"

if [ $DOC = 1 ]; then
  python3 scripts/bench/report.py "$OUT" docs/benchmarks.md docs/img
  log "wrote docs/benchmarks.md and docs/img/"
fi
