#!/usr/bin/env python3
"""usage: report.py [--check] [RESULTS_DIR [DOC_PATH [IMG_DIR]]]

Renders docs/benchmarks.md from the results scripts/bench.sh wrote
(RESULTS_DIR, default bench/results/full, and RESULTS_DIR.prev for the
previous-run columns), the measurement files kept beside them
(bench/results/changes.jsonl, not_kept.jsonl, added/*.jsonl) and the
template scripts/bench/benchmarks.md.tmpl; draws the plots into IMG_DIR
(default docs/img) with gnuplot when it is installed.

--check renders into memory from the same inputs, writes nothing, and exits
1 (printing a diff) when DOC_PATH differs: run it after changing a results
file, the template or this program. Python standard library only.
"""
import argparse
import difflib
import json
import os
import re
import shutil
import string
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import report_kernel  # noqa: E402

TEMPLATE = os.path.join(HERE, "benchmarks.md.tmpl")
KEPT = os.path.join(ROOT, "bench", "results")  # changes.jsonl, not_kept.jsonl, added/
PHASE = {"est": "established", "reply": "reply", "newconn": "new connection", "nat reply": "NAT-mode reply"}


class BadInput(Exception):
    pass


def jsonl(name, d):
    """The JSON objects of file `name` in directory d ([] when there is none); a
    line that is not a JSON object (a run cut short) is skipped with a warning."""
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return []
    rows = []
    with open(p) as f:
        for n, line in enumerate(f, 1):
            if not line.strip().startswith("{"):
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                print(f"report.py: {p} line {n} is not JSON ({e}): skipped", file=sys.stderr)
    return rows


def fmt(v, nd=1):
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if isinstance(v, int) and abs(v) < 100:
        return str(v)
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.{nd}f}"


def n_human(n):
    if n >= 1000000 and n % 1000000 == 0:
        return f"{n // 1000000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def table(header, rows, left=1):
    """A Markdown table: the first `left` columns (text) aligned left, the
    others (numbers) right; a | inside a cell is escaped."""
    cell = lambda c: str(c).replace("|", "\\|")  # noqa: E731
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i < left else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


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


class Data:
    """Everything the report reads, loaded once."""

    def __init__(self, res_dir):
        for need in ("machine.json", "pipeline.jsonl"):
            if not os.path.isfile(os.path.join(res_dir, need)):
                raise BadInput(f"{res_dir} has no {need}: not the results of scripts/bench.sh (run it first)")
        self.res_dir = res_dir
        with open(os.path.join(res_dir, "machine.json")) as f:
            self.machine = m = json.load(f)
        self.prev_dir = res_dir.rstrip("/") + ".prev"
        self.prev_machine, self.prev_by, self.prev_cg = None, {}, {}
        if os.path.exists(os.path.join(self.prev_dir, "machine.json")):
            with open(os.path.join(self.prev_dir, "machine.json")) as f:
                self.prev_machine = json.load(f)
            for r in median_runs(jsonl("pipeline.jsonl", self.prev_dir)):
                if (r.get("proto"), r.get("fwd")) == ("tcp", "fnat") and \
                        bool(r.get("hugepages")) == bool(self.prev_machine.get("hugepages")):
                    self.prev_by[(r["services"], r["flows"])] = r
            for r in jsonl("callgrind.jsonl", self.prev_dir):
                if r.get("bench") != "cp" and r.get("family", 4) == 4:
                    self.prev_cg[(r["services"], r["flows"])] = r
        self.pipe = median_runs(jsonl("pipeline.jsonl", res_dir))
        self.n_runs = max((len(r["est_ns_runs"]) for r in self.pipe), default=1)
        self.cpl = jsonl("cp.jsonl", res_dir)
        self.syncl = jsonl("sync.jsonl", res_dir)
        self.decl = jsonl("decode.jsonl", res_dir)
        self.mem = jsonl("memory.jsonl", res_dir)
        floor_all = jsonl("memfloor.jsonl", res_dir)
        self.floor = [r for r in floor_all if not r.get("hugepages")] or floor_all
        self.floor_huge = [r for r in floor_all if r.get("hugepages") and r not in self.floor]
        cg_all = jsonl("callgrind.jsonl", res_dir)
        self.cg = [r for r in cg_all if r.get("bench") != "cp" and r.get("family", 4) == 4]
        # IPv6 (vipd_bench pipeline --family 6): this run's rows, else the
        # latest per case of bench/results/added/callgrind_ipv6.jsonl (each
        # with the IPv4 row measured on the same tree beside it).
        # (Also where this run has IPv6 rows, when they were measured after it.)
        self.cg6 = [r for r in cg_all if r.get("bench") != "cp" and r.get("family") == 6]
        self.cg6_added = False
        latest = {}
        for r in jsonl("callgrind_ipv6.jsonl", os.path.join(KEPT, "added")):
            if not self.cg6 or (r.get("measured") or "")[:16] >= (m.get("date") or "")[:16]:
                latest[(r["services"], r["flows"])] = r
        if latest:
            self.cg6 = sorted(latest.values(), key=lambda r: (r["flows"], r["services"]))
            self.cg6_added = True
        self.cg_cp = sorted([r for r in cg_all if r.get("bench") == "cp"], key=lambda r: r["services"])
        # Section 5 refreshed on its own (scripts/bench/callgrind_rows.sh): the
        # latest row per case of bench/results/added/callgrind.jsonl takes the
        # place of this run's when it was measured after this run. The run's
        # own rows stay for the sections that show this run (section 1).
        self.cg_run_by = {(r["services"], r["flows"]): r for r in self.cg}
        run_date = (m.get("date") or "")[:16]
        latest = {}
        for r in jsonl("callgrind.jsonl", os.path.join(KEPT, "added")):
            if (r.get("measured") or "")[:16] >= run_date and r.get("family", 4) == 4:
                latest[(r.get("bench"), r["services"], r.get("flows"))] = r
        self.cg_added = [r for k, r in latest.items() if k[0] != "cp"]
        if self.cg_added:
            by = dict(self.cg_run_by)
            by.update({(r["services"], r["flows"]): r for r in self.cg_added})
            self.cg = list(by.values())
        cp_added = [r for k, r in latest.items() if k[0] == "cp"]
        if cp_added:
            by = {r["services"]: r for r in self.cg_cp}
            by.update({r["services"]: r for r in cp_added})
            self.cg_cp = sorted(by.values(), key=lambda r: r["services"])
        self.cg_by = {(r["services"], r["flows"]): r for r in self.cg}
        self.matrix = sorted([r for r in self.pipe if self.tcp_fnat(r)], key=lambda r: (r["flows"], r["services"]))
        self.by = {(r["services"], r["flows"]): r for r in self.matrix}
        self.big = self.by.get((100000, 1000000)) or (self.matrix[-1] if self.matrix else None)
        self.one = self.by.get((1, 1000))
        self.hund = self.by.get((100000, 1000))
        self.changes = jsonl("changes.jsonl", KEPT)
        self.not_kept = jsonl("not_kept.jsonl", KEPT)
        self.observations = jsonl("observations.jsonl", os.path.join(KEPT, "added"))
        # The l3fwd baseline: from this run's pipeline rows where they have it
        # (scripts/bench.sh runs the phase), else the rows scripts/bench/l3fwd_rows.sh
        # appended to bench/results/added/l3fwd.jsonl (the latest per case).
        self.l3fwd_added = {}
        for r in jsonl("l3fwd.jsonl", os.path.join(KEPT, "added")):
            self.l3fwd_added[(r["services"], r["flows"])] = r
        self.l3fwd_in_run = any(r.get("l3fwd_ns") for r in self.matrix)
        self.ipt, self.ipt_added = report_kernel.merged(res_dir, os.path.join(KEPT, "added"), "ipt.jsonl",
                                                        lambda r: r.get("variant", "").startswith("nftables"))
        self.ker, self.ker_added = report_kernel.merged(res_dir, os.path.join(KEPT, "added"), "kernel.jsonl",
                                                        lambda r: r.get("mode") == "nftables")

    def tcp_fnat(self, r):
        return (r.get("proto") == "tcp" and r.get("fwd") == "fnat"
                and bool(r.get("hugepages")) == bool(self.machine.get("hugepages")))

    def cp_row(self, services, worker, rows=None):
        return next((r for r in (self.cpl if rows is None else rows)
                     if r["services"] == services and r.get("worker", "running") == worker), None)


