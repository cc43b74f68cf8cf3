#!/usr/bin/env python3
"""usage: slice_without.py FILE IP STAGE_DIR

Removes the endpoint with address IP from the EndpointSlice manifest FILE, the
way an operator would: the new content goes to a file in STAGE_DIR (same
filesystem, a directory vipd does not watch) and is renamed over FILE in one
rename(2), so vipd never sees a half-written file. Done in one process, so the
file's mtime (which vipd uses to date the change) and the rename are
microseconds apart. Prints the time of the rename in microseconds since the
epoch. Exit status 1, with a message, when FILE has no endpoint with that
address. Used by scripts/demo.sh and tests/integration/lib.sh.
"""
import os
import re
import sys
import time


def without(text, ip):
    """The manifest text without the endpoint items that name ip; and how many went."""
    lines = text.splitlines(keepends=True)
    out, i, removed = [], 0, 0
    item = re.compile(r"^(\s*)- addresses:")
    addr = re.compile(r"(?<![\d.])" + re.escape(ip) + r"(?![\d.])")
    while i < len(lines):
        m = item.match(lines[i])
        if m:
            ind = len(m.group(1))
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or
                                      len(lines[j]) - len(lines[j].lstrip(" ")) > ind):
                j += 1
            if addr.search("".join(lines[i:j])):
                removed += 1
                i = j
                continue
        out.append(lines[i])
        i += 1
    return "".join(out), removed


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[0])
    path, ip, stage_dir = sys.argv[1:]
    with open(path) as f:
        text, removed = without(f.read(), ip)
    if not removed:
        sys.exit("no endpoint with address %s in %s" % (ip, path))
    staged = os.path.join(stage_dir, os.path.basename(path))
    with open(staged, "w") as f:
        f.write(text)
    t_us = time.time_ns() // 1000
    os.replace(staged, path)
    print(t_us)


if __name__ == "__main__":
    main()
