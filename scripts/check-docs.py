#!/usr/bin/env python3
"""Keeps the docs honest where a machine can (run by scripts/lint.sh):

1. every `weft COMMAND` docs/cli.md names is a command of `weft --help`
   (and its subcommands'), and every command weft has is in docs/cli.md;
2. every relative link in README.md and docs/*.md resolves to a file;
3. every `.md` file a comment in the code names exists in the repo.

Usage: scripts/check-docs.py PATH-TO-WEFT-BINARY. Prints each problem as
FILE:LINE: what; exits 1 if there is any.
"""
import re
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
weft = sys.argv[1]
problems = []


def commands(args):
    """The subcommands `weft ARGS --help` lists."""
    out = subprocess.run([weft, *args, "--help"], capture_output=True, text=True).stdout
    found, inside = [], False
    for line in out.splitlines():
        if line.startswith("Commands:"):
            inside = True
            continue
        if inside:
            m = re.match(r"^  ([a-z][a-z0-9-]*)\s", line)
            if m and m.group(1) != "help":
                found.append(m.group(1))
            elif not line.startswith("  "):
                break
    return found


have = set()
for top in commands([]):
    have.add(top)
    for sub in commands([top]):
        have.add(f"{top} {sub}")

cli = root / "docs/cli.md"
text = cli.read_text()
named = {}
for n, line in enumerate(text.splitlines(), 1):
    for span in re.findall(r"`([^`]*)`", line) + ([line] if line.startswith(("weft ", "    weft ", "$ weft ")) else []):
        m = re.search(r"(?:^|\s)weft ([a-z][a-z0-9-]*)(?: ([a-z][a-z0-9-]*))?", span)
        if m:
            named.setdefault(m.group(1), n)
            if m.group(2):
                named.setdefault(f"{m.group(1)} {m.group(2)}", n)
                # `weft templates save FILE | list | show NAME`: the others too.
                for alt in re.findall(r"\s\|\s+([a-z][a-z0-9-]*)", span[m.end():]):
                    named.setdefault(f"{m.group(1)} {alt}", n)
tops = {c for c in have if " " not in c}
for cmd, n in sorted(named.items()):
    top = cmd.split(" ")[0]
    if top not in tops:
        problems.append(f"docs/cli.md:{n}: `weft {cmd}` is not a command of weft --help")
    elif " " in cmd and any(c.startswith(top + " ") for c in have) and cmd not in have:
        problems.append(f"docs/cli.md:{n}: `weft {cmd}` is not a subcommand of `weft {top} --help`")
for cmd in sorted(have):
    if cmd not in named:
        problems.append(f"docs/cli.md: `weft {cmd}` (in weft --help) is not documented")

# 2. relative links
for md in [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "CONTRIBUTING.md"]:
    if not md.exists():
        continue
    for n, line in enumerate(md.read_text().splitlines(), 1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = (md.parent / target.split("#")[0]).resolve()
            if not path.exists():
                problems.append(f"{md.relative_to(root)}:{n}: the link {target} leads to no file")

# 3. .md files named in comments
tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True).stdout.split()
names = {Path(p).name for p in tracked} | set(tracked)
comment = re.compile(r"^\s*(//|#)")
for p in tracked:
    if p.startswith("vendor/") or not p.endswith((".rs", ".sh", ".py", ".toml", ".js", ".ts")):
        continue
    try:
        lines = (root / p).read_text().splitlines()
    except (UnicodeDecodeError, FileNotFoundError):
        continue
    for n, line in enumerate(lines, 1):
        if not comment.match(line):
            continue
        for doc in re.findall(r"[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b", line):
            if doc not in names and Path(doc).name not in names:
                problems.append(f"{p}:{n}: names {doc}, which is not in the repo")

for p in problems:
    print(p)
if problems:
    print(f"check-docs: {len(problems)} problem(s)", file=sys.stderr)
    sys.exit(1)
