"""Fixed prose of docs/benchmarks.md that report.py includes: the published
numbers of other load balancers, and what was done to the fast path (with
the instruction counts measured before each change). Python standard library
only; each function returns a list of Markdown lines.
"""


def published():
    L = []
    A = L.append
    A("Different hardware, NICs, traffic and features — orders of magnitude, not a race:")
    A("")
    A("- **DPVS** (iQIYI, DPDK, full NAT), v1.9.2 performance report in its repository")
    A("  (test/release/v1.9.2/performance.md): Xeon E5-2650 v4 @ 2.2 GHz, Intel X540 10 GbE,")
    A("  dperf as client/server. TCP: 200,000 new connections/s with 1 worker (1.2 Mpps through")
    A("  it), about 1,000,000 connections/s with 8 workers; UDP: 2.9 Mpps with 1 worker, about")
    A("  9 Mpps with 4 workers (their 10 GbE link was the limit).")
    A("- **Katran** (Meta, XDP/eBPF, L4 with IP-in-IP encapsulation to the backends): its README")
    A("  claims performance that scales linearly with the NIC's rx queues but, as far as we could")
    A("  check, publishes no per-core packet rate with the hardware it was measured on; we quote none.")
    A("- **Maglev** (Google, NSDI 2016; kernel-bypass, encapsulation, consistent hashing): the paper")
    A("  reports that one Maglev machine saturates a 10 Gbps NIC with small packets using a handful of")
    A("  packet-processing threads. We do not have the paper's exact per-thread figure and hardware")
    A("  description at hand while writing this, so we quote no number; read its evaluation section.")
    A("- **VPP's lb plugin** (Maglev-style, GRE): its 18.01 documentation states more than 3 Mpps per")
    A("  core with 1 million flows (hardware not stated there).")
    A("")
    return L