def ratio(r, base="baseline_ns"):
    b, p = r.get(base), r.get("est_ns")
    return b / p if b and p else None  # = pipeline Mpps / baseline Mpps


def l3fwd_row(d, key):
    """(row with l3fwd_ns and the est_ns of the same process, True when it is
    one of bench/results/added/l3fwd.jsonl) for case key, or (None, False)."""
    r = d.by.get(key)
    if r and r.get("l3fwd_ns"):
        return r, False
    a = d.l3fwd_added.get(key)
    return (a, True) if a and a.get("l3fwd_ns") else (None, False)


def pct(rt):
    return f"{rt * 100:.2f} % (1/{1 / rt:.0f})" if rt else "—"


# ---------------------------------------------------------------- plots

def plot_specs(d):
    """(name, title, gnuplot script with DATA for the data file, data) of each
    plot the results support."""
    specs = []
    services_axis = sorted({r["services"] for r in d.matrix})
    flows_axis = sorted({r["flows"] for r in d.matrix})
    if d.matrix:
        data, cols = "", []
        for f in flows_axis:
            pts = [(s, d.by[(s, f)]["est_ns"]) for s in services_axis if (s, f) in d.by and d.by[(s, f)].get("est_ns")]
            if len(pts) < 2:
                continue
            cols.append(f)
            data += f"# flows {f}\n" + "".join(f"{s} {v}\n" for s, v in pts) + "\n\n"
        if cols:
            specs.append(("pipeline_services", "Established-flow cost against the number of services",
                          'set title "Established flows: ns per packet (median chunk) vs services"\n'
                          'set logscale x\nset xlabel "services"\nset ylabel "ns / packet"\nset key top left\n'
                          'set grid\nset yrange [0:*]\n'
                          "plot " + ", ".join(f'"DATA" index {i} with linespoints lw 2 title "{n_human(f)} flows"'
                                              for i, f in enumerate(cols)) + "\n", data))
        s_best = max(services_axis, key=lambda s: sum(1 for f in flows_axis if (s, f) in d.by))
        pts = [(f, d.by[(s_best, f)]) for f in flows_axis if (s_best, f) in d.by]
        if len(pts) >= 2:
            specs.append(("pipeline_flows", "Cost per packet against the size of the connection table",
                          f'set title "ns per packet vs established flows ({n_human(s_best)} services)"\n'
                          'set logscale x\nset xlabel "established flows in the table"\nset ylabel "ns / packet"\n'
                          'set key top left\nset grid\nset yrange [0:*]\n'
                          'plot "DATA" using 1:2 with linespoints lw 2 title "established", '
                          '"DATA" using 1:3 with linespoints lw 2 title "new connection (SYN)"\n',
                          "".join(f"{f} {r.get('est_ns', 0)} {r.get('newconn_ns', 0)}\n" for f, r in pts)))
    cp_init = sorted([r for r in d.cpl if r.get("worker") == "offline"], key=lambda r: r["services"])
    if len(cp_init) >= 2:
        specs.append(("cp_services", "Control-plane programming time against the number of services",
                      'set title "Control plane: programming time vs services (10 endpoints each)"\n'
                      'set logscale xy\nset xlabel "services"\nset ylabel "ms"\nset key top left\nset grid\n'
                      'plot "DATA" using 1:2 with linespoints lw 2 title "initial list (diff + publish)", '
                      '"DATA" using 1:3 with linespoints lw 2 title "one endpoint change, p50", '
                      '"DATA" using 1:4 with linespoints lw 2 title "one endpoint change, p99"\n',
                      "".join(f"{r['services']} {r['initial_total_ms']} {r['change_total_p50_us'] / 1000} "
                              f"{r['change_total_p99_us'] / 1000}\n" for r in cp_init)))
    return specs


def draw(specs, img_dir):
    """Renders the plots with gnuplot; returns the names drawn."""
    gp = shutil.which("gnuplot")
    if not gp:
        return set()
    os.makedirs(img_dir, exist_ok=True)
    drawn = set()
    for name, _, script, data in specs:
        dpath = os.path.join(img_dir, name + ".dat")
        with open(dpath, "w") as f:
            f.write(data)
        s = (f'set terminal svg size 720,420 dynamic font "sans,12" background "white"\nset rmargin 6\n'
             f'set output "{os.path.join(img_dir, name + ".svg")}"\n' + script.replace("DATA", dpath))
        r = subprocess.run([gp], input=s, text=True, capture_output=True)
        os.remove(dpath)
        if r.returncode != 0:
            print("gnuplot:", r.stderr, file=sys.stderr)
        else:
            drawn.add(name)
    return drawn


# ---------------------------------------------------------------- sections

def platform(d):
    m = d.machine
    out = [f"- Machine: {m['cpu']}, {m['cpus']} vCPUs ({m['threads_per_core']} thread/core)"
           f"{', ' + m['hypervisor'] + ' guest' if m.get('hypervisor') else ' (virtual machine)'}, "
           + (f"L2 {m['l2']}, L3 {m['l3']}, " if m.get('l2', '?') != '?' else "caches not reported by the VM, ")
           + f"{m['mem_gib']} GiB; shared with other builds (load average {m.get('load_start', '?')} at the "
           f"start, {m.get('load_end', '?')} at the end)",
           f"- Kernel: {m['kernel']}",
           f"- DPDK: {m['dpdk']} (Debian packages)",
           f"- Compiler: {m['compiler']}",
           f"- Flags: meson buildtype `{m.get('buildtype') or 'release'}` (-O3, no -march), `-Dbench=true`",
           f"- Memory: {'2 MiB hugepages' if m.get('hugepages') else '--no-huge (4 KiB pages), prefaulted'}"
           + (" (and the largest case once more on 2 MiB hugepages)" if any(
               bool(r.get("hugepages")) != bool(m.get("hugepages")) for r in d.pipe) else ""),
           f"- Scheduling: {'SCHED_FIFO (`--rt`)' if m.get('rt') else 'normal'}"]
    return "\n".join(out)


