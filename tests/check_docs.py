#!/usr/bin/env python3
"""usage: tests/check_docs.py [REPO_ROOT]

Checks that vipd's documentation stands on its own (python3 standard library
only; run by scripts/test.sh as the suite "docs"):

  link     a relative Markdown link in README.md or docs/*.md whose file does not
           exist, or whose #anchor names no heading (or <a id>) of that file;
  path     a backticked repo path in README.md or docs/*.md (`dir/file.ext`, its
           first folder one of the repo's top-level folders) that does not exist;
  external a reference to a contract or folder outside the repo (CONTRACT.md,
           ../shared) in any tracked-looking file of the repo;
  ticket   an issue-tracker number ("issue 7", "issue #7", "PR #7", "(#12)") in
           README.md, docs/, or the sources and comments under the code folders
           (cmd common model controlplane dataplane observability scripts tests
           bench config; raw results under bench/results excepted): such numbers
           mean nothing to a reader of the repo.

Prints one line per finding, "FILE:LINE: KIND: what", and exits 1 if there is
any, 0 otherwise.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
SKIP_DIRS = {".git", ".cache", ".vagrant", "__pycache__", "node_modules"}
CODE_DIRS = ["cmd", "common", "model", "controlplane", "dataplane", "observability",
             "scripts", "tests", "bench", "config"]
TEXT_EXT = {".md", ".cc", ".h", ".hpp", ".cpp", ".c", ".py", ".sh", ".build", ".txt", ".yaml",
            ".yml", ".conf", ".service", ".json", ".rules", ".toml", ".cfg", ".in", ""}
# Raw measurement output: logs and data written by tools, not prose.
RAW_DIRS = [os.path.join("bench", "results")]

findings = []


def report(path, line, kind, what):
    findings.append("%s:%d: %s: %s" % (os.path.relpath(path, ROOT), line, kind, what))


def is_build_dir(name):
    return name == "build" or name.startswith("build-") or name.startswith("build_")


def walk(top):
    """Files under top, skipping VCS, cache and build folders."""
    for d, dirs, files in os.walk(top):
        rel = os.path.relpath(d, ROOT)
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not (rel == "." and is_build_dir(x)))
        for f in sorted(files):
            yield os.path.join(d, f)


def read_lines(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().splitlines()
    except (UnicodeDecodeError, OSError):
        return None


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces -> '-'."""
    h = re.sub(r"`|\*\*|__", "", heading.strip()).lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        out, seen = set(), {}
        in_code = False
        for line in read_lines(path) or []:
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            if in_code:
                continue
            m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                out.add(s if n == 0 else "%s-%d" % (s, n))
            for a in re.findall(r'<a\s+(?:id|name)="([^"]+)"', line):
                out.add(a)
        cache[path] = out
    return cache[path]


def doc_files():
    files = [os.path.join(ROOT, "README.md")]
    d = os.path.join(ROOT, "docs")
    if os.path.isdir(d):
        files += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".md")]
    return [f for f in files if os.path.isfile(f)]


TOP_DIRS = {x for x in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, x))
            and x not in SKIP_DIRS and not x.startswith(".") and not is_build_dir(x)}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
PATH_LIKE = re.compile(r"^[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)+/?$")


def check_doc(path):
    lines = read_lines(path) or []
    base = os.path.dirname(path)
    in_code = False
    for n, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for target in LINK.findall(CODE_SPAN.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.\-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(base, file_part)) if file_part else path
            if not os.path.exists(dest):
                report(path, n, "link", "%s: no such file" % target)
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                report(path, n, "link", "%s: no heading with anchor #%s in %s"
                       % (target, anchor, os.path.relpath(dest, ROOT)))
        for span in CODE_SPAN.findall(line):
            p = span.strip()
            if not PATH_LIKE.match(p) or p.split("/")[0] not in TOP_DIRS:
                continue
            if not os.path.exists(os.path.join(ROOT, p)):
                report(path, n, "path", "`%s` does not exist" % p)


EXTERNAL = re.compile(r"CONTRACT\.md|\.\./shared\b|\bshared/docs/")
TICKET = re.compile(r"\b(?:ISSUE|[Ii]ssues?)\s+#?\d+\b|\bPR\s*#\d+\b|\b[Pp]ull request\s+#?\d+\b|\(#\d+\)")
SELF = os.path.abspath(__file__)


def ticket_scope(rel):
    if rel == "README.md" or rel.startswith("docs" + os.sep):
        return True
    return rel.split(os.sep)[0] in CODE_DIRS and not any(rel.startswith(r + os.sep) for r in RAW_DIRS)


def check_text(path):
    if os.path.abspath(path) == SELF:
        return
    rel = os.path.relpath(path, ROOT)
    if os.path.splitext(path)[1] not in TEXT_EXT or any(rel.startswith(r + os.sep) for r in RAW_DIRS):
        return
    lines = read_lines(path)
    if lines is None:
        return
    tickets = ticket_scope(rel)
    for n, line in enumerate(lines, 1):
        m = EXTERNAL.search(line)
        if m:
            report(path, n, "external", "refers to %s, which is not in the repo (cite docs/contract.md)" % m.group(0))
        if tickets:
            for t in TICKET.finditer(line):
                report(path, n, "ticket", "%r: an issue number means nothing to a reader; say what it is"
                       % t.group(0))


def main():
    for f in doc_files():
        check_doc(f)
    for f in walk(ROOT):
        check_text(f)
    for line in findings:
        print(line)
    print("check_docs: %d finding(s) in %d doc(s)" % (len(findings), len(doc_files())))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
