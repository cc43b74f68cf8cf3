#!/usr/bin/env python3
"""usage: report.py RESULTS_DIR DOC_PATH IMG_DIR

Regenerates docs/benchmarks.md (and the plots in IMG_DIR, with gnuplot when
it is installed) from the raw results that scripts/bench.sh wrote. Python
standard library only. The prose that does not depend on the numbers lives
here too, so the whole page is reproducible from one command.
"""
import json
import os
import shutil
import subprocess
import sys

if len(sys.argv) != 4:
    sys.exit(__doc__.strip().splitlines()[0])
res_dir, doc_path, img_dir = sys.argv[1], sys.argv[2], sys.argv[3]
for need in ("machine.json", "pipeline.jsonl"):
    if not os.path.isfile(os.path.join(res_dir, need)):
        sys.exit(f"report.py: {res_dir} has no {need}: not the results of scripts/bench.sh (run it first)")


def jsonl(name, d=res_dir):
    """The JSON lines of file `name` in directory d ([] when there is none); a
    line that is not a JSON object (a run cut short) is skipped with a warning."""
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return []
    rows = []
    for n, l in enumerate(open(p), 1):
        if not l.strip().startswith("{"):
            continue
        try:
            rows.append(json.loads(l))
        except ValueError as e:
            print(f"report.py: {p} line {n} is not JSON ({e}): skipped", file=sys.stderr)
    return rows