def done(cg_by, n_human):
    L = []
    A = L.append
    A("Done since 2026-11-29 (commit `4c39306`): CRC32 (`rte_hash_crc`) instead of jhash for the VIP, connection")
    A("and template tables, each connection key hashed once on insert (`*_with_hash`), and the NAT checksum")
    A("update folded (address, port and TTL deltas summed once, RFC 1624, inline). callgrind at 1 service /")
    A("1k flows, measured before and after on the same machine: established 1371 -> 1036 instructions per packet,")
    A("new connection 2996 -> 2381.")
    A("")
    A("Done since 2026-11-30 (fast path): the worker processes each burst in stages "
      "(dataplane/fastpath/burst.cc): parse all frames, hash each VIP and connection key once (CRC32, "
      "inline), look both tables up in bulk (`rte_hash_lookup_with_hash_bulk_data`), prefetch the `Conn` "
      "entries, their `DestSlot` and `DestCounters` and the `Service` of new flows, then run the per-packet "
      "stage in packet order (a per-burst change log of the connection table repeats a lookup that an "
      "earlier packet of the burst made stale). Also: the IPv4 header checksum verified as five 32-bit words, "
      "the NAT rewrite in whole words, and an established packet no longer reads its `Service` unless the "
      "connection has a persistence template. Instructions per packet (callgrind), before -> after, measured "
      "by the full runs of 2026-11-30 02:40 and 04:59: 1 / 1k: established 1036 -> 1018, reply 1142 -> 998, new "
      "connection 2385 -> 2073; 100k / 1k: established 1036 -> 1018, reply 1142 -> 998, new connection "
      "2394 -> 2080; 100k / 1M: established 1078 -> 1034, reply 1174 -> 1014, new connection 2494 -> 2181.")
    A("")
    # Before = the full run of 2026-11-30 04:59 (commit 64def23 + the burst stages), measured with the
    # same callgrind command; after = this run's section 5.
    _cg_before = {(1, 1000): (1018.0, 998.0, 2073.0), (100000, 1000): (1018.0, 998.0, 2080.0),
                  (100000, 1000000): (1034.0, 1014.0, 2181.0)}
    _cg_rows = []
    for k, (e0, r0, n0) in _cg_before.items():
        c = cg_by.get(k)
        if c and c.get("est_ir_per_pkt"):
            _cg_rows.append(f"{n_human(k[0])} / {n_human(k[1])}: established {e0:.0f} -> {c['est_ir_per_pkt']:.0f}, "
                            f"reply {r0:.0f} -> {c.get('reply_ir_per_pkt', 0):.0f}, new connection {n0:.0f} -> "
                            f"{c.get('newconn_ir_per_pkt', 0):.0f}")
    A("Done since 2026-12-01 (fast path): the last next hop's MAC is kept within a burst (`output()`: "
      "the burst's following packets to the same next hop skip the route and neighbour lookups), and the connection table is looked up first: "
      "the VIP table is looked up (in bulk) only for packets that are not a known flow's client-to-VIP packet "
      "(new flows, NAT-mode replies), so an established packet touches no VIP table entry and, unless it refreshes a "
      "persistence template, no `Service`. A connection whose Service was removed is dropped like a packet "
      "to no service, as before. The connection-first change alone (callgrind, the tree before and after it): "
      "established 956 -> 815 instructions per packet at 100k / 1M, 940 -> 799 at 1k / 1k; reply 935 -> 955, "
      "new connection 2103 -> 2135 (the second, smaller lookup loop). Then the connection sweep was paced by "
      "time (the whole table once a second, a slice per poll) instead of 64 entries per poll, which a busy "
      "worker paid as 2 entry visits (about 50 instructions) per packet; and an established TCP packet "
      "without FIN or RST skips the state machine: 815 -> 733 at 100k / 1M (the sweep's remaining work is "
      "reported in section 5). A full-NAT reply (its key ends at a local address and port) skips the VIP "
      "table too: reply 874 -> 775 instructions at 100k / 1M. All of these, before -> after" +
      (": " + "; ".join(_cg_rows) + "." if _cg_rows else " (not measured in this run).") +
      " In time, interleaved on one machine in the same minutes (`scripts/bench/ab.sh BEFORE AFTER 5 --services "
      "100000 --flows 1000000 --packets 1000000 --reps 3 --newconn-packets 100000`, BEFORE = commit 8ee2887, AFTER = "
      "202f307, 2026-12-01 11:13Z), medians of 5 runs each at 100k / 1M: established 296 -> 196 ns (runs 227-317 -> "
      "160-209), reply 244 -> 212 ns, new connection 546 -> 518 ns.")
    A("")
    A("Done later on 2026-12-01: `parse_frame` and `rewrite_l3l4` are inline (dataplane/fastpath/"
      "packet_inline.h), so the parsed header is built in the burst's own slot instead of being returned "
      "through memory and copied twice; `output()`'s common case (the next hop already resolved in the burst) "
      "and `track()` are inline too, the neighbour lookup stays out of line. callgrind at 1k / 1k, the trees "
      "before and after: established 724 -> 634 instructions per packet, reply 765 -> 668, new connection "
      "1994 -> 1917. Interleaved (`scripts/bench/ab.sh BEFORE AFTER 5` with the options above, BEFORE = "
      "8f026c2, AFTER = b54c1a0, 2026-12-01 14:12Z), medians of 5 runs each at 100k / 1M: established "
      "212 -> 187 ns (runs 193-219 -> 161-211), reply 251 -> 221 ns, new connection 814 -> 602 ns. "
      "Then a NAT-mode reply that matches a connection skips the VIP table and the address checks, as a "
      "full-NAT reply already did (both now go straight to the reply path): at 1k / 1k, NAT reply 986 -> 633 "
      "instructions per packet, full-NAT reply 668 -> 627. "
      "Then the worker takes up to 64 packets per rx call and `process_burst` prepares the second burst of 32 "
      "(parse, lookups, prefetch of its connection entries) before the first one's packets run, so that the "
      "second one's misses are in flight during that work (the change log is started once per call, so a "
      "lookup made before the first burst ran still sees its changes; test "
      "`EntryReusedByAnotherFlowSeenByTheNextBurst`). Four interleaved A/Bs of 5-7 runs each at 100k / 1M "
      "(2026-12-01 14:31-14:47Z, the trees before and after): established 182 -> 158, 199 -> 190, 195 -> 185, "
      "198 -> 183 ns (medians: lower in all four, by 4-13 %); reply 198 -> 162, 198 -> 218, 219 -> 211, "
      "217 -> 210; new connection 675 -> 517, 590 -> 787, 652 -> 802, 772 -> 755 (no clear direction: its "
      "cost is rte_hash's inserts). Instructions barely move (established 631 -> 624 at 100k / 1M): the gain "
      "is overlap, and the memory floor bounds it.")
    A("")
    A("Done in the evening of 2026-12-01: a packet of a connection checks its destination's generation on "
      "its worker's `DestCounters` line, which it writes anyway (the line carries the worker's copy of the "
      "generation; the publisher bumps the slot's and every worker's copy together), instead of reading "
      "the shared `DestSlot` array: one random cache line less per packet, 6 -> 5 in the memory floor's "
      "established shape. Instructions 624 -> 621 (1k / 1k). Interleaved A/B, 11 runs each at 100k / 1M "
      "(`scripts/bench/ab.sh` with the options above, BEFORE = 3d2cf16, 2026-12-01 17:26Z): established "
      "177 -> 159 ns (median; lower in 9 of 11 paired rounds, median ratio 0.92), reply 206 -> 177 ns "
      "(8 of 11, 0.88), new connection 621 -> 589 ns (7 of 11). A 64-byte `Conn`, tried again then, was not "
      "kept (the table at the end).")
    A("")
    A("Then full-NAT replies left the rte_hash: a reply is addressed to a local address and port that the "
      "worker handed out to one connection at a time, so the connection table finds it in a direct port index "
      "(local address x port -> entry, 4 MiB for 16 local addresses) and checks the rest of the key against "
      "the entry (conn_table.h). A full-NAT connection is one key in the hash instead of two: one insert per "
      "new connection, half the buckets and key slots (bytes per connection of capacity 166 -> 125 at 1k / "
      "1k), and a reply reads one index line instead of two buckets and a key slot (3 lines in the memory "
      "floor's reply shape). callgrind at 1k / 1k: established 621 -> 633 instructions per packet (every "
      "packet now asks whether its destination is a local address), reply 617 -> 537, new connection "
      "1920 -> 1467. Interleaved A/B, 9 runs each at 100k / 1M (BEFORE = d8225ec, 2026-12-01 17:50Z): "
      "reply 164 -> 108 ns (lower in 9 of 9 paired rounds, median ratio 0.70), new connection 547 -> 249 ns "
      "(9 of 9, 0.45), established 152 -> 145 ns (6 of 9, 0.97: no clear change).")
    A("")
    A("Then the `Conn` moved into the hash's key slot (8621725): the connection table's rte_hash takes the "
      "whole 48-byte `Conn` as its key, and its compare and hash functions (`rte_hash_set_cmp_func` and the "
      "creation parameters) read only the client's 13-byte flow key at its start. rte_hash copies the key into "
      "its key slot at insert (8-byte data pointer + 48 bytes: one 64-byte line) and never reads the rest, so "
      "the entry is the line a lookup reads anyway to compare the key: an established packet reads two "
      "buckets, that line and its `DestCounters`, 4 random lines instead of 5 (the memory floor's established "
      "shape at 100k / 1M: 97 -> 67-71 ns in the runs since). rte_hash returns a key's position; `ConnTable::init` finds its key "
      "slots from two probe keys, checks the 64-byte stride and refuses any other layout. NAT-mode reply keys "
      "are alias slots that name their connection's position. Bytes per connection of capacity at 100k / 1M: "
      "123 -> 103 (full NAT). callgrind at 1k / 1k: established 633 -> 632 instructions, reply 537 -> 535, "
      "new connection 1466 -> 1450. Interleaved A/B, 9 runs each at 100k / 1M (BEFORE = 3124f6a, "
      "2026-12-01 20:37Z to 21:08Z): established 174 -> 156 ns (lower in 9 of 9 paired rounds, median ratio "
      "0.86), reply 148 -> 139 ns (9 of 9, 0.94), new connection 363 -> 353 ns (3 of 9, 1.04: no clear "
      "change). What was measured alongside and not kept is in the table at the end.")
    A("")
    return L


