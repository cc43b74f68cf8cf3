#!/usr/bin/env python3
"""usage:
  ipvs_state.py parse FILE
  ipvs_state.py compare EXPECTED ACTUAL [--draining ADDR:PORT]... [--ignore "PROTO VIP:PORT"]...

Helper of tests/integration/ipvs_test.sh (standard library only).

parse:   reads `ipvsadm -Ln` output (or the listing part of `vipd --mode ipvs
         --dry-run`) and prints it as one JSON object:
         {"TCP 10.96.0.100:8080": {"sched": "rr", "persistent": null,
           "dests": {"10.244.1.15:8080": {"fwd": "Masq", "weight": 1,
                                           "active": 0, "inactive": 0}}}}
compare: EXPECTED is the dry-run text (what vipd wants), ACTUAL `ipvsadm -Ln`.
         Prints nothing when the kernel holds exactly the wanted services with
         the wanted scheduler, persistence and real servers (forward method,
         weight), each once; extra real servers are allowed only when named
         with --draining and at weight 0; services named with --ignore (another
         tool's) are not compared. Otherwise prints one line per difference.
Exit status 0 (differences are printed, not signalled), 2 on usage errors.
"""
import json
import sys


def parse(text):
    out, cur, dups = {}, None, []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] in ("TCP", "UDP") and len(parts) >= 3:
            key = "%s %s" % (parts[0], parts[1])
            if key in out:
                dups.append(key)
            persistent = None
            if "persistent" in parts:
                i = parts.index("persistent")
                persistent = int(parts[i + 1]) if i + 1 < len(parts) else -1
            cur = out.setdefault(key, {"sched": parts[2], "persistent": persistent, "dests": {}})
        elif parts[0] == "->" and len(parts) >= 4 and parts[1] != "RemoteAddress:Port" and cur is not None:
            addr = parts[1]
            if addr in cur["dests"]:
                dups.append("%s -> %s" % (key, addr))
            nums = [int(x) for x in parts[3:] if x.isdigit()]
            cur["dests"][addr] = {"fwd": parts[2], "weight": nums[0] if nums else -1,
                                  "active": nums[1] if len(nums) > 1 else 0,
                                  "inactive": nums[2] if len(nums) > 2 else 0}
    return out, dups


def compare(expected, actual, draining, ignore):
    want, _ = parse(expected)
    have, dups = parse(actual)
    bad = ["listed twice: %s" % d for d in dups]
    for key in sorted(set(want) | set(have)):
        if key in ignore:
            continue
        w, h = want.get(key), have.get(key)
        if h is None:
            bad.append("%s: missing in the kernel" % key)
            continue
        if w is None:
            bad.append("%s: in the kernel but not wanted (stale)" % key)
            continue
        if w["sched"] != h["sched"]:
            bad.append("%s: scheduler %s, want %s" % (key, h["sched"], w["sched"]))
        if w["persistent"] != h["persistent"]:
            bad.append("%s: persistent %s, want %s" % (key, h["persistent"], w["persistent"]))
        for addr in sorted(set(w["dests"]) | set(h["dests"])):
            wd, hd = w["dests"].get(addr), h["dests"].get(addr)
            if hd is None:
                bad.append("%s -> %s: missing" % (key, addr))
            elif wd is None:
                if addr not in draining or hd["weight"] != 0:
                    bad.append("%s -> %s: not wanted (weight %d)" % (key, addr, hd["weight"]))
            elif (wd["fwd"], wd["weight"]) != (hd["fwd"], hd["weight"]):
                bad.append("%s -> %s: %s weight %d, want %s weight %d" %
                           (key, addr, hd["fwd"], hd["weight"], wd["fwd"], wd["weight"]))
    return bad


def main(argv):
    if len(argv) == 3 and argv[1] == "parse":
        print(json.dumps(parse(open(argv[2]).read())[0], sort_keys=True))
        return 0
    if len(argv) >= 4 and argv[1] == "compare":
        draining, ignore, rest = set(), set(), argv[4:]
        while rest:
            if len(rest) < 2 or rest[0] not in ("--draining", "--ignore"):
                print(__doc__, file=sys.stderr)
                return 2
            (draining if rest[0] == "--draining" else ignore).add(rest[1])
            rest = rest[2:]
        for line in compare(open(argv[2]).read(), open(argv[3]).read(), draining, ignore):
            print(line)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