def provenance(d):
    m = d.machine
    dp = [f for f in (m.get("dirty_fastpath") or "").split() if f.startswith(("dataplane/", "controlplane/"))]
    out = [f"- Run: `{m['command']}` ({m['mode']} mode, {m.get('wall_s', '?')} s), results in "
           f"`{rel(d.res_dir)}/`" + (f"; the tree had uncommitted changes in {', '.join('`' + f + '`' for f in dp)}"
                                     if dp else "") + "."]
    src = cg_source(d)
    if src:
        out.append(f"- Section 5 (instructions per packet, callgrind) and the instruction counts that *Reading* and "
                   f"*Scaling across cores* quote: {src}. Section 1's instruction column is the full run's.")
    if d.cg6_added:
        c6 = sorted({r.get("commit", "?") for r in d.cg6})
        out.append(f"- Section 5's IPv6 rows: commit{'s' if len(c6) > 1 else ''} "
                   f"{', '.join('`' + c + '`' for c in c6)} (`bench/results/added/callgrind_ipv6.jsonl`).")
    if d.ipt_added or d.ker_added:
        out.append("- nftables rows of section 3 (not part of that run): `bench/results/added/ipt.jsonl` and "
                   "`kernel.jsonl`, each line with the command that produced it and its load.")
    if m.get("note"):
        out.append("- Where each section's results come from, and how far this VM moved between runs: the "
                   f"`note` of `{rel(d.res_dir)}/machine.json`.")
    return "\n".join(out)