# Fast-path changes tried for the established target at 100k services / 1M
# flows and not kept: (date, change, established ratio, new-connection ratio,
# why not kept). Ratios are after / before, medians of paired rounds of
# scripts/bench/ab.sh against the tree without the change ("lower in k of n"
# counts the rounds where the change was faster).
NOT_KEPT = [
    ("2026-12-01", "software pipelining inside a burst (groups of 4, 8 or 16 packets)",
     "within noise", "—", "no gain (across two bursts it landed: *Done since 2026-11-30*, above)"),
    ("2026-12-01", "a 64-byte `Conn` (one line per entry instead of 1.5 on average)",
     "1.05 (11 rounds; reply 0.95)", "0.99", "noise, for 16 more bytes per connection"),
    ("2026-12-01", "a burst of 64 packets instead of 32", "no change (3 of 5)", "1.15 (0 of 5 lower)",
     "new connections slower"),
    ("2026-12-01", "per-destination counters and generation off the established path (the generation read "
     "from the shared `DestSlot` array, no counters: an upper bound for keeping them in the `Conn` and "
     "folding them in at the sweep)", "0.90 (6 of 8)", "—",
     "at best ~10 %, before the cost of folding counters in at the sweep; backend counters up to a "
     "sweep period late"),
    ("2026-12-01", "per-destination counters in a compact 16-byte array instead of the 64-byte line",
     "no clear change", "—", "no gain"),
    ("2026-12-01", "`DestCounters` prefetched straight after the bulk lookup", "worse in 4 of 5", "—",
     "no gain"),
    ("2026-12-02", "three-stage pipeline: parse, hash and prefetch both rte_hash buckets one or two bursts "
     "before the lookup (the bucket array read from rte_hash's private struct, checked at start)",
     "1.15 (0 of 7); 1.25 with bursts of 16", "0.99", "slower"),
    ("2026-12-02", "the same three-stage order without the bucket prefetch", "1.13 (0 of 7)", "1.04",
     "slower: the reordering itself costs"),
    ("2026-12-02", "bucket prefetch right after each key's hash, in today's order", "0.98 (4 of 7)", "1.08",
     "noise"),
    ("2026-12-02", "the next burst's `DestCounters` prefetch before the current burst's packets",
     "1.00 (3 of 5)", "1.08", "noise"),
    ("2026-12-02", "an rx of 128 packets (four bursts per poll)", "0.97 (6 of 9)", "1.41 (0 of 9)",
     "new connections slower"),
    ("2026-12-02", "only the first bucket when it holds the key (its signatures scanned for the key slot to "
     "prefetch, then rte_hash's single lookup, which stops there)", "1.04 (4 of 9)", "1.03",
     "noise, 28 more instructions per packet"),
    ("2026-12-02", "the upper bound for counters off the established path (2026-12-01's row) measured again, "
     "same change", "0.965 (9 of 11); 0.98 (4 of 7) in an A/B minutes before", "0.97",
     "at best ~4 % now: does not close the gap, and backend counters would be up to a sweep period late"),
]


def not_kept():
    L = []
    A = L.append
    A("### Tried for the established target and not kept")
    A("")
    A("Interleaved A/Bs at 100k services / 1M flows (`scripts/bench/ab.sh`, 5-11 paired rounds), "
      "after / before, median of the paired ratios; \"k of n\": rounds in which the change was faster. "
      "Single paired ratios within one A/B ranged from 0.69 to 1.79 on this VM, so only a median well "
      "away from 1, with most rounds on its side, counts.")
    A("")
    A("| date | change | established | new connection | not kept because |")
    A("|---|---|---|---|---|")
    for date, change, est, nc, why in NOT_KEPT:
        A(f"| {date} | {change} | {est} | {nc} | {why} |")
    A("")
    return L
