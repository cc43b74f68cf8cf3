"""Section 3 of docs/benchmarks.md (kernel modes versus dpdk), for report.py.

Inputs: ipt.jsonl (vipd_bench ipt, one line per backend and service count)
and kernel.jsonl (scripts/bench/kernel_modes.sh, one line per mode and
service count) of the results directory; nftables lines that a run lacks
come from bench/results/added/ (measured outside a full run, each line with
its command). Python standard library only.
"""
import json
import os


def _jsonl(d, name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def merged(res_dir, added_dir, name, is_nft):
    """The lines of `name` in res_dir, plus the nftables lines of added_dir when
    res_dir has none; and whether any were added."""
    rows = _jsonl(res_dir, name)
    if any(is_nft(r) for r in rows):
        return rows, False
    extra = [r for r in _jsonl(added_dir, name) if is_nft(r)] if rows else []
    return rows + extra, bool(extra)


def ipt_section(ipt, table, fmt, n_human):
    if not ipt:
        return "Not measured in this run (needs root and iptables-restore; see scripts/bench.sh)."
    order = {"default": 0, "legacy": 1, "nftables": 2, "nftables nat": 3, "nftables affinity": 4}
    ipt = sorted(ipt, key=lambda r: (order.get(r.get("variant", ""), 3), r["services"]))
    rows, notes = [], []
    for r in ipt:
        ver = r.get("iptables", r.get("variant", "?")).replace("iptables ", "")
        if r.get("failed"):
            rows.append([ver, n_human(r["services"]), "—", f"failed after {r.get('initial_ms', 0) / 1000:.0f} s: "
                         f"{r['failed']}", "—", "—", "—", "—", "—", "—"])
            continue
        full = fmt(r.get("full_p50_ms"))
        if r.get("full_from"):
            notes.append(f"\\* {n_human(r['services'])} {ver}, full sync: {r['full_from']}.")
            full += " \\*"
        rt = (r["full_p50_ms"] / r["partial_p50_ms"]
              if r.get("partial_p50_ms") and r.get("full_p50_ms") and not r.get("full_from") else None)
        rows.append([ver, n_human(r["services"]), fmt(r.get("nat_chains")),
                     " / ".join(fmt(x) for x in r["initial_ms_runs"]) if r.get("initial_ms_runs") else fmt(r.get("initial_ms")),
                     full, fmt(r.get("full_restore_p50_ms")) + (" \\*" if r.get("full_from") else ""),
                     fmt(r.get("partial_p50_ms"), 2), fmt(r.get("partial_restore_p50_ms"), 2),
                     (fmt(rt) + "x") if rt else "—", fmt(r.get("full_payload_bytes", 0) / 1024)])
    out = [table(["backend", "services", "nat chains", "initial ms", "full ms (p50)", "full: restore ms",
                  "partial ms (p50)", "partial: restore ms", "full / partial", "full payload KiB"], rows)]
    added = [r for r in ipt if r.get("command")]
    if added:
        # one note per command (rows of one run share it)
        seen = []
        for r in added:
            if r["command"] not in [c for c, _ in seen]:
                seen.append((r["command"], r))
        for n, (cmd, r) in enumerate(seen):
            labels = sorted({x.get("iptables", x.get("variant")) for x in added if x["command"] == cmd},
                            key=lambda v: [x.get("iptables", x.get("variant")) for x in ipt].index(v))
            out += ["", f"{', '.join(labels)} rows: `{cmd}`, measured {r.get('measured', '?')}, "
                    f"load average {r.get('load', '?')} (CPU contention inflates the wall times"
                    + ("; two initial times are two runs" if any(x.get("initial_ms_runs") for x in ipt) else "") + ")."
                    + (" " + " ".join(notes) if notes and n == len(seen) - 1 else "")]
    elif notes:
        out += ["", " ".join(notes)]
    base = [r for r in ipt if r.get("baseline_add_cpu_p50_ms") and r.get("partial_p50_ms")]
    if base:
        out += ["", "nftables mode: one-change sync against a commit that is not vipd's, the same run and ruleset "
                "(`--baseline`: add, then delete, one address of the `cluster-ips` set through the same libnftnl "
                "batch; no rule and no verdict, so no chain is validated, but the kernel's commit still visits every "
                "chain of every table). *CPU*: vipd's process, user + system (the commit runs in its `sendmsg`). "
                "*before each change*: one such commit just before each of the 20 changes, in the cache state the "
                "change meets; *back to back*: 50 in a row after them (the kernel's chains stay in the cache). "
                "The ratio uses the former.", "",
                table(["layout", "services", "chains", "one change ms (p50)", "one change CPU ms (p50)",
                       "element commit before each change: CPU ms (p50)", "back to back: CPU ms (p50)",
                       "change / commit (CPU)"],
                      [[r.get("iptables", r.get("variant", "?")).replace("nftables 1.0.6 ", "").strip("()")
                        .replace("vipd nftables mode, ", "").replace("vipd nftables mode", "fnat"),
                        n_human(r["services"]), fmt(r.get("nat_chains")), fmt(r["partial_p50_ms"], 2),
                        fmt(r.get("partial_cpu_p50_ms"), 2), fmt(r.get("baseline_between_cpu_p50_ms"), 3),
                        fmt(r.get("baseline_add_cpu_p50_ms"), 3),
                        f"{r['partial_cpu_p50_ms'] / r['baseline_between_cpu_p50_ms']:.1f}x"
                        if r.get("partial_cpu_p50_ms") and r.get("baseline_between_cpu_p50_ms") else "—"]
                       for r in base])]
    out.append("")
    for v in sorted({r.get("variant", "") for r in ipt}, key=lambda v: order.get(v, 3)):
        ok = sorted([r for r in ipt if r.get("variant", "") == v and not r.get("failed") and r.get("partial_p50_ms")
                     and r.get("full_p50_ms") and not r.get("full_from")], key=lambda r: r["services"])
        if len(ok) < 2:
            continue
        lo, hi = ok[0], ok[-1]
        out.append(f"- {hi.get('iptables', v)}: from {n_human(lo['services'])} to {n_human(hi['services'])} services "
                   f"({hi['services'] // lo['services']}x) a full sync grows {hi['full_p50_ms'] / lo['full_p50_ms']:.0f}x "
                   f"({fmt(lo['full_p50_ms'])} -> {fmt(hi['full_p50_ms'])} ms) and a partial sync "
                   f"{hi['partial_p50_ms'] / lo['partial_p50_ms']:.0f}x ({fmt(lo['partial_p50_ms'], 2)} -> "
                   f"{fmt(hi['partial_p50_ms'], 2)} ms).")
    out += ["", "A partial payload is about a kilobyte at any size (`partial_payload_bytes`), yet a partial sync grows "
            "with the table: `iptables-restore` re-reads and rewrites the whole table per transaction, and an nf_tables "
            "commit with jump, goto, vmap or dnat rules validates every chain the hooks of the changed table reach. "
            "vipd's nftables mode therefore spreads the services over tables of at most 1000 entries (shards, "
            "docs/modes.md), one chain per service in the fnat layout and five in the nat and affinity layouts (the "
            "service chain and one per endpoint), so a change validates one shard; it renders only the changed "
            "entries, and a one-change sync of any of the three layouts goes as one libnftnl netlink batch. Initial "
            "and full syncs grow about linearly since no layout binds an anonymous set: the fnat service chains DNAT "
            "with one numgen rule per endpoint, and the nat and affinity service chains pick their endpoint chain "
            "with one `numgen random mod K-i 0 goto` rule each instead of kube-proxy's anonymous `numgen ... vmap`. "
            "The kernel walks the whole transaction for every anonymous set a rule binds (`__nft_set_trans_bind`, "
            "*Single observations*), which made full syncs quadratic (*Measured changes*)."]
    if base:
        out += ["", "What a one-change sync still grows with is the kernel's: validating the one shard it changed "
                "(bounded by the shard size) and the commit's visit of every chain of every table "
                "(`nf_tables_commit`), which any nftables commit pays, vipd's or not, as the element commit shows "
                "(what is left of a change beyond that commit is mostly the shard's validation, "
                "`nft_chain_validate`, *Single observations*):", ""]
        for lay, var in (("fnat", "nftables"), ("nat", "nftables nat"), ("ClientIP affinity", "nftables affinity")):
            rs = sorted([r for r in base if r.get("baseline_between_cpu_p50_ms") and r.get("partial_cpu_p50_ms")
                         and r.get("variant") == var], key=lambda r: r["services"])
            if len(rs) < 2:
                continue
            lo, hi = rs[0], rs[-1]
            out.append(f"- {lay}: from {n_human(lo['services'])} to {n_human(hi['services'])} services one change "
                       f"costs {fmt(lo['partial_cpu_p50_ms'], 2)} -> {fmt(hi['partial_cpu_p50_ms'], 2)} ms CPU and the "
                       f"element commit {fmt(lo['baseline_between_cpu_p50_ms'], 3)} -> "
                       f"{fmt(hi['baseline_between_cpu_p50_ms'], 3)} ms; at {n_human(hi['services'])} the commit alone "
                       f"is {100 * hi['baseline_between_cpu_p50_ms'] / hi['partial_cpu_p50_ms']:.0f} % of the change.")
    return "\n".join(out)


def conn_section(ker, table, fmt, n_human):
    if not ker:
        return "Not measured in this run (needs root, network namespaces and the lab: scripts/bench/kernel_modes.sh)."
    by = {(r["mode"], r["services"]): r for r in ker}
    ns = sorted({r["services"] for r in ker})
    base = [r for r in ker if r["mode"] in ("dpdk", "iptables")]
    out = []
    if base:
        k0 = base[0]["result"]
        ipt_v = next((r.get("iptables") for r in ker if r.get("iptables")), "the system iptables")
        out += [f"{k0.get('procs', 1)} client processes, VIPs per run: "
                + ", ".join(f"{r['mode']}/{n_human(r['services'])} {r['result'].get('targets', '?')}" for r in base)
                + f"; iptables mode ran {ipt_v} (the nf_tables one cannot load 10k services in time, 3a).", ""]
        rows = []
        for n in ns:
            d, i = by.get(("dpdk", n)), by.get(("iptables", n))
            if not (d or i):
                continue
            dr = d["result"]["conn_per_s"] if d else None
            ir = i["result"]["conn_per_s"] if i else None

            def vs(mode, v):
                b = by.get((mode, ns[0]))
                return f"{v / b['result']['conn_per_s']:.2f}" if v and b and b["result"]["conn_per_s"] else "—"
            rows.append([n_human(n), fmt(dr), vs("dpdk", dr), fmt(d["result"].get("connect_p50_ms"), 3) if d else "—",
                         fmt(ir), vs("iptables", ir), fmt(i["result"].get("connect_p50_ms"), 3) if i else "—",
                         f"{ir / dr:.2f}" if dr and ir else "—",
                         ", ".join(f"{r['mode']} {r['result']['failed']}" for r in (d, i)
                                   if r and r["result"].get("failed")) or "0"])
        out.append(table(["services", "dpdk conn/s", "vs fewest", "dpdk connect p50 ms", "iptables conn/s", "vs fewest",
                          "iptables connect p50 ms", "iptables / dpdk", "failed"], rows))
    nft = [r for r in ker if r["mode"] == "nftables"]
    if nft:
        other_run = bool(nft[0].get("command"))
        if other_run:
            out += ["", f"nftables mode, another run: `{nft[0]['command']}`, measured {nft[0].get('measured', '?')}, "
                    f"load average {', '.join(str(r.get('load', '?')) for r in nft)}. A new connection's first "
                    "packet meets one `nat-prerouting` base chain per shard table (1 + N/1000 at N services, each a "
                    "`jump services` and two verdict-map lookups) instead of a walk over `VIPD-SERVICES`; the kernel's "
                    "NAT hook stops at the first base chain that sets up the mapping, so a service connection passes "
                    "the shards up to its own, and packets of established connections pass none (connect times are rounded to 1 µs). A top-level map "
                    "sending each key straight to its shard cannot be written: a jump or goto stays inside its table."]
        # iptables mode measured in the same run as these nftables rows
        # (kernel_modes.sh --modes "iptables nftables"), kept in each row as "beside"
        same = any(r.get("beside") for r in nft)
        out += ["", table(["services", "nftables conn/s", "nftables connect p50 ms"]
                          + (["iptables conn/s (same run)", "iptables connect p50 ms (same run)"] if same else [])
                          + ["iptables connect p50 ms" + (" (the run above)" if other_run else ""), "failed"],
                          [[n_human(n), fmt(by[("nftables", n)]["result"]["conn_per_s"]),
                            fmt(by[("nftables", n)]["result"].get("connect_p50_ms"), 3)]
                           + ([fmt(by[("nftables", n)].get("beside", {}).get("conn_per_s")),
                               fmt(by[("nftables", n)].get("beside", {}).get("connect_p50_ms"), 3)] if same else [])
                           + [fmt(by[("iptables", n)]["result"].get("connect_p50_ms"), 3) if ("iptables", n) in by else "—",
                              str(by[("nftables", n)]["result"].get("failed", 0))]
                           for n in ns if ("nftables", n) in by])]
    out.append("")
    besides = [by.get(("nftables", n), {}).get("beside") for n in ns]
    if len(ns) > 1 and besides[0] and besides[-1] and besides[0].get("connect_p50_ms") and besides[-1].get("connect_p50_ms"):
        a, b = besides[0], besides[-1]
        out.append(f"- iptables, in the nftables run: the median connect takes "
                   f"{b['connect_p50_ms'] / a['connect_p50_ms']:.2f}x as long at {n_human(ns[-1])} services as at "
                   f"{n_human(ns[0])} ({a['connect_p50_ms']:.3f} -> {b['connect_p50_ms']:.3f} ms).")
    for mode in ("dpdk", "iptables", "nftables"):
        a, b = by.get((mode, ns[0])), by.get((mode, ns[-1]))
        if a and b and a is not b and a["result"].get("connect_p50_ms") and b["result"].get("connect_p50_ms"):
            out.append(f"- {mode}: the median connect takes {b['result']['connect_p50_ms'] / a['result']['connect_p50_ms']:.2f}x "
                       f"as long at {n_human(ns[-1])} services as at {n_human(ns[0])} "
                       f"({a['result']['connect_p50_ms']:.3f} -> {b['result']['connect_p50_ms']:.3f} ms).")
    out += ["", "Load average when each case started: " + ", ".join(
        f"{r['mode']}/{n_human(r['services'])} {r['load']}" for r in ker) + ". Time for vipd's first sync: " +
        ", ".join(f"{r['mode']}/{n_human(r['services'])} {r['sync_s']} s" for r in ker) + "."]
    return "\n".join(out)