def headline(d):
    rows = []
    for (s, f), r in sorted(d.by.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rt = ratio(r)
        lr, added = l3fwd_row(d, (s, f))
        row = [f"{n_human(s)} / {n_human(f)}", fmt(r.get("est_ns")), fmt(r.get("est_mpps"), 2),
               fmt(r.get("baseline_ns"), 2), pct(rt),
               (pct(ratio(lr, "l3fwd_ns")) + ("¹" if added else "")) if lr else "—",
               fmt(r.get("newconn_mpps"), 2)]
        if d.prev_by:
            pr = d.prev_by.get((s, f), {})
            row.append(f"{fmt(pr.get('est_ns'))} / {fmt(pr.get('newconn_mpps'), 2)}" if pr else "—")
        rows.append(row)
    hdr = ["services / flows", "pipeline ns/pkt", "pipeline Mpps", "I/O-only ns/pkt", "ratio to I/O-only",
           "ratio to l3fwd", "new conn/s (M)"]
    if d.prev_by:
        hdr.append("previous run: ns/pkt / new conn/s (M)")
    out = [table(hdr, rows)]
    if not d.l3fwd_in_run and any(l3fwd_row(d, k)[1] for k in d.by):
        out += ["", "¹ Not part of this run: pipeline and l3fwd baseline measured in one process of their own "
                "(`bench/results/added/l3fwd.jsonl`, section 1, *Baselines*, with the times); the ratio is that "
                "process's, not this row's pipeline time over it."]
    pm = d.prev_machine
    if pm:
        common = [k for k in d.by if k in d.prev_by and d.by[k].get("est_ns") and d.prev_by[k].get("est_ns")
                  and d.by[k].get("baseline_ns") and d.prev_by[k].get("baseline_ns")]
        note = ""
        if common:
            dt = max(abs(d.by[k]["est_ns"] / d.prev_by[k]["est_ns"] - 1) for k in common) * 100
            dr = max(abs((d.by[k]["est_ns"] / d.by[k]["baseline_ns"]) /
                         (d.prev_by[k]["est_ns"] / d.prev_by[k]["baseline_ns"]) - 1) for k in common) * 100
            note = (f" Between the two runs the established ns/packet moved by up to {dt:.0f} % and its ratio to "
                    f"the baseline by up to {dr:.0f} %; compare trees by the instruction counts (section 5) and "
                    "the interleaved A/Bs (*Measured changes*), not by this column.")
        out += ["", f"*Previous run*: `{rel(d.prev_dir)}/`, commit `{pm.get('commit_short', '?')}`, measured "
                f"{pm.get('date', '?')}.{note}"]
    return "\n".join(out)


def targets(d):
    big, one, hund = d.big, d.one, d.hund
    if not big:
        return "Not measured in this run."
    tgt = []
    e = big.get("est_mpps") or 0
    fl = next((x for x in d.floor if (x["services"], x["flows"]) == (big["services"], big["flows"])), None)
    tgt.append(["established >= 10 Mpps/core at 1M flows, 100k services",
                f"{e:.2f} Mpps ({big.get('est_ns', 0):.0f} ns) at {n_human(big['services'])} / {n_human(big['flows'])}",
                "met" if e >= 10 else (f"not met ({10 / e:.1f}x short)" if e else "—")
                + (f"; reading its lines alone takes {fl['est_ns']:.0f} ns on this machine (memory floor, section 1)"
                   if fl and e < 10 else "")])
    nc = max((r.get("newconn_mpps") or 0) for r in d.matrix)
    nc_big = big.get("newconn_mpps") or 0
    tgt.append([">= 1M new connections/s per core", f"{nc_big:.2f} M/s at {n_human(big['services'])} / "
                f"{n_human(big['flows'])} (best case {nc:.2f} M/s)", "met" if nc_big >= 1 else "not met"])
    if one and hund and one.get("est_ns") and hund.get("est_ns"):
        pct = (hund["est_ns"] / one["est_ns"] - 1) * 100
        tgt.append(["100k services within 10 % of 1 service (1k flows)",
                    f"{pct:+.0f} % ({one['est_ns']:.0f} -> {hund['est_ns']:.0f} ns)", "met" if pct <= 10 else "not met"])
    syr, syrr = d.cp_row(10000, "offline", d.syncl), d.cp_row(10000, "running", d.syncl)
    cpr, cprr = d.cp_row(10000, "offline"), d.cp_row(10000, "running")
    if syr:
        tgt.append(["one endpoint change p99 < 1 ms (10k services / 100k endpoints)",
                    f"{syr['change_p99_us'] / 1000:.3f} ms p99 ({syr['change_p50_us'] / 1000:.3f} ms p50): object "
                    "change -> published, control-plane CPU path (`vipd_bench sync --worker offline`)"
                    + (f"; {syrr['change_p99_us'] / 1000:.1f} ms p99 / {syrr['change_p50_us'] / 1000:.3f} ms p50 "
                       "waiting for a polling worker on this shared VM" if syrr else ""),
                    "met" if syr["change_p99_us"] < 1000 else "not met"])
    elif cpr:
        tgt.append(["one endpoint change p99 < 1 ms (10k services / 100k endpoints)",
                    f"{cpr['change_total_p99_us'] / 1000:.2f} ms CPU path (QSBR offline)"
                    + (f"; {cprr['change_total_p99_us'] / 1000:.1f} ms with a polling worker" if cprr else ""),
                    "met" if cpr["change_total_p99_us"] < 1000 else "not met"])
    nft_ok = {r["services"]: r for r in d.ipt
              if r.get("variant") == "nftables" and r.get("partial_p50_ms") and not r.get("failed")}
    nft = nft_ok.get(10000) or (nft_ok[max(nft_ok)] if nft_ok else None)
    if nft:
        lo = nft_ok.get(1000)
        big = nft_ok.get(100000)
        cpu = (f"; CPU (user + system) {fmt(lo['partial_cpu_p50_ms'], 2)} / {fmt(nft['partial_cpu_p50_ms'], 2)}"
               + (f" / {fmt(big['partial_cpu_p50_ms'])}" if big and big.get("partial_cpu_p50_ms") else "")
               + " ms at 1k / 10k" + (" / 100k" if big and big.get("partial_cpu_p50_ms") else "")
               if lo and lo.get("partial_cpu_p50_ms") and nft.get("partial_cpu_p50_ms") else "")
        grow = (f"; {fmt(lo['partial_p50_ms'], 2)} ms at 1k ({nft['partial_p50_ms'] / lo['partial_p50_ms']:.1f}x for "
                "10x the services" + (f", {fmt(big['partial_p50_ms'])} ms at 100k" if big else "") + ")" + cpu
                if lo and nft["services"] == 10000 else "")
        flat = bool(lo) and nft["services"] == 10000 and nft["partial_p50_ms"] <= 2 * lo["partial_p50_ms"]
        fast = nft["services"] >= 10000 and nft["partial_p50_ms"] <= 50
        tgt.append([f"nftables mode: one endpoint change <= 50 ms at 10k services, flat in N",
                    f"{fmt(nft['partial_p50_ms'])} ms p50 at {n_human(nft['services'])} services "
                    f"({fmt(nft['partial_restore_p50_ms'])} ms of it the "
                    + ("libnftnl netlink batch" if nft.get("netlink_batch_syncs") else "libnftables transaction")
                    + "; section 3a)" + grow,
                    "met" if fast and flat else (("<= 50 ms met, not flat" + (" (the growth is the kernel's commit walk over "
                                                                  "every chain, docs/modes.md)"
                                                                  if nft.get("netlink_batch_syncs") else ""))
                                                 if fast else "not met")])
    return table(["target", "measured", "verdict"], tgt, left=3)


def variant(d, r):
    v = f"{r['proto']} / {r['fwd']}"
    if bool(r.get("hugepages")) != bool(d.machine.get("hugepages")):
        v += ", 2 MiB hugepages" if r.get("hugepages") else ", 4 KiB pages"
    return v


def pipeline(d, plots):
    multi = d.n_runs > 1
    rows = [[n_human(r["services"]), n_human(r["flows"]), fmt(r.get("est_ns")), fmt(r.get("est_ns_p10")),
             fmt(r.get("est_ns_p90")), fmt(r.get("est_ns_mean")), fmt(r.get("reply_ns")), fmt(r.get("newconn_ns")),
             fmt(r.get("fill_ns")), fmt(r.get("baseline_ns"), 2)]
            + ([" / ".join(fmt(x) for x in r["est_ns_runs"])] if multi else []) + [r["drops_all"]]
            for r in d.matrix]
    out = []
    if multi:
        out += [f"Each case ran {d.n_runs} times, in rounds over the whole matrix; a row is the run with the median "
                "*est ns*, and *est ns, every run* lists all of them.", ""]
    out.append(table(["services", "flows", "est ns", "p10", "p90", "mean", "reply ns", "newconn ns", "fill ns",
                      "baseline ns"] + (["est ns, every run"] if multi else []) + ["drops"], rows))
    other = [r for r in d.pipe if not d.tcp_fnat(r)]
    if other:
        out += ["", "Variants (same run):", "",
                table(["variant", "services", "flows", "est ns", "newconn ns", "baseline ns"],
                      [[variant(d, r), n_human(r["services"]), n_human(r["flows"]), fmt(r.get("est_ns")),
                        fmt(r.get("newconn_ns")), fmt(r.get("baseline_ns"), 2)] for r in other])]
    for name, title in plots:
        if name.startswith("pipeline"):
            out += ["", f"![{title}](img/{name}.svg)"]
    return "\n".join(out)


def baselines(d):
    """Section 1's two baselines beside the pipeline, each row from one process."""
    rows, srcs = [], []
    keys = sorted(set(d.by) | set(d.l3fwd_added), key=lambda k: (k[1], k[0]))
    for k in keys:
        r, added = l3fwd_row(d, k)
        if not r:
            continue
        c = r if added else d.cg_run_by.get(k, {})
        ir = lambda p: c.get(f"{p}_ir_per_pkt")  # noqa: E731
        rows.append([n_human(k[0]), n_human(k[1]), fmt(r.get("est_ns")), fmt(r.get("baseline_ns"), 2),
                     fmt(r.get("l3fwd_ns"), 2), pct(ratio(r)), pct(ratio(r, "l3fwd_ns")),
                     f"{r['est_ns'] / r['l3fwd_ns']:.1f}x" if r.get("est_ns") and r.get("l3fwd_ns") else "—",
                     " / ".join(fmt(ir(p)) for p in ("est", "baseline", "l3fwd")) if ir("l3fwd") else "—",
                     fmt(r.get("l3fwd_drops", 0))])
        if added:
            srcs.append(r)
    if not rows:
        return "Not measured in this run."
    out = [table(["services", "flows", "pipeline ns", "I/O-only ns", "l3fwd ns", "ratio to I/O-only",
                  "ratio to l3fwd", "pipeline / l3fwd", "instructions: pipeline / I/O-only / l3fwd", "l3fwd drops"],
                 rows, left=2)]
    if srcs:
        sf = lambda c: re.sub(r"--services \d+ --flows \d+", "--services S --flows F", c)  # noqa: E731
        cmds = sorted({sf(x["command"]) for x in srcs})
        cg = sorted({sf(x["cg_command"]) for x in srcs if x.get("cg_command")})
        out += ["", "Source: `bench/results/added/l3fwd.jsonl` (not this run's pipeline rows), written by `"
                + srcs[0].get("script", "scripts/bench/l3fwd_rows.sh") + "`: " + "; ".join(
                    f"{n_human(x['services'])} / {n_human(x['flows'])} at commit `{x.get('commit', '?')}`, "
                    f"{x.get('measured', '?')}, load {x.get('load', '?')}" for x in srcs) + ". Commands: "
                + ", ".join(f"`{c}`" for c in cmds + cg) + " (instructions: the callgrind run, where there is one)."]
    return "\n".join(out)


def memfloor(d):
    out = []
    mib = lambda b: f"{b / 1048576:.1f} MiB"  # noqa: E731
    for fl in d.floor:
        pr = d.by.get((fl["services"], fl["flows"]), {})
        out += [f"### The memory floor at {n_human(fl['services'])} services / {n_human(fl['flows'])} flows", "",
                "`vipd_bench memfloor` (bench/memfloor_bench.cc) reads only the random cache lines an established "
                "packet must read, in the pipeline's pattern (bursts of 32, one level at a time, every line of a "
                "level prefetched for the whole burst first), over regions of the real structures' sizes on the "
                "same kind of pages: the part of the cost no instruction saving removes on this machine. The "
                "last rows read one line per packet from packed regions of growing size, and 1 MiB of lines "
                "spread one per 4 KiB page (what finding a line's page costs).", ""]
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
                         "(written), `DestCounters` (written)", f"{fl.get('reply_lines', 3)} / 3",
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
        for mb in (1, 4, 16, 64):
            if f"size{mb}_ns" in fl:
                rows.append([f"one line of a packed {mb} MiB region", "1 / 1", f"{mb}.0 MiB", fmt(fl[f"size{mb}_ns"]),
                             fmt(fl.get(f"size{mb}_ns_p10")), fmt(fl.get(f"size{mb}_ns_p90"))])
        if fl.get("xlat_ns"):
            rows.append(["one line of 1 MiB of lines spread one per 4 KiB page (the lines of the 1 MiB row)",
                         "1 / 1", "64.0 MiB", fmt(fl["xlat_ns"]), fmt(fl.get("xlat_ns_p10")),
                         fmt(fl.get("xlat_ns_p90"))])
        out.append(table(["reads per packet", "lines / levels", "regions", "ns/packet", "p10", "p90"], rows))
        hv = [fh for fh in d.floor_huge if (fh["services"], fh["flows"]) == (fl["services"], fl["flows"])]
        if hv:
            fh = hv[0]
            keys = [("est_ns", "established packet"), ("chain1_ns", "one line"), ("chain5_ns", "a chain of 5"),
                    ("size16_ns", "one line of a packed 16 MiB region"), ("size1_ns", "one line of a packed 1 MiB region"),
                    ("xlat_ns", "one line of 1 MiB of lines spread one per 4 KiB page")]
            out += ["", "The same on 2 MiB hugepages (`--huge-variant`, same run, one run each):", "",
                    table(["reads per packet", "4 KiB pages ns", "2 MiB pages ns", "2 MiB / 4 KiB"],
                          [[w, fmt(fl[k]), fmt(fh[k]), f"{fh[k] / fl[k]:.2f}"] for k, w in keys
                           if fl.get(k) and fh.get(k)])]
        if pr.get("est_ns") and fl.get("est_ns"):
            c1, wl = fl.get("chain1_ns"), fl.get("wide_lines", 3)
            wchain = fl.get(f"chain{wl}_ns")
            out += ["", f"The pipeline's established packet took {pr['est_ns']:.0f} ns in the same run; its lines "
                    f"alone take {fl['est_ns']:.0f} ns ({fl['est_ns'] / pr['est_ns'] * 100:.0f} %)"
                    + (f", about {c1:.0f} ns per random line" if c1 else "")
                    + (f"; {wl} independent lines take {fl['wide_ns']:.0f} ns against {wchain:.0f} ns chained, so "
                       "the number of lines a packet reads, more than their order, sets the floor"
                       if fl.get("wide_ns") and wchain else "") + "."]
    return "\n".join(out)


def control_plane(d, plots):
    if not d.cpl:
        return "Not measured in this run."
    rows = [[f"{n_human(r['services'])} x {r['endpoints_per_service']}", r["worker"], r["changes"],
             fmt(r["initial_total_ms"]), fmt(r["change_total_p50_us"]), fmt(r["change_total_p99_us"]),
             fmt(r["change_compute_p50_us"]), fmt(r["change_apply_p50_us"]), fmt(r["change_apply_p99_us"]),
             fmt(r["change_same_content_p50_us"]), fmt(r["table_copy_ms"]), fmt(r["full_resync_unchanged_ms"])]
            for r in sorted(d.cpl, key=lambda r: (r["services"], r["worker"]))]
    out = [table(["services x endpoints", "worker", "changes", "initial list ms", "change p50 µs", "change p99 µs",
                  "diff p50 µs", "publish p50 µs", "publish p99 µs", "same_content p50 µs", "table copy ms",
                  "full resync ms"], rows)]
    out += ["\n" + f"![{title}](img/{name}.svg)" for name, title in plots if name.startswith("cp")]
    return "\n".join(out)


def sync(d):
    if not d.syncl:
        return "Not measured in this run."
    rows = [[f"{n_human(r['services'])} x {r['endpoints_per_service']}", r.get("worker", "running"), r["changes"],
             fmt(r["initial_sync_ms"]), fmt(r["change_p50_us"]), fmt(r["change_p90_us"]), fmt(r["change_p99_us"]),
             fmt(r["change_max_us"]), f"{fmt(r['baseline_change_p50_us'] / 1000)} ms ({r['baseline_changes']} changes)",
             f"{r['speedup_p50']:.0f}x", fmt(r["table_snapshot_ms"])]
            for r in sorted(d.syncl, key=lambda r: (r["services"], r.get("worker", "")))]
    return table(["services x endpoints", "worker", "changes", "initial sync ms", "change p50 µs", "p90 µs", "p99 µs",
                  "max µs", "baseline p50", "p50 speed-up", "reader snapshot ms"], rows)


def decode(d):
    if not d.decl:
        return "Not measured in this run."
    return table(["MB", "slices", "endpoints/slice", "parse s", "parse MB/s", "decode s", "decode MB/s", "decode / parse"],
                 [[f"{r['bytes'] / 1e6:.1f}", n_human(r["slices"]), r["endpoints_per_slice"], fmt(r["parse_only_s"], 3),
                   fmt(r["parse_only_mb_s"]), fmt(r["decode_s"], 2), fmt(r["decode_mb_s"]), f"{r['decode_vs_parse']:.0f}x"]
                  for r in d.decl])


def memory(d):
    out = []
    src = d.matrix[-1] if d.matrix else None
    if src and "conn_bytes_per_entry" in src:
        out.append(f"- Connection table: **{src['conn_bytes_per_entry']:.0f} bytes per connection** of capacity "
                   f"(DPDK heap taken by `ConnTable::init` for {src['conn_capacity']:,} entries: the rte_hash's 64-byte "
                   f"key slot, which holds the {src['conn_struct_bytes']}-byte `Conn` as the key itself, the hash's "
                   "buckets and extendable buckets, and full NAT's port index for the replies, 4 bytes per local "
                   "address and port; NAT mode takes a second key slot per connection for the reply key). "
                   "That is the table of the measured version; vipd's own cuckoo table has replaced it since "
                   "(*Measured changes*).")
        svc = d.cp_row(10000, "offline")
        out.append(f"- Service: `Service` object {src['service_struct_bytes']} bytes + {src['destref_struct_bytes']} "
                   f"bytes per endpoint, plus rte_malloc's header and padding: {src['service_bytes_each']:.0f} bytes of "
                   f"DPDK heap per service with {src['backends']} endpoints"
                   + (f"; {svc['dp_bytes_per_service']:.0f} bytes with {svc['endpoints_per_service']} endpoints" if svc else "")
                   + ". Per worker, scheduler state (per service id) and destination counters (per destination slot) "
                   f"are preallocated: {src['worker_state_bytes'] / 2**20:.0f} MiB for {n_human(src['services'])} "
                   f"services x {src['backends']} endpoints, including the 16 full-NAT port pools.")
        if svc:
            out.append(f"- Control side (libc heap), {n_human(svc['services'])} services x "
                       f"{svc['endpoints_per_service']} endpoints: ServiceTable {svc['cp_table_bytes'] / svc['services']:.0f} "
                       f"bytes/service, Publisher records {svc['cp_publisher_bytes'] / svc['services']:.0f} bytes/service "
                       "(a copy of each spec plus a std::map of destination slots).")
    if d.mem:
        r = d.mem[0]
        out.append(f"- RSS with **{n_human(r['flows'])} established flows** and {n_human(r['services'])} services "
                   f"(no prefault: only touched pages count): **{r['rss_kb_with_flows'] / 1024:.0f} MiB** (after EAL "
                   f"init: {r['rss_kb_after_eal'] / 1024:.0f} MiB; DPDK heap in use "
                   f"{r['dpdk_heap_total_bytes'] / 2**20:.0f} MiB, of which the connection table "
                   f"{r['conn_table_bytes'] / 2**20:.0f} MiB for {r['conn_capacity']:,} entries).")
    return "\n".join(out) or "Not measured in this run."


def callgrind6(d):
    """IPv6 (vipd_bench pipeline --family 6) beside IPv4, full NAT, TCP."""
    if not d.cg6:
        return "IPv6 (`vipd_bench pipeline --family 6`): not measured in this run."
    rows = []
    for r in d.cg6:
        v4 = r.get("ipv4") if d.cg6_added else d.cg_by.get((r["services"], r["flows"]))
        v4 = v4 or {}
        row = [f"{n_human(r['services'])} / {n_human(r['flows'])}"]
        for ph in ("est", "reply", "newconn", "fill"):
            a, b = r.get(ph + "_ir_per_pkt"), v4.get(ph + "_ir_per_pkt")
            row.append(f"{fmt(a)} / {fmt(b)}" + (f" ({a / b:.2f}x)" if a and b else ""))
        row.append(fmt(r.get("baseline_ir_per_pkt")))
        rows.append(row)
    out = ["**IPv6 beside IPv4** (`vipd_bench pipeline --family 6`: the same phases, services, flows and "
           "full NAT, TCP; IPv6 VIP, endpoints, clients and full-NAT local addresses in one on-link /64, "
           "74-byte frames), instructions per packet, IPv6 / IPv4:", "",
           table(["services / flows", "established", "reply", "new connection", "fill", "I/O baseline (IPv6)"], rows),
           "", "IPv6 costs more per packet because `worker6.cc` forwards it one packet at a time: there is no "
           "burst stage for IPv6 yet (IPv4's connection-first bulk lookup with prefetch, `burst.cc`), so an "
           "established packet is looked up in the IPv6 VIP table before its connection, a reply first misses "
           "the VIP table and then matches the local addresses, and every packet reads the IPv6 neighbour "
           "cache (IPv4 keeps the last next hop's MAC within a burst), with 16-byte addresses and 40-byte "
           "keys throughout; a new connection is closer because scheduling, the full-NAT port and the "
           "connection insert dominate both."]
    if d.cg6_added:
        sf = lambda c: re.sub(r"--services \d+ --flows \d+", "--services S --flows F", c)  # noqa: E731
        cmds = sorted({sf(x["command"]) for x in d.cg6})
        out += ["", "Source: `bench/results/added/callgrind_ipv6.jsonl` (not this run), each IPv6 row with the "
                "IPv4 row measured on the same tree: " + "; ".join(
                    f"{n_human(x['services'])} / {n_human(x['flows'])} at commit `{x.get('commit', '?')}`, "
                    f"{x.get('measured', '?')}" for x in d.cg6) + ". Command: "
                + ", ".join(f"`{c}`" for c in cmds) + " (IPv4: the same without `--family 6`), summarised by "
                "`scripts/bench/callgrind_summary.py`."]
    for r in d.cg6[:1]:
        prof = r.get("est_profile")
        if not prof and not d.cg6_added:
            p = os.path.join(d.res_dir, f"callgrind_est_{r['services']}_{r['flows']}_v6.txt")
            if os.path.exists(p):
                with open(p) as f:
                    prof = f.read().splitlines()
        if prof:
            out += ["", f"Where the instructions go, IPv6 *est* ({n_human(r['services'])} services / "
                    f"{n_human(r['flows'])} flows), self instructions per packet:", "", "```", *prof[:12], "```"]
    return "\n".join(out)


def cg_source(d):
    """Where section 5's IPv4 rows come from, in words (None: this run alone)."""
    if not d.cg_added:
        return None
    m = d.machine
    commits = sorted({r.get("commit", "?") for r in d.cg_added})
    dates = sorted(r.get("measured", "?") for r in d.cg_added)
    dirty = sorted({f for r in d.cg_added for f in r.get("dirty", [])})
    scripts = sorted({r.get("script", "").split(" ")[0] for r in d.cg_added if r.get("script")})
    return (f"commit{'s' if len(commits) > 1 else ''} {', '.join('`' + c + '`' for c in commits)} "
            f"({dates[0]}{' to ' + dates[-1] if dates[-1] != dates[0] else ''}; "
            + (", ".join(f"`{x}`" for x in scripts) or "`scripts/bench/callgrind_rows.sh`")
            + ", rows in `bench/results/added/callgrind.jsonl`"
            + (f"; uncommitted changes in {', '.join('`' + f + '`' for f in dirty)}" if dirty else "")
            + f"), not the full run of the other sections (commit `{m.get('commit_short', '?')}`, "
            f"{m.get('date', '?')})")


def callgrind(d):
    if not d.cg:
        return "Not measured in this run (valgrind missing or the run failed)."
    out = []
    src = cg_source(d)
    if src:
        n_run = sum(1 for r in d.cg if r not in d.cg_added)
        out += [f"**Counted at {src}**" + (f"; rows marked ² are that run's" if n_run else "")
                + ". The last column is the full run's count of the same case, for comparison.", ""]
    sw = [r for r in d.matrix if r.get("est_sweep_per_pkt") is not None and r["services"] in (1, 100000)]
    if sw:
        out += ["Sweep visits per established packet in the timed runs (section 1): " + "; ".join(
            f"{r['est_sweep_per_pkt']:.2f} at {n_human(r['services'])} / {n_human(r['flows'])} "
            f"({n_human(r['conn_capacity'])} entries)" for r in sw) + ".", ""]
    hdr = ["services / flows", "established", "reply", "new connection", "fill", "I/O baseline", "l3fwd baseline"]
    prev = None
    if src:
        prev = d.cg_run_by
        hdr.append(f"full run (`{d.machine.get('commit_short', '?')}`): established / new")
    elif d.prev_cg:
        prev = d.prev_cg
        hdr.append("previous run: established / new")
    rows = []
    for r in d.cg:
        mark = "²" if src and r not in d.cg_added else ""
        row = [f"{n_human(r['services'])} / {n_human(r['flows'])}{mark}", fmt(r.get("est_ir_per_pkt")),
               fmt(r.get("reply_ir_per_pkt")), fmt(r.get("newconn_ir_per_pkt")), fmt(r.get("fill_ir_per_pkt")),
               fmt(r.get("baseline_ir_per_pkt"))]
        if r.get("l3fwd_ir_per_pkt"):
            row.append(fmt(r["l3fwd_ir_per_pkt"]))
        else:
            a = d.l3fwd_added.get((r["services"], r["flows"]), {})
            row.append(fmt(a["l3fwd_ir_per_pkt"]) + "¹" if a.get("l3fwd_ir_per_pkt") else "—")
        if prev is not None:
            pr = prev.get((r["services"], r["flows"]), {})
            row.append(f"{fmt(pr.get('est_ir_per_pkt'))} / {fmt(pr.get('newconn_ir_per_pkt'))}" if pr else "—")
        rows.append(row)
    out.append(table(hdr, rows))
    if any(c.endswith("¹") for row in rows for c in row[6:7]):
        out += ["", "¹ From `bench/results/added/l3fwd.jsonl` (section 1, *Baselines*), not this run."]
    last = d.cg[-1]
    for phase in ("est", "newconn"):
        lines = (last.get(phase + "_profile") or [])[:15]
        p = os.path.join(d.res_dir, f"callgrind_{phase}_{last['services']}_{last['flows']}.txt")
        if not lines and last not in d.cg_added and os.path.exists(p):
            with open(p) as f:
                lines = f.read().splitlines()[:15]
        if lines:
            out += ["", f"Where the instructions go, *{phase}* ({n_human(last['services'])} services / "
                    f"{n_human(last['flows'])} flows), self instructions per packet:", "", "```", *lines, "```"]
    out += ["", callgrind6(d)]
    if d.cg_cp:
        cpc = sorted({r.get("commit") for r in d.cg_cp if r.get("commit")})
        out += ["", "Control plane, instructions per call (20 changes, 10 endpoints per service): the per-change "
                "diff and comparison grow with the number of services, the publish does not"
                + (f" (commit {', '.join('`' + c + '`' for c in cpc)}, `bench/results/added/callgrind.jsonl`)"
                   if cpc else "") + ".", "",
                table(["services", "initial diff", "initial publish", "per service", "change: same_content",
                       "change: diff", "change: publish"],
                      [[n_human(r["services"]), fmt(r.get("initial_compute_ir")), fmt(r.get("initial_apply_ir")),
                        fmt(r.get("initial_apply_ir", 0) / r["services"]), fmt(r.get("same_content_ir")),
                        fmt(r.get("change_compute_ir")), fmt(r.get("change_apply_ir"))] for r in d.cg_cp])]
    return "\n".join(out)


def _ab_cell(ab):
    parts = []
    for x in ab.get("rows", []):
        b, a = x.get("before_ns"), x.get("after_ns")
        if x.get("ratio") is not None:
            q = f"{x['ratio']:.2f}" + (f", {x['lower']} of {ab.get('rounds')}" if x.get("lower") is not None else "")
        else:
            q = f"{a / b:.2f}" + (f", {x['lower']} of {ab.get('rounds')}" if x.get("lower") is not None else "")
        runs = f" [runs {x['before_runs']} -> {x['after_runs']}]" if x.get("before_runs") else ""
        parts.append(f"{PHASE.get(x['phase'], x['phase'])} {fmt(b)} -> {fmt(a)} ns ({q}){runs}")
    return (f"{ab.get('before', '?')} -> {ab.get('after', '?')}, {ab.get('rounds', '?')} rounds at "
            f"{ab.get('case', '?')}: " + ", ".join(parts))


def changes(d):
    if not d.changes:
        return "None recorded."
    rows = []
    for c in d.changes:
        ir = "; ".join(f"{PHASE.get(x['phase'], x['phase'])} {fmt(x['before'])} -> {fmt(x['after'])}"
                       + (f" ({x['case']})" if x.get("case") else "") for x in c.get("ir", [])) or "—"
        ab = "<br>".join(_ab_cell(a) for a in c.get("ab", [])) or "—"
        other = "; ".join(f"{o['what']}: {fmt(o['before'])} -> {fmt(o['after'])}" for o in c.get("other", [])) or "—"
        rows.append([f"`{c.get('commit', '?')}`", c["change"], ir, ab, other])
    return table(["commit", "change", "instructions per packet (case)", "interleaved A/B", "other"], rows, left=5)


def not_kept(d):
    if not d.not_kept:
        return "None recorded."
    return table(["measured", "change", "established", "new connection", "not kept because"],
                 [[r["measured"], r["change"], r["est_ratio"], r["newconn_ratio"], r["why"]] for r in d.not_kept], left=5)


def observations(d):
    if not d.observations:
        return "None recorded."
    return table(["what", "value", "command", "measured", "load average"],
                 [[o["what"], o["value"], f"`{o['command']}`", o["measured"], o.get("load", "—")]
                  for o in d.observations], left=5)


def reading(d):
    """A short reading of the tables, as numbered items."""
    big, one, fl = d.big, d.one, (d.floor[-1] if d.floor else None)
    items = []
    if big and one and big.get("est_ns") and one.get("est_ns"):
        items.append(f"**Established forwarding at scale is memory-bound.** It costs {one['est_ns']:.0f} ns with 1 "
                     f"service / 1k flows (all in cache) and {big['est_ns']:.0f} ns with {n_human(big['services'])} "
                     f"services / {n_human(big['flows'])} flows, with the same instruction count (section 5)"
                     + (f"; the memory floor puts reading that packet's 4 random lines alone at {fl['est_ns']:.0f} ns, "
                        "so only touching fewer lines, or overlapping more of the misses with work, closes the gap to "
                        "the 100 ns target. The orderings tried for the overlap are in *Tried and not kept*" if fl else "")
                     + ". What an established packet touches: its frame, the connection hash's two buckets, the key "
                     "slot that holds its `Conn` and its `DestCounters`.")
    c = d.cg_by.get((big["services"], big["flows"])) if big else None
    if c:
        items.append(f"**Instructions:** {c['est_ir_per_pkt']:.0f} per established packet, spread over `prepare_burst` "
                     "(frame checks, parse, key hashing, prefetches), the connection table's bulk lookup and `process_burst` (section "
                     "5's profile); no single part dominates. A NIC's `RTE_MBUF_F_RX_IP_CKSUM_GOOD` would make the "
                     "header checksum verification free.")
    hv = [r for r in d.pipe if bool(r.get("hugepages")) != bool(d.machine.get("hugepages"))]
    if hv and hv[0].get("est_ns"):
        h = hv[0]
        base = d.by.get((h["services"], h["flows"]), {})
        if base.get("est_ns"):
            items.append(f"**Hugepages** ({n_human(h['services'])} / {n_human(h['flows'])}): {h['est_ns']:.0f} ns "
                         f"established against {base['est_ns']:.0f} ns on 4 KiB pages ({h['est_ns'] / base['est_ns']:.2f}): "
                         "TLB reach is not the main cost, the number of lines missed is. Use them in production anyway "
                         "(DPDK's default).")
    syr = d.cp_row(10000, "offline", d.syncl)
    if syr:
        items.append(f"**Control plane:** one endpoint change at 10k services costs {syr['change_p50_us']:.0f} µs p50 "
                     f"end to end against {syr['baseline_change_p50_us'] / 1000:.0f} ms for the whole-table path "
                     "(section 2b). Still O(services): a full resync and the first reader snapshot after a change; "
                     "list decoding (section 2c).")
    nft = max((r for r in d.ipt if r.get("variant") == "nftables" and r.get("partial_p50_ms")
               and not r.get("failed")), key=lambda r: r["services"], default=None)
    leg = max((r for r in d.ipt if r.get("variant") == "legacy" and r.get("partial_p50_ms")),
              key=lambda r: r["services"], default=None)
    if nft or leg:
        items.append("**Kernel modes grow with the table** (section 3): "
                     + (f"iptables-legacy's partial sync takes {fmt(leg['partial_p50_ms'])} ms at "
                        f"{n_human(leg['services'])} services (`iptables-restore` rewrites the whole table per "
                        "transaction)" if leg else "")
                     + ("; " if leg and nft else "")
                     + (f"nftables mode's {fmt(nft['partial_p50_ms'])} ms at {n_human(nft['services'])}, most of it "
                        + ("the kernel's commit" if nft.get("netlink_batch_syncs") else "the libnftables transaction")
                        + ": a rule with a jump, goto, vmap or dnat makes nf_tables validate "
                        "every chain its table's hooks reach at commit (see *Single observations*), so vipd spreads "
                        "the services over tables of at most 1000 entries (one chain each in the fnat layout) and a "
                        "change pays for one of them; "
                        + ("a one-change sync goes as a libnftnl netlink batch (no libnftables cache per table), so "
                           "what still grows is the commit's visit of every chain of every table (docs/modes.md)"
                           if nft.get("netlink_batch_syncs") else
                           "what still grows is the commit's visit of every chain and "
                           "libnftables' per-table cache (docs/modes.md)") if nft else "")
                     + ". kube-proxy's iptables and nftables modes grow with the table; the dpdk mode's publish "
                     "(section 2) does not grow.")
    return "\n".join(f"{i}. {a}" for i, a in enumerate(items, 1)) or "Nothing measured."


def cg_since(d):
    """Section 5's counts against the full run's, when section 5 was refreshed after it."""
    if not d.cg_added:
        return ""
    parts = []
    for k in ((1, 1000), (100000, 1000000)):
        new, old = d.cg_by.get(k), d.cg_run_by.get(k)
        if new in d.cg_added and old:
            dl = [old.get(p + "_ir_per_pkt", 0) - new.get(p + "_ir_per_pkt", 0) for p in ("est", "reply", "newconn")]
            parts.append((k, dl))
    if not parts:
        return ""
    (k0, d0), rest = parts[0], parts[1:]
    txt = (f"Against the full run of the other sections (commit `{d.machine.get('commit_short', '?')}`), the IPv4 "
           f"path counted here executes {d0[0]:.0f} fewer instructions per established packet, {d0[1]:.0f} per "
           f"full-NAT reply and {d0[2]:.0f} per new connection at {n_human(k0[0])} / {n_human(k0[1])}")
    for k, dl in rest:
        txt += f" ({dl[0]:.0f}, {dl[1]:.0f} and {dl[2]:.0f} at {n_human(k[0])} / {n_human(k[1])})"
    return txt + "; *Measured changes* lists the changes one by one."


def model_one(d):
    """The scaling model's one-core paragraph, from section 5's counts and section 1's times."""
    c1, r1 = d.cg_by.get((1, 1000)), d.cg_run_by.get((1, 1000))
    one, big = d.one, d.big
    head = ("**One core.** A worker spends on a packet about `t = I / (IPC x f) + L x t_miss`: *I* instructions "
            "(section 5")
    floor = ("and *L* cache lines it must wait for, each costing *t_miss* minus whatever the burst pipeline "
             "overlaps (section 1's memory floor: about 4 random lines per established packet at 100k services / "
             "1M flows).")
    if not (c1 and r1 and one and big and one.get("est_ns") and big.get("est_ns") and d.matrix):
        return head + "), " + floor
    nc = [r["newconn_ir_per_pkt"] for r in d.cg if r.get("newconn_ir_per_pkt")]
    reply_ns = [r["reply_ns"] for r in d.matrix if r.get("reply_ns")]
    nc_m = [r["newconn_mpps"] for r in d.matrix if r.get("newconn_mpps")]
    ipc = r1["est_ir_per_pkt"] / one["est_ns"]
    txt = (head + (f", commit `{d.cg_added[0].get('commit', '?')}`" if d.cg_added else "")
           + f": about {c1['est_ir_per_pkt']:.0f} for an established packet, {c1['reply_ir_per_pkt']:.0f} for a "
           f"reply, {min(nc):,.0f} to {max(nc):,.0f} for a new connection), " + floor
           + f" With all in cache (1 service / 1k flows) the instruction term alone gives section 1's "
           f"~{one['est_ns']:.0f} ns for {r1['est_ir_per_pkt']:.0f} instructions, about {ipc:.1f} instructions per "
           f"ns on this machine; at {n_human(big['services'])} / {n_human(big['flows'])} the same instructions take "
           f"~{big['est_ns']:.0f} ns, the rest being misses. Mpps per core is `1000 / t[ns]`: about "
           f"{1000 / one['est_ns']:.0f} in cache down to about {1000 / big['est_ns']:.1f} at "
           f"{n_human(big['services'])} / {n_human(big['flows'])} for established packets"
           + (f", {1000 / max(reply_ns):.0f} to {1000 / min(reply_ns):.0f} for replies" if reply_ns else "")
           + (f", {min(nc_m):.1f} to {max(nc_m):.1f} for new connections" if nc_m else "") + ".")
    if d.cg_added and r1["est_ir_per_pkt"] != c1["est_ir_per_pkt"]:
        t_new = one["est_ns"] - (r1["est_ir_per_pkt"] - c1["est_ir_per_pkt"]) / ipc
        txt += (f" Those times are the full run's (commit `{d.machine.get('commit_short', '?')}`, "
                f"{r1['est_ir_per_pkt']:.0f} instructions per established packet); with section 5's "
                f"{c1['est_ir_per_pkt']:.0f} at the same rate the in-cache packet would take about {t_new:.0f} ns "
                f"({1000 / t_new:.0f} Mpps), and the misses at {n_human(big['services'])} / "
                f"{n_human(big['flows'])} do not shrink with the instructions: measure before relying on it.")
    return txt


def published(d):
    big, one = d.big, d.one
    if not (big and one):
        return ""
    return (f"vipd in this report, one core of the VM above with a ring port: {one.get('est_mpps', 0):.1f} Mpps with 1 "
            f"service / 1k flows, {big.get('est_mpps', 0):.2f} Mpps with {n_human(big['services'])} services / "
            f"{n_human(big['flows'])} flows, and {big.get('newconn_mpps', 0):.2f} M new connections/s at that size. "
            "DPVS's single-worker figures include the NIC and both directions of every connection.")


def rel(p):
    """p relative to the repository when it is inside it (stable output for --check)."""
    r = os.path.relpath(os.path.abspath(p), ROOT)
    return p if r.startswith("..") else r


def render(d, plots):
    m = d.machine
    version = m.get("describe") or m.get("commit_short") or m.get("commit", "?")[:7]
    matrix = ", ".join(f"{n_human(r['services'])} / {n_human(r['flows'])}" for r in d.matrix)
    fields = {
        "version": version, "results": rel(d.res_dir),
        "measured": m.get("date", "?") + ("; section 5 (instructions per packet) counted at commit " + ", ".join(
            sorted({f"`{r.get('commit', '?')}`" for r in d.cg_added})) + ", "
            + max(r.get("measured", "?") for r in d.cg_added) if d.cg_added else ""),
        "platform": platform(d), "provenance": provenance(d), "matrix": matrix,
        "rounds": f", each {d.n_runs} times" if d.n_runs > 1 else "",
        "headline": headline(d), "targets": targets(d), "pipeline": pipeline(d, plots), "memfloor": memfloor(d),
        "baselines": baselines(d),
        "cp": control_plane(d, plots), "sync": sync(d), "decode": decode(d),
        "ipt": report_kernel.ipt_section(d.ipt, table, fmt, n_human),
        "kernel": report_kernel.conn_section(d.ker, table, fmt, n_human),
        "memory": memory(d), "callgrind": callgrind(d), "cg_since": cg_since(d), "model_one": model_one(d), "changes": changes(d), "not_kept": not_kept(d),
        "observations": observations(d), "reading": reading(d), "command": m["command"], "published": published(d),
    }
    with open(TEMPLATE) as f:
        text = string.Template(f.read()).substitute(fields)
    return text.rstrip("\n") + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description="Render docs/benchmarks.md from the benchmark results.")
    ap.add_argument("--check", action="store_true", help="render into memory; exit 1 when DOC_PATH differs")
    ap.add_argument("results", nargs="?", default=os.path.join(ROOT, "bench", "results", "full"))
    ap.add_argument("doc", nargs="?", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("img", nargs="?", default=os.path.join(ROOT, "docs", "img"))
    a = ap.parse_args(argv)
    try:
        d = Data(a.results)
    except BadInput as e:
        print(f"report.py: {e}", file=sys.stderr)
        return 2
    specs = plot_specs(d)
    if a.check:  # the plots the committed page shows are the ones drawn into IMG_DIR
        drawn = {s[0] for s in specs if os.path.exists(os.path.join(a.img, s[0] + ".svg"))}
    else:
        drawn = draw(specs, a.img)
    img_rel = os.path.relpath(os.path.abspath(a.img), os.path.dirname(os.path.abspath(a.doc)))
    text = render(d, [(s[0], s[1]) for s in specs if s[0] in drawn]).replace("](img/", f"]({img_rel}/")
    if a.check:
        try:
            with open(a.doc) as f:
                have = f.read()
        except OSError as e:
            print(f"report.py --check: {e}", file=sys.stderr)
            return 1
        if have != text:
            sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), text.splitlines(True),
                                                       a.doc, "rendered from " + rel(a.results), n=1))
            print(f"report.py --check: {rel(a.doc)} is not what {rel(a.results)} and the template give; "
                  "run python3 scripts/bench/report.py", file=sys.stderr)
            return 1
        print(f"report.py --check: {rel(a.doc)} matches {rel(a.results)}", file=sys.stderr)
        return 0
    with open(a.doc, "w") as f:
        f.write(text)
    print(f"report: wrote {a.doc} ({len(drawn)} plots)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
