"""Section 3 of docs/benchmarks.md (kernel modes versus dpdk), imported by
report.py: section(res_dir, table, fmt, n_human) returns its Markdown lines.

Inputs (written by scripts/bench.sh): ipt.jsonl (vipd_bench ipt, one line per
service count) and kernel.jsonl (scripts/bench/kernel_modes.sh, one line per
mode and service count). Python standard library only.
"""
import json
import os


def _jsonl(res_dir, name):
    p = os.path.join(res_dir, name)
    if not os.path.exists(p):
        return []
    return [json.loads(l) for l in open(p) if l.strip().startswith("{")]


def section(res_dir, table, fmt, n_human):
    L = []
    A = L.append
    ipt = sorted(_jsonl(res_dir, "ipt.jsonl"), key=lambda r: r["services"])
    ker = _jsonl(res_dir, "kernel.jsonl")
    A("## 3. Kernel modes (iptables, nftables) versus dpdk")
    A("")
    A("The O(N)-versus-O(1) claim of the design, with numbers: what one change costs the iptables mode")
    A("as the rule set grows, and what the first packet of a connection costs in each mode.")
    A("")
    A("### 3a. iptables- and nftables-mode sync time")
    A("")
    if not ipt:
        A("Not measured in this run (needs root and iptables-restore; see scripts/bench.sh).")
        A("")
    else:
        e = ipt[0].get("endpoints", 4)
        A("`ip netns exec NS vipd_bench ipt --services N [--iptables legacy]` in a network namespace that")
        A("scripts/bench.sh creates and deletes (the program refuses to run outside such a namespace): the real")
        A("`IptablesBackend` running the real `iptables-save` / `iptables-restore --noflush`, once with the system's")
        A("iptables and once with iptables-legacy. N services of "
          f"{e} endpoints each (N x {e} + N + 3 nat chains). *full*: a full sync of the loaded table (every chain")
        A("rewritten: start-up, after an error, periodic resync); *partial*: one endpoint of one random service")
        A("replaced (only that service's chains are rewritten). Wall time of `apply()` (render + commands), with")
        A("the `iptables-restore` time alone beside it; *full / partial* in the same run.")
        A("")
        rows = []
        for r in sorted(ipt, key=lambda r: (r.get("variant", ""), r["services"])):
            ver = r.get("iptables", r.get("variant", "?")).replace("iptables ", "")
            if r.get("failed"):
                rows.append([ver, n_human(r["services"]), "—", f"failed after {r.get('initial_ms', 0) / 1000:.0f} s: "
                             f"{r['failed']}", "—", "—", "—", "—", "—", "—"])
                continue
            ratio = r["full_p50_ms"] / r["partial_p50_ms"] if r.get("partial_p50_ms") else None
            rows.append([ver, n_human(r["services"]), fmt(r.get("nat_chains")), fmt(r.get("initial_ms")),
                         fmt(r.get("full_p50_ms")), fmt(r.get("full_restore_p50_ms")),
                         fmt(r.get("partial_p50_ms"), 2), fmt(r.get("partial_restore_p50_ms"), 2),
                         (fmt(ratio) + "x") if ratio else "—", fmt(r.get("full_payload_bytes", 0) / 1024)])
        A("nftables rows: `vipd_bench ipt --backend nftables` (the same driver, tables and changes; the real "
          "`NftablesBackend` and libnftables): *restore ms* is the libnftables transaction, *nat chains* the "
          "per-service chains of table `ip vipd`, *payload* the transaction text (docs/modes.md, nftables syncs).")
        A("")
        A(table(["iptables", "services", "nat chains", "initial ms", "full ms (p50)", "full: restore ms",
                 "partial ms (p50)", "partial: restore ms", "full / partial", "full payload KiB"], rows))
        A("")
        for v in sorted({r.get("variant", "") for r in ipt}):
            ok = sorted([r for r in ipt if r.get("variant", "") == v and not r.get("failed")], key=lambda r: r["services"])
            if len(ok) < 2:
                continue
            lo, hi = ok[0], ok[-1]
            ver = hi.get("iptables", v)
            A(f"{ver}: from {n_human(lo['services'])} to {n_human(hi['services'])} services "
              f"({hi['services'] // lo['services']}x) a full sync grows {hi['full_p50_ms'] / lo['full_p50_ms']:.0f}x "
              f"({fmt(lo['full_p50_ms'])} -> {fmt(hi['full_p50_ms'])} ms) and a partial sync "
              f"{hi['partial_p50_ms'] / lo['partial_p50_ms']:.0f}x ({fmt(lo['partial_p50_ms'], 2)} -> "
              f"{fmt(hi['partial_p50_ms'], 2)} ms).")
            A("")
        A("A partial payload is a few hundred bytes whatever the size, yet a partial sync grows with the table:")
        A("`iptables-restore` re-reads and rewrites the whole table in the kernel per transaction, and the backend")
        A("re-renders every service's chains (sha256 chain names included) before it compares them, through an")
        A("index, with the last applied set (the compare was a linear search per chain until commit 3c5855a")
        A("'iptables: partial sync compares chains through an index': in the run of 2026-11-30, 12 s of the")
        A("15.5 s partial sync at 10k services, legacy). At 10k services the system's nf_tables `iptables-restore` did not finish the initial")
        A("load within the time limit on this VM (where it failed, the row says so); kube-proxy's own iptables mode")
        A("has the same O(rules) behaviour, which is what the dpdk mode's O(1) publish (section 2) avoids.")
        A("")
    A("### 3b. First-packet cost: new TCP connections per second, iptables versus dpdk")
    A("")
    if not ker:
        A("Not measured in this run (needs root, network namespaces and the lab: scripts/bench/kernel_modes.sh).")
        A("")
        return L
    k0 = ker[0]["result"]
    A("`scripts/bench/kernel_modes.sh`: the lab of scripts/lab.sh (client -> lb -> four pods), vipd in the lb")
    A("namespace in dpdk mode (af_packet vdevs, one worker) or in iptables mode (kernel forwarding, rules")
    A("in the lb namespace), full NAT. Every service has the four pods as endpoints; "
      f"{k0.get('procs', 1)} client processes open TCP connections round robin to {k0.get('targets', 16)} VIPs spread "
      "evenly over the whole service list (iptables walks half of `VIPD-SERVICES` on average), each closed with a")
    A("RST right after the handshake. A connection counts when `connect()` returns. iptables mode ran "
      f"{next((r.get('iptables') for r in ker if r.get('iptables')), 'the system iptables')} "
      "(the nf_tables one cannot load 10k services in time, 3a). The client, the pods' kernel")
    A("and (in dpdk mode) the polling worker share this VM's 2 vCPUs, so the absolute rates are low and the")
    A("ratios are the result: *iptables / dpdk* at the same service count, and *vs fewest* (the same mode at")
    A("its smallest service count).")
    A("")
    by = {(r["mode"], r["services"]): r for r in ker}
    ns = sorted({r["services"] for r in ker})
    rows = []
    for n in ns:
        d, i = by.get(("dpdk", n)), by.get(("iptables", n))
        dr = d["result"]["conn_per_s"] if d else None
        ir = i["result"]["conn_per_s"] if i else None

        def vs(mode, v):
            b = by.get((mode, ns[0]))
            return f"{v / b['result']['conn_per_s']:.2f}" if v and b and b["result"]["conn_per_s"] else "—"
        rows.append([n_human(n), fmt(dr), vs("dpdk", dr), fmt(d["result"].get("connect_p50_ms"), 3) if d else "—",
                     fmt(ir), vs("iptables", ir), fmt(i["result"].get("connect_p50_ms"), 3) if i else "—",
                     f"{ir / dr:.2f}" if dr and ir else "—",
                     ", ".join(f"{r['mode']} {r['result']['failed']}" for r in (d, i) if r and r["result"].get("failed"))
                     or "0"])
    A(table(["services", "dpdk conn/s", "vs fewest", "dpdk connect p50 ms", "iptables conn/s", "vs fewest",
             "iptables connect p50 ms", "iptables / dpdk", "failed"], rows))
    A("")
    if any(r["mode"] == "nftables" for r in ker):
        A("nftables mode (same lab, same client; one verdict-map lookup per new connection instead of a walk "
          "over `VIPD-SERVICES`):")
        A("")
        nrows = []
        for n in ns:
            f, i = by.get(("nftables", n)), by.get(("iptables", n))
            nrows.append([n_human(n), fmt(f["result"]["conn_per_s"]) if f else "—",
                          fmt(f["result"].get("connect_p50_ms"), 3) if f else "—",
                          fmt(i["result"].get("connect_p50_ms"), 3) if i else "—",
                          str(f["result"].get("failed", 0)) if f else "—"])
        A(table(["services", "nftables conn/s", "nftables connect p50 ms", "iptables connect p50 ms", "failed"], nrows))
        A("")
    for mode in ("dpdk", "iptables", "nftables"):
        a, b = by.get((mode, ns[0])), by.get((mode, ns[-1]))
        if a and b and a is not b and a["result"].get("connect_p50_ms") and b["result"].get("connect_p50_ms"):
            A(f"- {mode}: the median connect (SYN out to SYN-ACK back, through vipd) takes "
              f"{b['result']['connect_p50_ms'] / a['result']['connect_p50_ms']:.2f}x as long at "
              f"{n_human(ns[-1])} services as at {n_human(ns[0])} ({a['result']['connect_p50_ms']:.3f} -> "
              f"{b['result']['connect_p50_ms']:.3f} ms).")
    A("")
    A("The connection rates are bounded by the Python client and the pods' kernel on this loaded 2-vCPU VM, "
      "so they move with the load more than with the mode; the median connect time is the first-packet "
      "cost (the dpdk mode's is higher in absolute terms because af_packet vdevs and a worker that shares a "
      "CPU with the client add latency of their own).")
    A("")
    loads = ", ".join(f"{r['mode']}/{n_human(r['services'])} {r['load']}" for r in ker)
    A(f"Load average when each case started: {loads}. Time for vipd's first sync: " +
      ", ".join(f"{r['mode']}/{n_human(r['services'])} {r['sync_s']} s" for r in ker) + ".")
    A("")
    return L


def asks(res_dir, n_human):
    """Items for "What the numbers ask for" from section 3's results."""
    out = []
    ipt = [r for r in _jsonl(res_dir, "ipt.jsonl") if not r.get("failed") and r.get("partial_p50_ms")]
    big = max(ipt, key=lambda r: r["services"], default=None)
    if big and big["partial_p50_ms"] > 2 * big.get("partial_restore_p50_ms", 0):
        out.append(f"**iptables mode, partial syncs:** at {n_human(big['services'])} services one endpoint change "
                   f"costs {big['partial_p50_ms'] / 1000:.1f} s, of which `iptables-restore` is "
                   f"{big['partial_restore_p50_ms'] / 1000:.1f} s: the rest is `build_ruleset` re-rendering every "
                   "service (sha256 chain names, rule text) and comparing the chains (through an index since "
                   "commit 3c5855a; before, a linear search per chain). Render only the services the "
                   "TableDiff names and keep the rendered chains of the others.")
    return out