def median_runs(rows):
    """bench.sh --rounds runs a case several times: one row per case, the run
    with the median established time (the lower middle one of an even count),
    with est_ns_runs (every run's, sorted) and drops_all (over every run)."""
    groups = {}
    for r in rows:
        key = (r.get("services"), r.get("flows"), r.get("proto"), r.get("fwd"), bool(r.get("hugepages")))
        groups.setdefault(key, []).append(r)
    out = []
    for g in groups.values():
        g = sorted(g, key=lambda r: r.get("est_ns") or 0)
        m = dict(g[(len(g) - 1) // 2])
        m["est_ns_runs"] = [r.get("est_ns") for r in g]
        m["drops_all"] = sum(r.get("est_drops", 0) + r.get("reply_drops", 0) + r.get("newconn_drops", 0) for r in g)
        out.append(m)
    return out


machine = json.load(open(os.path.join(res_dir, "machine.json")))
prev_dir = res_dir.rstrip("/") + ".prev"
prev_machine, prev_by, prev_cg = None, {}, {}
if os.path.exists(os.path.join(prev_dir, "machine.json")):
    prev_machine = json.load(open(os.path.join(prev_dir, "machine.json")))
    for r in median_runs(jsonl("pipeline.jsonl", prev_dir)):
        if (r.get("proto"), r.get("fwd")) == ("tcp", "fnat") and bool(r.get("hugepages")) == bool(prev_machine.get("hugepages")):
            prev_by[(r["services"], r["flows"])] = r
    for r in jsonl("callgrind.jsonl", prev_dir):
        if r.get("bench") != "cp":
            prev_cg[(r["services"], r["flows"])] = r
pipe = median_runs(jsonl("pipeline.jsonl"))
n_runs = max((len(r["est_ns_runs"]) for r in pipe), default=1)
cpl = jsonl("cp.jsonl")
syncl = jsonl("sync.jsonl")
decl = jsonl("decode.jsonl")
mem = jsonl("memory.jsonl")
floor_all = jsonl("memfloor.jsonl")
floor = [r for r in floor_all if not r.get("hugepages")] or floor_all
floor_huge = [r for r in floor_all if r.get("hugepages") and r not in floor]
cg_all = jsonl("callgrind.jsonl")
cg = [r for r in cg_all if r.get("bench") != "cp"]
cg_cp = sorted([r for r in cg_all if r.get("bench") == "cp"], key=lambda r: r["services"])


def fmt(v, nd=1):
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.{nd}f}"


def n_human(n):
    if n >= 1000000 and n % 1000000 == 0:
        return f"{n // 1000000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def tcp_fnat(r):
    return (r.get("proto") == "tcp" and r.get("fwd") == "fnat"
            and bool(r.get("hugepages")) == bool(machine.get("hugepages")))


def variant(r):
    v = f"{r['proto']} / {r['fwd']}"
    if bool(r.get("hugepages")) != bool(machine.get("hugepages")):
        v += ", 2 MiB hugepages" if r.get("hugepages") else ", 4 KiB pages"
    return v


matrix = sorted([r for r in pipe if tcp_fnat(r)], key=lambda r: (r["flows"], r["services"]))
by = {(r["services"], r["flows"]): r for r in matrix}
cg_by = {(r["services"], r["flows"]): r for r in cg}


def ratio(r):
    b, p = r.get("baseline_ns"), r.get("est_ns")
    if not b or not p:
        return None
    return b / p  # = pipeline Mpps / baseline Mpps


# ---------------------------------------------------------------- plots
os.makedirs(img_dir, exist_ok=True)
plots = []
gp = shutil.which("gnuplot")
rel_img = os.path.relpath(img_dir, os.path.dirname(doc_path) or ".")


def gnuplot(name, script, data):
    if not gp:
        return False
    dpath = os.path.join(img_dir, name + ".dat")
    with open(dpath, "w") as f:
        f.write(data)
    out = os.path.join(img_dir, name + ".svg")
    s = (f'set terminal svg size 720,420 dynamic font "sans,12" background "white"\nset rmargin 6\n'
         f'set output "{out}"\n' + script.replace("DATA", dpath))
    r = subprocess.run([gp], input=s, text=True, capture_output=True)
    os.remove(dpath)
    if r.returncode != 0:
        print("gnuplot:", r.stderr, file=sys.stderr)
        return False
    return True


services_axis = sorted({r["services"] for r in matrix})
flows_axis = sorted({r["flows"] for r in matrix})
if matrix:
    # ns/packet against services, one line per flow count (established).
    data = ""
    cols = []
    for f in flows_axis:
        pts = [(s, by[(s, f)]["est_ns"]) for s in services_axis if (s, f) in by and by[(s, f)].get("est_ns")]
        if len(pts) < 2:
            continue
        cols.append(f)
        data += f"# flows {f}\n" + "".join(f"{s} {v}\n" for s, v in pts) + "\n\n"
    if cols:
        script = ('set title "Established flows: ns per packet (median chunk) vs services"\n'
                  'set logscale x\nset xlabel "services"\nset ylabel "ns / packet"\nset key top left\n'
                  'set grid\nset yrange [0:*]\n'
                  "plot " + ", ".join(f'"DATA" index {i} with linespoints lw 2 title "{n_human(f)} flows"'
                                      for i, f in enumerate(cols)) + "\n")
        if gnuplot("pipeline_services", script, data):
            plots.append(("pipeline_services", "Established-flow cost against the number of services"))
    # ns/packet against flows at the services count with most flow points.
    s_best = max(services_axis, key=lambda s: sum(1 for f in flows_axis if (s, f) in by))
    pts = [(f, by[(s_best, f)]) for f in flows_axis if (s_best, f) in by]
    if len(pts) >= 2:
        data = "".join(f"{f} {r.get('est_ns', 0)} {r.get('newconn_ns', 0)}\n" for f, r in pts)
        script = (f'set title "ns per packet vs established flows ({n_human(s_best)} services)"\n'
                  'set logscale x\nset xlabel "established flows in the table"\nset ylabel "ns / packet"\n'
                  'set key top left\nset grid\nset yrange [0:*]\n'
                  'plot "DATA" using 1:2 with linespoints lw 2 title "established", '
                  '"DATA" using 1:3 with linespoints lw 2 title "new connection (SYN)"\n')
        if gnuplot("pipeline_flows", script, data):
            plots.append(("pipeline_flows", "Cost per packet against the size of the connection table"))
cp_init = sorted([r for r in cpl if r.get("worker") == "offline"], key=lambda r: r["services"])
if len(cp_init) >= 2:
    data = "".join(f"{r['services']} {r['initial_total_ms']} {r['change_total_p50_us'] / 1000} "
                   f"{r['change_total_p99_us'] / 1000}\n" for r in cp_init)
    script = ('set title "Control plane: programming time vs services (10 endpoints each)"\n'
              'set logscale xy\nset xlabel "services"\nset ylabel "ms"\nset key top left\nset grid\n'
              'plot "DATA" using 1:2 with linespoints lw 2 title "initial list (diff + publish)", '
              '"DATA" using 1:3 with linespoints lw 2 title "one endpoint change, p50", '
              '"DATA" using 1:4 with linespoints lw 2 title "one endpoint change, p99"\n')
    if gnuplot("cp_services", script, data):
        plots.append(("cp_services", "Control-plane programming time against the number of services"))

# ---------------------------------------------------------------- text
m = machine
L = []
A = L.append
A("# vipd benchmarks")
A("")
A("<!-- Generated by scripts/bench/report.py from " + res_dir + " — do not edit by hand;"
  " change the generator and rerun scripts/bench.sh. -->")
A("")
A("What vipd's dataplane costs per packet on one core, how fast the control plane")
A("programs it, and what it needs in memory — measured, never asserted in tests (issue 7).")
A("")
A("## How these numbers were made")
A("")
A(f"- Command: `{m['command']}` ({m['mode']} mode, {m.get('wall_s', '?')} s wall time)")
dirty = f", plus {m['dirty_files']} uncommitted modified files" if m.get("dirty_files") else ""
dp_dirty = [f for f in (m.get("dirty_fastpath") or "").split() if f.startswith("dataplane/")]
if dp_dirty:
    dirty += f" (in dataplane/: {', '.join('`' + f[len('dataplane/'):] + '`' for f in dp_dirty)})"
A(f"- Tree: commit `{m['commit']}`{dirty}; {m['date']}")
A(f"- Machine: {m['cpu']}, {m['cpus']} vCPUs ({m['threads_per_core']} thread/core)"
  f"{', ' + m['hypervisor'] + ' guest' if m.get('hypervisor') else ' (virtual machine)'}, " +
  (f"L2 {m['l2']}, L3 {m['l3']}, " if m.get('l2', '?') != '?' else "caches not reported by the VM, ") +
  f"{m['mem_gib']} GiB; kernel {m['kernel']}")
A(f"- Build: {m['compiler']}, meson buildtype `{m.get('buildtype') or 'release'}` (-O3, no -march), "
  f"DPDK {m['dpdk']} (Debian)")
A(f"- Memory: {'2 MiB hugepages' if m.get('hugepages') else '--no-huge (4 KiB pages), prefaulted'}; "
  f"scheduling: {'SCHED_FIFO (--rt)' if m.get('rt') else 'normal'}")
if m.get("note"):
    A(f"- Note: {m['note']}")
A(f"- Load average at start / end: {m.get('load_start', '?')} / {m.get('load_end', '?')} — "
  "this is a shared 2-vCPU VM on which other builds run; see *Method* for how the numbers resist that.")
A("")

# ---- headline
A("## Headline")
A("")
hl = []
for (s, f), r in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    c = cg_by.get((s, f), {})
    row = [f"{n_human(s)} / {n_human(f)}", fmt(r.get("est_ns")), fmt(r.get("est_mpps"), 2),
           fmt(r.get("baseline_ns"), 2), f"{ratio(r) * 100:.2f} % (1/{1 / ratio(r):.0f})" if ratio(r) else "—",
           fmt(r.get("newconn_mpps"), 2)]
    if prev_by:
        pr = prev_by.get((s, f), {})
        row.append(f"{fmt(pr.get('est_ns'))} / {fmt(pr.get('newconn_mpps'), 2)}" if pr else "—")
    hl.append(row)
A("Established-flow forwarding and new-connection rate, TCP, full NAT, one worker core,")
A("64-byte frames; *ratio* = pipeline Mpps / I/O-only baseline Mpps measured in the same run")
A("on the same port and frames (rx burst -> tx burst).")
A("")
hdr = ["services / flows", "pipeline ns/pkt", "pipeline Mpps", "baseline ns/pkt", "ratio", "new conn/s (M)"]
if prev_by:
    hdr.append("previous run: ns/pkt / new conn/s (M)")
A(table(hdr, hl))
A("")
ratio_note = ""
common = [k for k in by if k in prev_by and by[k].get("est_ns") and prev_by[k].get("est_ns")
          and by[k].get("baseline_ns") and prev_by[k].get("baseline_ns")]
if common:
    dt = max(abs(by[k]["est_ns"] / prev_by[k]["est_ns"] - 1) for k in common) * 100
    dr = max(abs((by[k]["est_ns"] / by[k]["baseline_ns"]) / (prev_by[k]["est_ns"] / prev_by[k]["baseline_ns"]) - 1)
             for k in common) * 100
    ratio_note = (f" Between these two runs the established ns/packet moved by up to {dt:.0f} %, the ratio to "
                  f"the baseline by up to {dr:.0f} %: the baseline, measured in the same process, tracks how "
                  "fast the VM is at that moment.")
if prev_machine:
    A(f"*Previous run*: the last results of the same mode (`{prev_dir}/`), commit "
      f"`{prev_machine.get('commit_short', '?')}`"
      + (f" + {prev_machine['dirty_files']} modified files" if prev_machine.get("dirty_files") else "")
      + f", {prev_machine.get('date', '?')}, load {prev_machine.get('load_start', '?')}. On this shared VM "
      "two runs of the same tree differ by up to tens of percent on single cases: trust the instruction "
      "counts (section 5) for small differences, and the times for large ones." + ratio_note)
    A("")
big = by.get((100000, 1000000)) or (matrix[-1] if matrix else None)
one = by.get((1, 1000))
hund = by.get((100000, 1000))
if big:
    A("Against the targets of issue 7" + ("" if (big["services"], big["flows"]) == (100000, 1000000) else
      f" (this run's largest case, {n_human(big['services'])} services / {n_human(big['flows'])} flows, "
      "stands in for 100k / 1M)") + ":")
    A("")
    tgt = []
    e = big.get("est_mpps") or 0
    tgt.append(["established >= 10 Mpps/core at 1M flows, 100k services",
                f"{e:.2f} Mpps ({big.get('est_ns', 0):.0f} ns) at {n_human(big['services'])} / {n_human(big['flows'])}",
                "met" if e >= 10 else (f"not met ({10 / e:.1f}x short)" if e else "—")
                + next((f"; reading its lines alone takes {fl['est_ns']:.0f} ns on this machine (memory floor, "
                        "section 1)" for fl in floor
                        if e < 10 and (fl["services"], fl["flows"]) == (big["services"], big["flows"])), "")])
    nc = max((r.get("newconn_mpps") or 0) for r in matrix)
    nc_big = big.get("newconn_mpps") or 0
    tgt.append([">= 1M new connections/s per core", f"{nc_big:.2f} M/s at {n_human(big['services'])} / "
                f"{n_human(big['flows'])} (best case {nc:.2f} M/s)", "met" if nc_big >= 1 else "not met"])
    if one and hund and one.get("est_ns") and hund.get("est_ns"):
        d = (hund["est_ns"] / one["est_ns"] - 1) * 100
        tgt.append(["100k services within 10 % of 1 service (1k flows)",
                    f"{d:+.0f} % ({one['est_ns']:.0f} -> {hund['est_ns']:.0f} ns)", "met" if d <= 10 else "not met"])
    cpr = next((r for r in cpl if r["services"] == 10000 and r["worker"] == "offline"), None)
    cprr = next((r for r in cpl if r["services"] == 10000 and r["worker"] == "running"), None)
    syr = next((r for r in syncl if r["services"] == 10000 and r.get("worker") == "offline"), None)
    syrr = next((r for r in syncl if r["services"] == 10000 and r.get("worker") == "running"), None)
    if syr:
        tgt.append(["one endpoint change p99 < 1 ms (10k services / 100k endpoints)",
                    f"{syr['change_p99_us'] / 1000:.3f} ms p99 ({syr['change_p50_us'] / 1000:.3f} ms p50): object "
                    "change -> published, control-plane CPU path (`vipd_bench sync --worker offline`)"
                    + (f"; {syrr['change_p99_us'] / 1000:.1f} ms p99 / {syrr['change_p50_us'] / 1000:.3f} ms p50 "
                       "waiting for a polling worker on this loaded VM" if syrr else ""),
                    "met" if syr["change_p99_us"] < 1000 else "not met"])
    elif cpr:
        tgt.append(["one endpoint change p99 < 1 ms (10k services / 100k endpoints)",
                    f"{cpr['change_total_p99_us'] / 1000:.2f} ms CPU path (QSBR offline)"
                    + (f"; {cprr['change_total_p99_us'] / 1000:.1f} ms with a polling worker on this loaded VM" if cprr else ""),
                    "met" if cpr["change_total_p99_us"] < 1000 else "not met"])
    A(table(["target", "measured", "verdict"], tgt))
    A("")

# ---- 1. pipeline
A("## 1. Dataplane pipeline, one worker core")
A("")
A("Full table (TCP, full NAT, 4 endpoints per service, 16 local addresses). ns/packet is the")
A("median over timed chunks of 256 packets; p10/p90 over the same chunks; *mean* is total cycles")
A("over total packets, which includes every preemption by the machine's other tenants.")
A("*fill* is the first packet of every flow into an empty table (includes first-touch effects);")
A("*newconn* is the steady-state rate of SYNs of new flows with the table already holding the")
A("established flows; *reply* is the other direction of the established flows (endpoint -> full-NAT")
A("local address, rewritten to VIP -> client).")
if n_runs > 1:
    A(f"Each case ran {n_runs} times, in rounds over the whole table (`bench.sh --rounds`: this VM has slow "
      "phases of tens of seconds, longer than one case); each row is the run with the median *est ns*, "
      "*est ns, every run* lists all of them, and *drops* counts over every run.")
A("")
rows = []
for r in matrix:
    rows.append([n_human(r["services"]), n_human(r["flows"]), fmt(r.get("est_ns")), fmt(r.get("est_ns_p10")),
                 fmt(r.get("est_ns_p90")), fmt(r.get("est_ns_mean")), fmt(r.get("reply_ns")),
                 fmt(r.get("newconn_ns")), fmt(r.get("fill_ns")),
                 fmt(r.get("baseline_ns"), 2)]
                + ([" / ".join(fmt(x) for x in r["est_ns_runs"])] if n_runs > 1 else [])
                + [r["drops_all"]])
A(table(["services", "flows", "est ns", "p10", "p90", "mean", "reply ns", "newconn ns", "fill ns", "baseline ns"]
        + (["est ns, every run"] if n_runs > 1 else []) + ["drops"], rows))
A("")
other = [r for r in pipe if not tcp_fnat(r)]
if other:
    A("Variants (same machine, same run):")
    A("")
    A(table(["variant", "services", "flows", "est ns", "newconn ns", "baseline ns"],
            [[variant(r), n_human(r["services"]), n_human(r["flows"]), fmt(r.get("est_ns")),
              fmt(r.get("newconn_ns")), fmt(r.get("baseline_ns"), 2)] for r in other]))
    A("")
for name, title in plots:
    if name.startswith("pipeline"):
        A(f"![{title}]({rel_img}/{name}.svg)")
        A("")
A("Every case checks its own counters: `drops` counts every packet the worker did not")
A("forward in the timed phases (it must be 0, otherwise the case measured drops, not forwarding).")
A("")

# ---- 1b. memory floor
for fl in floor:
    pr = by.get((fl["services"], fl["flows"]), {})
    A(f"### The memory floor at {n_human(fl['services'])} services / {n_human(fl['flows'])} flows")
    A("")
    A("`vipd_bench memfloor` (bench/memfloor_bench.cc) does nothing but read the random cache lines an "
      "established packet must read, in the pipeline's own pattern (bursts of 32, one level at a time, every "
      "line of a level prefetched for the whole burst before the first is read), over regions of the sizes the "
      "real structures have in this case, on the same kind of pages. It is the part of the cost that no "
      "instruction saving removes on this machine."
      + (" The last rows read one line per packet from packed regions of growing size, and the lines of the "
         "1 MiB region spread one per 4 KiB page: where this process's caches end, and what finding a line's "
         "page costs." if "xlat_ns" in fl else ""))
    A("")
    mib = lambda b: f"{b / 1048576:.1f} MiB"
    # Since the Conn moved into the hash's key slot (conn_table.h) the
    # results have no est_conn_bytes: the key slot is that line.
    conn_in_slot = "est_conn_bytes" not in fl
    slot_words = "key slot holding the `Conn` (written)" if conn_in_slot else "key slot, `Conn` (written)"
    est_regions = [fl["est_bucket_bytes"], fl["est_key_bytes"]] + ([] if conn_in_slot else [fl["est_conn_bytes"]])
    rows = [["established packet: primary + secondary rte_hash bucket (rte_hash compares the signatures "
             f"of both), {slot_words}, `DestCounters` (written, with the worker's copy of the destination's "
             "generation)", f"{fl.get('est_lines', 5)} / {fl.get('est_levels', 4)}",
             ", ".join(mib(b) for b in est_regions + [fl["est_destcounters_bytes"]]),
             fmt(fl.get("est_ns")), fmt(fl.get("est_ns_p10")), fmt(fl.get("est_ns_p90"))]]
    if fl.get("reply_ns"):
        rows.append([f"full-NAT reply: port index entry, {'the `Conn` in its key slot' if conn_in_slot else '`Conn`'} "
                     "(written), `DestCounters` (written)",
                     f"{fl.get('reply_lines', 3)} / 3",
                     f"{mib(fl['reply_portindex_bytes'])}, "
                     f"{mib(fl['est_key_bytes'] if conn_in_slot else fl['est_conn_bytes'])}, "
                     f"{mib(fl['est_destcounters_bytes'])}",
                     fmt(fl["reply_ns"]), fmt(fl.get("reply_ns_p10")), fmt(fl.get("reply_ns_p90"))])
    n = 1
    while f"chain{n}_ns" in fl:
        rows.append([f"a chain of {n} dependent line{'s' if n > 1 else ''}", f"{n} / {n}",
                     f"{n} x {mib(fl['chain_region_bytes'])}", fmt(fl[f"chain{n}_ns"]),
                     fmt(fl.get(f"chain{n}_ns_p10")), fmt(fl.get(f"chain{n}_ns_p90"))])
        n += 1
    if fl.get("wide_ns"):
        w = fl.get("wide_lines", 3)
        rows.append([f"{w} lines with no dependency between them (one level)", f"{w} / 1",
                     f"{w} x {mib(fl['chain_region_bytes'])}", fmt(fl["wide_ns"]), fmt(fl.get("wide_ns_p10")),
                     fmt(fl.get("wide_ns_p90"))])
    sizes = [mb for mb in (1, 4, 16, 64) if f"size{mb}_ns" in fl]
    for mb in sizes:
        rows.append([f"one line of a packed {mb} MiB region", "1 / 1", f"{mb}.0 MiB", fmt(fl[f"size{mb}_ns"]),
                     fmt(fl.get(f"size{mb}_ns_p10")), fmt(fl.get(f"size{mb}_ns_p90"))])
    if fl.get("xlat_ns"):
        rows.append(["one line of 1 MiB of lines spread one per 4 KiB page (the lines of the 1 MiB row)", "1 / 1",
                     "64.0 MiB", fmt(fl["xlat_ns"]), fmt(fl.get("xlat_ns_p10")), fmt(fl.get("xlat_ns_p90"))])
    A(table(["reads per packet", "lines / levels", "regions", "ns/packet", "p10", "p90"], rows))
    A("")
    if sizes and fl.get("xlat_ns") and fl.get("size1_ns") and fl.get("size64_ns"):
        s16 = fl.get("size16_ns")
        A(f"Where the lines come from: one random line costs {fmt(fl['size1_ns'])} ns from a packed 1 MiB region"
          + (f", {fmt(s16)} ns from 16 MiB (the size of the connection hash's bucket array here)" if s16 else "")
          + f" and {fmt(fl['size64_ns'])} ns from 64 MiB"
          + (f": a 16 MiB region costs {s16 / fl['size64_ns'] * 100:.0f} % of what 64 MiB does, so this process "
             "does not get the 32 MiB L3 to itself (a likely reason, not measured: it is the host's, shared with "
             "its other tenants) and the bucket array comes from memory nearly as often as the key slots do"
             if s16 else "")
          + f". The same 1 MiB of lines spread one per 4 KiB page costs {fmt(fl['xlat_ns'])} ns a line: finding "
          f"the page (a TLB miss and a page walk, a nested one in this VM) adds "
          f"{fl['xlat_ns'] - fl['size1_ns']:.1f} ns to a line, a part of the {fmt(fl['size64_ns'])} ns a line "
          "from memory costs, not most of it.")
        A("")
    if pr.get("est_ns") and fl.get("est_ns"):
        c1 = fl.get("chain1_ns")
        wl = fl.get("wide_lines", 3)
        wchain = fl.get(f"chain{wl}_ns")
        A(f"The pipeline's established packet at this size took {pr['est_ns']:.0f} ns in the same run; reading "
          f"its lines alone takes {fl['est_ns']:.0f} ns ({fl['est_ns'] / pr['est_ns'] * 100:.0f} %)"
          + (f", about {c1:.0f} ns per random line" if c1 else "")
          + (f"; {wl} lines with no dependency between them still take {fl['wide_ns']:.0f} ns against "
             f"{wchain:.0f} ns chained: this machine is bound by how many random lines it fetches more than by "
             "how long one fetch takes, so the number of lines a packet reads, more than their order, sets the "
             "floor" if fl.get("wide_ns") and wchain else "")
          + ". The target of 100 ns per packet leaves "
          + (f"{100 - fl['est_ns']:.0f} ns" if fl["est_ns"] < 100 else "nothing")
          + " for the work itself on this machine, which takes "
          + (f"{one['est_ns']:.0f} ns with everything in cache (1 service / 1k flows)" if one and one.get("est_ns")
             else "more than that with everything in cache")
          + ". Each line a design saves is worth about one step of the chain"
          + (f", {c1:.0f} ns here." if c1 else ".")
          + (f" A full-NAT reply reads 3 lines ({fl['reply_ns']:.0f} ns alone) and took {pr['reply_ns']:.0f} ns "
             "in the pipeline." if fl.get("reply_ns") and pr.get("reply_ns") else ""))
        A("")
    for fh in floor_huge:
        if (fh["services"], fh["flows"]) != (fl["services"], fl["flows"]):
            continue
        deep = max((n for n in range(1, 6) if f"chain{n}_ns" in fh and f"chain{n}_ns" in fl), default=0)
        A(f"The same on 2 MiB hugepages (`--huge-variant`, same run): established packet {fmt(fh.get('est_ns'))} ns "
          f"(against {fmt(fl.get('est_ns'))} on 4 KiB pages), one line {fmt(fh.get('chain1_ns'))} ns (against "
          f"{fmt(fl.get('chain1_ns'))})"
          + (f", a chain of {deep} {fmt(fh[f'chain{deep}_ns'])} ns (against {fmt(fl[f'chain{deep}_ns'])})" if deep > 1 else "")
          + (f", one line of 1 MiB of lines spread one per 4 KiB page {fmt(fh['xlat_ns'])} ns against "
             f"{fmt(fh['size1_ns'])} packed (on 4 KiB pages: {fmt(fl['xlat_ns'])} against {fmt(fl['size1_ns'])})"
             if all(k in fh and k in fl for k in ("xlat_ns", "size1_ns")) else "")
          + (f", one line of a packed 16 MiB region {fmt(fh['size16_ns'])} ns (against {fmt(fl['size16_ns'])})"
             if "size16_ns" in fh and "size16_ns" in fl else "")
          + ". One run each, so differences of tens of percent are within this VM's noise"
          + (": here the page size barely moves the floor." if fh.get("est_ns") and fl.get("est_ns")
             and abs(fh["est_ns"] / fl["est_ns"] - 1) < 0.1 else
             f": here hugepages read the established lines in {fh['est_ns'] / fl['est_ns'] * 100:.0f} % of the time "
             "(fewer TLB misses); for the pipeline itself see item 3 of *What the numbers ask for*."
             if fh.get("est_ns") and fl.get("est_ns") else "."))
        A("")

# ---- 2. control plane
A("## 2. Control plane: ServiceTable change to published dataplane tables")
A("")
A("`TableDiff::compute(prev, next)` + `Publisher::apply(next, diff)`, which returns after")
A("`rte_rcu_qsbr_synchronize`, i.e. when every worker has passed a quiescent state and the new")
A("table is the one in force. One change = one endpoint of one random service replaced by a new")
A("address (a pod replaced). *same_content* is the O(services) comparison SyncLoop makes before")
A("every sync; *table copy* is one copy of the whole ServiceTable (a lower bound of what rebuilding")
A("it from the sources costs, which SyncLoop does on every change).")
A("")
rows = []
for r in sorted(cpl, key=lambda r: (r["services"], r["worker"])):
    rows.append([f"{n_human(r['services'])} x {r['endpoints_per_service']}", r["worker"], r["changes"],
                 fmt(r["initial_total_ms"]), fmt(r["change_total_p50_us"]), fmt(r["change_total_p99_us"]),
                 fmt(r["change_compute_p50_us"]), fmt(r["change_apply_p50_us"]), fmt(r["change_apply_p99_us"]),
                 fmt(r["change_same_content_p50_us"]), fmt(r["table_copy_ms"]), fmt(r["full_resync_unchanged_ms"])])
A(table(["services x endpoints", "worker", "changes", "initial list ms", "change p50 µs", "change p99 µs",
         "diff p50 µs", "publish p50 µs", "publish p99 µs", "same_content p50 µs", "table copy ms",
         "full resync ms"], rows))
A("")
A("*worker running*: the real `worker_main` polls an idle net_ring port on the second lcore, so")
A("`publish` includes waiting for its next quiescent state; on this loaded 2-vCPU VM that worker is")
A("often descheduled, which is what the running-worker p50/p99 mostly measure. *offline*: the QSBR")
A("has a registered thread that is offline, so the numbers are the control plane's own CPU time.")
A("")
for name, title in plots:
    if name.startswith("cp"):
        A(f"![{title}]({rel_img}/{name}.svg)")
        A("")

# ---- 2b. the sync path end to end
if syncl:
    A("### 2b. Object change to published table, through the code vipd runs")
    A("")
    A("`vipd_bench sync`: Kubernetes objects (as the reflectors hold them) -> `kube::DeltaBuilder` ->")
    A("`TableIndex` (rebuilds only the Services whose objects changed) -> `SyncLoop::sync_now` (diffs only")
    A("the keys the index reports) -> publisher, with the real worker polling on the second lcore (the apply")
    A("returns after its quiescent state). One change = one endpoint of one random EndpointSlice replaced.")
    A("*Baseline* (same run, same objects): the whole-table path vipd used before this change —")
    A("`build_service_table` over every object, then `TableDiff::compute` over every service, then the")
    A("same publish. Not included: the HTTP read and JSON decode of the one watch event (a few µs per")
    A("object at the rate of the decode row below) and the reflector's lock.")
    A("")
    rows = []
    for r in sorted(syncl, key=lambda r: (r["services"], r.get("worker", ""))):
        rows.append([f"{n_human(r['services'])} x {r['endpoints_per_service']}", r.get("worker", "running"), r["changes"],
                     fmt(r["initial_sync_ms"]), fmt(r["change_p50_us"]), fmt(r["change_p90_us"]),
                     fmt(r["change_p99_us"]), fmt(r["change_max_us"]),
                     f"{fmt(r['baseline_change_p50_us'] / 1000)} ms ({r['baseline_changes']} changes)",
                     f"{r['speedup_p50']:.0f}x", fmt(r["table_snapshot_ms"])])
    A(table(["services x endpoints", "worker", "changes", "initial sync ms", "change p50 µs", "p90 µs", "p99 µs",
             "max µs", "baseline p50", "p50 speed-up", "reader snapshot ms"], rows))
    A("")
    A("*reader snapshot*: what the first `vipctl list`/scrape after a change pays for its copy of the")
    A("applied table (once per generation; not on the sync path). *worker running*: the apply waits for")
    A("the polling worker's next quiescent state; *offline*: the control plane's own CPU path. When other")
    A("tenants of this 2-vCPU VM deschedule the worker thread, that wait is what the running p99 shows")
    A("(a run at load average 10 measured 10 ms p99 running against 0.1 ms offline; a gateway with")
    A("isolated worker cores does not see it).")
    A("")
if decl:
    A("### 2c. Decoding a 50 MB initial list")
    A("")
    A("`vipd_bench decode`: one EndpointSlice list body in the API server's JSON form, decoded as")
    A("`Reflector::list` decodes a page (simdjson parse, key, `decode_endpoint_slice` per item: the object rules")
    A("shared with the manifests source, read straight from the simdjson values). Baseline: the simdjson parse alone.")
    A("")
    rows = []
    for r in decl:
        rows.append([f"{r['bytes'] / 1e6:.1f}", n_human(r["slices"]), r["endpoints_per_slice"],
                     fmt(r["parse_only_s"], 3), fmt(r["parse_only_mb_s"]), fmt(r["decode_s"], 2),
                     fmt(r["decode_mb_s"]), f"{r['decode_vs_parse']:.0f}x"])
    A(table(["MB", "slices", "endpoints/slice", "parse s", "parse MB/s", "decode s", "decode MB/s",
             "decode / parse"], rows))
    A("")

# ---- 3. kernel modes (scripts/bench/report_kernel.py)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_kernel  # noqa: E402
import report_prose  # noqa: E402
L.extend(report_kernel.section(res_dir, table, fmt, n_human))

# ---- 4. memory
A("## 4. Memory")
A("")
src = matrix[-1] if matrix else None
mrow = mem[0] if mem else None
if src:
    A(f"- Connection table: **{src['conn_bytes_per_entry']:.0f} bytes per connection** of capacity "
      f"(DPDK heap taken by `ConnTable::init` for {src['conn_capacity']:,} entries: the rte_hash's key slot of "
      f"the client's key, 64 bytes, which holds the {src['conn_struct_bytes']}-byte `Conn` as the key itself "
      "(conn_table.h), the hash's buckets and extendable buckets, and full NAT's port index for the replies "
      "(4 bytes per local address and port); NAT mode takes a second key slot per connection for the reply "
      "key).")
    svc = next((r for r in cpl if r["services"] == 10000 and r["worker"] == "offline"), None)
    A(f"- Service: `Service` object {src['service_struct_bytes']} bytes + {src['destref_struct_bytes']} bytes per "
      f"endpoint, plus rte_malloc's per-allocation header and padding: {src['service_bytes_each']:.0f} bytes of "
      f"DPDK heap per service with {src['backends']} endpoints"
      + (f"; {svc['dp_bytes_per_service']:.0f} bytes with {svc['endpoints_per_service']} endpoints" if svc else "")
      + f". Per worker, scheduler state (per service id) and destination counters (per destination slot) are "
      f"preallocated: {src['worker_state_bytes'] / 2**20:.0f} MiB in this case "
      f"({n_human(src['services'])} services x {src['backends']} endpoints, including the 16 full-NAT port pools).")
    if svc:
        A(f"- Control side (libc heap), {n_human(svc['services'])} services x {svc['endpoints_per_service']} endpoints: "
          f"ServiceTable {svc['cp_table_bytes'] / svc['services']:.0f} bytes/service, Publisher records "
          f"{svc['cp_publisher_bytes'] / svc['services']:.0f} bytes/service (a copy of each spec plus a std::map of "
          "destination slots).")
if mrow:
    A(f"- RSS with **{n_human(mrow['flows'])} established flows** and {n_human(mrow['services'])} services "
      f"(no prefault, so only touched pages count): **{mrow['rss_kb_with_flows'] / 1024:.0f} MiB** "
      f"(after EAL init: {mrow['rss_kb_after_eal'] / 1024:.0f} MiB; DPDK heap in use "
      f"{mrow['dpdk_heap_total_bytes'] / 2**20:.0f} MiB, of which the connection table "
      f"{mrow['conn_table_bytes'] / 2**20:.0f} MiB for {mrow['conn_capacity']:,} entries).")
A("")

# ---- 5. callgrind
A("## 5. Instructions per packet (callgrind)")
A("")
if cg:
    A("`valgrind --tool=callgrind --collect-atstart=no`: collection is switched on only around the")
    A("timed polls (client requests in bench/pipeline_bench.cc) and dumped per phase, so these are")
    A("exact instruction counts of the worker path per packet — stable on a noisy machine; compare")
    A("them across commits to see regressions. (Fewer packets than the timed runs.) The connection")
    A("sweep is left out of the count: its work follows time, not packets (the whole table once a second),")
    A("and under valgrind time runs tens of times slower. The timed runs measure it instead:")
    sw = [r for r in matrix if r.get("est_sweep_per_pkt") is not None]
    if sw:
        A("it visited " + "; ".join(f"{r['est_sweep_per_pkt']:.2f} entries per established packet at "
                                    f"{n_human(r['services'])} / {n_human(r['flows'])} ({n_human(r['conn_capacity'])} entries)"
                                    for r in sw if r["services"] in (1, 100000)) + ".")
    A("")
    def cg_row(r):
        row = [f"{n_human(r['services'])} / {n_human(r['flows'])}", fmt(r.get("est_ir_per_pkt")),
               fmt(r.get("reply_ir_per_pkt")), fmt(r.get("newconn_ir_per_pkt")), fmt(r.get("fill_ir_per_pkt")), fmt(r.get("baseline_ir_per_pkt"))]
        if prev_cg:
            pr = prev_cg.get((r["services"], r["flows"]), {})
            row.append(f"{fmt(pr.get('est_ir_per_pkt'))} / {fmt(pr.get('newconn_ir_per_pkt'))}" if pr else "—")
        return row
    hdr = ["services / flows", "established", "reply", "new connection", "fill", "I/O baseline"]
    if prev_cg:
        hdr.append("previous run: established / new")
    A(table(hdr, [cg_row(r) for r in cg]))
    A("")
    last = cg[-1]
    for phase in ("est", "newconn"):
        p = os.path.join(res_dir, f"callgrind_{phase}_{last['services']}_{last['flows']}.txt")
        if os.path.exists(p):
            lines = open(p).read().splitlines()[:15]
            A(f"Where the instructions go, *{phase}* ({n_human(last['services'])} services / "
              f"{n_human(last['flows'])} flows), self instructions per packet:")
            A("")
            A("```")
            A("\n".join(lines))
            A("```")
            A("")
else:
    A("Not measured in this run (valgrind missing or the run failed).")
    A("")
if cg_cp:
    A("Control plane, instructions per call (callgrind, 20 changes, 10 endpoints per service): the")
    A("per-change diff and comparison grow with the number of services, the publish does not.")
    A("")
    A(table(["services", "initial diff", "initial publish", "per service", "change: same_content",
             "change: diff", "change: publish"],
            [[n_human(r["services"]), fmt(r.get("initial_compute_ir")), fmt(r.get("initial_apply_ir")),
              fmt(r.get("initial_apply_ir", 0) / r["services"]), fmt(r.get("same_content_ir")),
              fmt(r.get("change_compute_ir")), fmt(r.get("change_apply_ir"))] for r in cg_cp]))
    A("")

# ---- method
A("## Method")
A("")
A("- `build-bench/bench/vipd_bench pipeline` is the benchmark thread *and* the worker: it sets up")
A("  `Shared` + one `Worker` as `DpdkDataplane::init` does, publishes the services through the real")
A("  `Publisher`, seeds the gateway's ARP entry (no packet ever waits for ARP), and then runs exactly")
A("  one `worker_main` poll per 64 packets (`kRxBurst`): rx, `process_burst`, `service_pending`, `flush_tx`,")
A("  the paced `sweep_conns`, `rte_rcu_qsbr_quiescent`.")
A("- The port is DPDK's `net_ring0` vdev, an rte_ring looped onto itself: nothing leaves the")
A("  process. Per chunk, the generator (untimed) writes 256 fresh frames and enqueues them with")
A("  tx burst; the timed polls consume exactly those; the forwarded frames are then taken back and")
A("  rewritten. Only the polls are timed (rdtsc), so the generator's cost is excluded. The frames")
A("  are therefore warm in cache (as with DDIO on a real NIC, somewhat more so).")
A("- Flows are picked uniformly at random (no locality: the worst case for caches). Clients are")
A("  172.16/12 addresses, services 10.96.x.y:80 with 4 endpoints behind one gateway.")
A("- The I/O-only baseline times rx burst -> tx burst on the same port and frames. A ring port")
A("  costs about 1 ns per packet, so the ratio mainly says how much of a core the pipeline itself")
A("  takes; with a real NIC's PMD the baseline would be tens of ns (descriptor rings, mbuf")
A("  alloc/free) and the ratio correspondingly higher.")
A("- Noise: the machine is a shared VM. Each phase is timed in chunks of 256 packets; the median")
A("  chunk is the headline (preempted chunks are outliers), with p10/p90 and the plain mean beside")
A("  it. DPDK memory is prefaulted (`MADV_POPULATE_WRITE`) and the connection table and hash are")
A("  touched by an untimed warm-up round, because on this VM the first touch of a page costs")
A("  microseconds; `LD_BIND_NOW=1` avoids lazy symbol binding (~100 DPDK shared objects) inside a")
A("  timed region. Instruction counts (section 5) do not depend on any of this.")
A("- Scaled down from the issue: nothing. The matrix is {1, 1k, 100k} services x {1k, 1M} flows;")
A("  the 1M-flow cases need about 600 MB of DPDK memory. `--quick` runs a subset with 200k packets.")
A("  The daemon's defaults would not hold the large cases: the bench raises `max_services` above")
A("  65536 for 100k services, sizes the connection table at 1.25x the flows (default 262144 per")
A("  worker) and uses 16 full-NAT local addresses (one address gives a worker 64512 ports, i.e.")
A("  at most 64512 concurrent connections).")
A("- Not measured: multi-core scaling (each run is one worker; this VM has 2 vCPUs and no larger")
A("  machine was available to this run), and traffic with locality (flows are uniformly random).")
A("- Reproduce: `scripts/bench-bootstrap.sh` (gnuplot, valgrind), then `scripts/bench.sh` (or")
A("  `--quick`; `--hugepages` to run on 2 MiB pages, `--rt` for SCHED_FIFO; `--smoke` runs every")
A("  benchmark at tiny sizes in seconds, which `tests/integration/bench_test.sh` does to check that the")
A("  suite and this report still work: its numbers mean nothing). Raw results:")
A(f"  `{res_dir}/` (JSON lines per program; `callgrind_*.txt` profiles; `run.log`).")
A("")

# ---- comparison
A("## Published numbers of other load balancers")
A("")
L.extend(report_prose.published())
if big and one:
    A(f"vipd today, one core of this VM with a ring port: {one.get('est_mpps', 0):.1f} Mpps with 1 service / "
      f"1k flows, {big.get('est_mpps', 0):.2f} Mpps with {n_human(big['services'])} services / "
      f"{n_human(big['flows'])} flows, and {big.get('newconn_mpps', 0):.2f} M new connections/s at that size. "
      "DPVS's single-worker figures above include the NIC and both directions of every connection.")
    A("")

# ---- what the numbers ask for
A("## What the numbers ask for")
A("")
A("Read from the tables above and the callgrind profiles.")
A("")
L.extend(report_prose.done(cg_by, n_human))
A("The time columns *previous run* of the headline show the before/after in ns on this VM. Still to do:")
A("")
asks = []
if one and big and one.get("est_ns") and big.get("est_ns"):
    asks.append(f"**The rest of the gap at scale.** Established forwarding costs {one['est_ns']:.0f} ns "
                f"with 1 service / 1k flows and {big['est_ns']:.0f} ns with {n_human(big['services'])} services / "
                f"{n_human(big['flows'])} flows (the target is <= 100 ns there). "
                "What was tried and not kept is in the table below. "
                "Measured but not landed: a connection table of vipd's own "
                "(cuckoo hash, 64-byte buckets of 8 slots, the key read from the `Conn` itself). Its main gain, "
                "one line less per packet, is now had within rte_hash (the `Conn` is the hash's key, above); "
                "what it still has over rte_hash is that it read a key's second bucket only when the first "
                "missed, where rte_hash's bulk lookup reads both: one line of the four, which the last "
                "row of the table found not to matter on this machine. It would replace rte_hash, the DPDK "
                "library made for this job, for no measured gain, so it is not pursued. "
                + ("Why the second bucket did not show is not settled. It is not that the bucket array (16 MiB) "
                   f"stays in cache: a line of a packed 16 MiB region costs this process {floor[-1]['size16_ns']:.0f} "
                   f"ns against {floor[-1]['size64_ns']:.0f} ns from 64 MiB (memory floor, section 1). The "
                   "experiment also added a dependent step and 28 instructions per packet, which may have cost "
                   "what the line saved. "
                   if floor and "size16_ns" in floor[-1] and "size64_ns" in floor[-1] else
                   "The second bucket is not what costs here; a likely reason, not measured: at 100k / 1M the "
                   "bucket array (16 MiB) fits the 32 MiB L3 far better than the key slots (80 MiB). ")
                + (f"The memory floor (section 1) puts reading an established packet's lines alone at "
                   f"{floor[-1]['est_ns']:.0f} ns at {n_human(floor[-1]['services'])} / "
                   f"{n_human(floor[-1]['flows'])} on this VM (about {floor[-1].get('chain1_ns', 0):.0f} ns per "
                   "random line), "
                   + ("so the target is out of reach here for any design that reads these lines, and only "
                      "touching fewer lines helps. " if floor[-1]['est_ns'] >= 100 else
                      f"which leaves {100 - floor[-1]['est_ns']:.0f} ns of the target for the instructions only "
                      "if they overlap the misses; they take about 60 ns at 1 service / 1k flows (all in "
                      "cache) outside the VM's slow phases (see the machine note) and overlap them only in part: rte_hash's bulk lookup waits for its buckets and "
                      "then its key slots inside one call, and the orderings in the table that tried to "
                      "hide it did not. ")
                   if floor else
                   "On this VM random reads are throughput-bound (~19 ns each on 4 KiB pages), so only touching "
                   "fewer cache lines helps. ")
                + "What an established packet still "
                "touches: its frame, the connection hash's two buckets, the key slot that holds its `Conn` "
                "(one line) and its `DestCounters`, which also hold the "
                "worker's copy of the destination's generation.")
if cg:
    asks.append("**Instructions:** an established packet's count (section 5's profile) is now spread over "
                "the two burst stages, with the frame checks, parse, NAT rewrite and `output()` inlined into them: "
                "`prepare_burst` (frame checks and parse, about 60 of them for the header checks and checksum "
                "verification, key hashing, prefetches), rte_hash's bulk connection lookup (~140) and the "
                "per-packet stage in `process_burst` (connection checks, counters, the rewrite with its checksum "
                "update, the Ethernet header); no single part dominates. With a NIC, `RTE_MBUF_F_RX_IP_CKSUM_GOOD` "
                "would make the header checksum verification (~25) free. New flows still look the VIP "
                "table up, whose 8-byte key rte_hash compares with a `memcmp` call (16-byte keys get an inline SSE "
                "compare).")
if big and big.get("newconn_mpps") and big["newconn_mpps"] < 1:
    asks.append(f"**New connections:** {big['newconn_ns']:.0f} ns each at {n_human(big['flows'])} flows "
                "(target >= 1M/s/core, i.e. <= 1000 ns): a new flow still adds its key to the connection hash "
                "(`rte_hash_add_key_with_hash_data`, its bucket search and cuckoo moves; NAT mode adds two), "
                f"which is where it goes from {one.get('newconn_ns', 0):.0f} ns at 1k flows to "
                f"{big['newconn_ns']:.0f} ns.")
if hund and one and hund.get("est_ns") and one.get("est_ns") and hund["est_ns"] > one["est_ns"] * 1.1:
    c1, c100 = cg_by.get((1, 1000)), cg_by.get((100000, 1000))
    same_ir = ""
    if c1 and c100 and c1.get("est_ir_per_pkt") and c100.get("est_ir_per_pkt"):
        same_ir = (f" The instruction count is the same ({c1['est_ir_per_pkt']:.0f} vs "
                   f"{c100['est_ir_per_pkt']:.0f} per packet), so the difference is cache misses, not work.")
    asks.append(f"**Services should be flat:** 100k services cost {hund['est_ns']:.0f} ns against "
                f"{one['est_ns']:.0f} ns for 1 (1k flows).{same_ir} An established packet no longer looks "
                "the VIP table up (the connection comes first); what still grows with services is the working "
                "set of `DestCounters` (4 destinations per service).")


def xlat_cost(fl, fh):
    """What finding a line's page costs on 4 KiB and on 2 MiB pages (memory
    floor rows xlat and size1), as a clause; "" without those rows."""
    if not (fl and fh and all(k in fl and k in fh for k in ("xlat_ns", "size1_ns")) and "size64_ns" in fl):
        return ""
    return (f": finding a line's page adds {fl['xlat_ns'] - fl['size1_ns']:.1f} ns to it on 4 KiB pages and "
            f"{fh['xlat_ns'] - fh['size1_ns']:.1f} ns on 2 MiB pages, of the {fl['size64_ns']:.0f} ns a line "
            "from memory costs")


hv = [r for r in pipe if bool(r.get("hugepages")) != bool(machine.get("hugepages"))]
if hv and big and hv[0].get("est_ns"):
    h = hv[0]
    base = by.get((h["services"], h["flows"]), {})
    asks.append(f"**Hugepages help less than the misses cost.** {n_human(h['services'])} services / "
                f"{n_human(h['flows'])} flows on 2 MiB pages: {h['est_ns']:.0f} ns established, "
                f"{h.get('newconn_ns', 0):.0f} ns new connection, against {base.get('est_ns', 0):.0f} / "
                f"{base.get('newconn_ns', 0):.0f} ns on 4 KiB pages. TLB reach is not the main cost; the "
                "number of cache lines missed is (item 1, and the memory floor in section 1)"
                + xlat_cost(floor[-1] if floor else None, floor_huge[-1] if floor_huge else None)
                + ". Use hugepages in production anyway (DPDK's default).")
else:
    asks.append("**Hugepages** for the tables (TLB reach): `scripts/bench.sh --huge-variant` runs the largest "
                "case on 2 MiB pages too. Measured on 2026-12-01 outside the report: with rte_hash, 5 interleaved "
                "pairs at 100k / 1M showed no gain; with the connection table of item 1, 8-10 % at 1M flows. "
                "The host may back this VM with 4 KiB pages, which would hide most of the difference.")
cpr = next((r for r in cpl if r["services"] == 10000 and r["worker"] == "offline"), None)
syr = next((r for r in syncl if r["services"] == 10000 and r.get("worker") == "offline"), None)
if syr:
    asks.append(f"**Control plane.** The sync path is incremental: one endpoint change with 10k services costs "
                f"{syr['change_p50_us']:.0f} µs p50 / {syr['change_p99_us']:.0f} µs p99 end to end, against "
                f"{syr['baseline_change_p50_us'] / 1000:.0f} ms for the whole-table path (section 2b). What is "
                "still O(services): a full resync (at start, after errors, every `--sync-full-resync-s`) and the "
                "first reader snapshot after a change. List decoding goes through yaml-cpp nodes so that both "
                "sources share one rule set; section 2c shows what that costs against a bare simdjson parse.")
elif cpr:
    asks.append(f"**Control plane: per-change work is O(services).** With 10k services one endpoint change "
                f"costs {cpr['change_compute_p50_us']:.0f} µs p50 in `TableDiff::compute` (it compares every "
                f"service), {cpr['change_same_content_p50_us']:.0f} µs in `same_content`, and SyncLoop also "
                f"rebuilds the whole table (a plain copy alone is {cpr['table_copy_ms']:.1f} ms); publishing "
                f"the one changed service takes {cpr['change_apply_p50_us']:.0f} µs. An incremental path "
                "(sources report which services changed; diff only those) would make the change-to-dataplane "
                "time independent of the table size. The initial 10k-service list takes "
                f"{cpr['initial_total_ms']:.0f} ms (one rte_zmalloc and one rte_hash add per service, "
                "std::map bookkeeping): fine for start-up.")
asks.extend(report_kernel.asks(res_dir, n_human))
for i, a in enumerate(asks, 1):
    A(f"{i}. {a}")
A("")
L.extend(report_prose.not_kept())

with open(doc_path, "w") as f:
    f.write("\n".join(L))
print(f"report: wrote {doc_path} ({len(plots)} plots)", file=sys.stderr)
