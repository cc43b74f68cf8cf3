#!/usr/bin/env python3
"""usage: callgrind_summary.py DIR SERVICES FLOWS OUT
       callgrind_summary.py --cp DIR SERVICES OUT

DIR holds one vipd_bench pipeline run under valgrind --tool=callgrind
--collect-atstart=no: out.json (its JSON line) and one dump per phase
(cg.<pid>.<n>, "Trigger: Client Request: <phase>"). Prints one JSON line
with instructions per packet of each phase, and writes the top functions of
the est and newconn phases (self instructions per packet) to
OUT/callgrind_<phase>_<services>_<flows>.txt. An IPv6 run (vipd_bench
pipeline --family 6; out.json says "family": 6) gives a row with
"family": 6 and the profiles OUT/callgrind_<phase>_<services>_<flows>_v6.txt,
so report.py keeps the families apart (a row without "family" is IPv4).
With --cp (a `vipd_bench cp` run): one dump per measured call, named after
the part (initial_compute, initial_apply, same_content, change_compute,
change_apply); prints the mean instructions per call of each part.
"""
import glob
import json
import os
import re
import subprocess
import sys


def dumps(d):
    for f in sorted(glob.glob(os.path.join(d, "cg.*.*"))):
        text = open(f, errors="replace").read()
        m = re.search(r"^desc: Trigger: Client Request: (\w+)", text, re.M)
        t = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
        if m and t:
            yield f, m.group(1), int(t.group(1))


def clean(name):
    """callgrind_annotate's 'file:function [object]' -> a short function name."""
    obj = re.search(r" \[([^\]]*)\]$", name)
    name = re.sub(r" \[[^\]]*\]$", "", name)
    name = name[4:] if name.startswith("???:") else re.sub(r"^[^:]*:(?!:)", "", name, count=1)
    name = name.replace("(anonymous namespace)::", "")
    # drop the parameter list: the last balanced (...) group
    if name.endswith(")") or name.endswith(") const"):
        tail = " const" if name.endswith(" const") else ""
        body = name[: len(name) - len(tail)]
        depth = 0
        for i in range(len(body) - 1, -1, -1):
            depth += body[i] == ")"
            depth -= body[i] == "("
            if depth == 0:
                name = body[:i] + "()" + tail
                break
    if name.startswith("0x") and obj:
        name += " (" + os.path.basename(obj.group(1)) + ", no symbol)"
    return name


if sys.argv[1] == "--cp":
    d, services, out = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    sums, counts = {}, {}
    for _, part, ir in dumps(d):
        sums[part] = sums.get(part, 0) + ir
        counts[part] = counts.get(part, 0) + 1
    row = {"bench": "cp", "services": services}
    for part in sums:
        row[part + "_ir"] = round(sums[part] / counts[part])
    print(json.dumps(row))
    sys.exit(0)

d, services, flows, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
res = json.loads(open(os.path.join(d, "out.json")).read().strip().splitlines()[-1])
row = {"bench": "pipeline", "services": services, "flows": flows}
family = int(res.get("family", 4))
if family != 4:
    row["family"] = family
if res.get("clock"):
    row["clock"] = res["clock"]  # the worker's clock: "virtual" under valgrind
suffix = "" if family == 4 else f"_v{family}"
for f, phase, ir in dumps(d):
    pk = res.get(phase + "_packets") or 0
    if not pk:
        continue
    row[phase + "_ir_per_pkt"] = round(ir / pk, 1)
    if phase not in ("est", "newconn"):
        continue
    ann = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=no", f],
                         capture_output=True, text=True).stdout
    funcs = []
    for line in ann.splitlines():
        mm = re.match(r"\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(.*)$", line)
        if not mm:
            continue
        n = int(mm.group(1).replace(",", ""))
        if n >= ir:  # callers' inclusive artefacts (main, libc start)
            continue
        funcs.append((n / pk, clean(mm.group(3))))
    funcs.sort(reverse=True)
    with open(os.path.join(out, f"callgrind_{phase}_{services}_{flows}{suffix}.txt"), "w") as fo:
        for v, name in funcs[:25]:
            fo.write(f"{v:8.1f}  {name}\n")
print(json.dumps(row))
