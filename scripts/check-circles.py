#!/usr/bin/env python3
"""No import circles between the files of a crate.

A file depends on another when it names it in a path: `use crate::a::b`,
`super::x::Y`, `crate::a::f()` (a `use super::{a, b}` group counts each
name). The `#[cfg(test)] mod tests` at the end of a file is not counted: a
test may reach anywhere. A crate root's `mod` lines and its unprefixed
re-exports are not counted either: the root declares everything.

Usage: check-circles.py SRC_DIR...   (exit 1 and each circle printed)
"""
import os
import re
import sys

TESTS = re.compile(r'\n#\[cfg\(test\)\]\s*mod tests \{.*', re.S)
PATH = re.compile(r'\b(crate|super)((?:::(?:\w+|\{[^;]*?\}))+)')


def modules(root):
    """Module path (`a::b`, '' for the root) -> file, for every .rs under root."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            if not name.endswith('.rs'):
                continue
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, root)[:-3].split(os.sep)
            if parts[-1] in ('mod', 'lib', 'main'):
                parts = parts[:-1]
            found['::'.join(parts)] = path
    return found


def targets(tail):
    """The paths a `::a::b` or `::a::{b, c::d}` tail names."""
    if '{' not in tail:
        return [tail]
    head, group = tail.split('{', 1)
    out = []
    for item in group.rstrip('}').split(','):
        item = item.strip().split(' as ')[0].strip()
        out.append(head + item if item and item != 'self' else head.rstrip(':'))
    return out


def edges(found):
    def owner(path):
        segs = path.split('::')
        for i in range(len(segs), -1, -1):
            m = '::'.join(segs[:i])
            if m in found:
                return m
        return None

    out = {m: set() for m in found}
    for m, file in found.items():
        text = TESTS.sub('', open(file, encoding='utf-8').read())
        text = re.sub(r'//.*', '', text)
        here = m.split('::') if m else []
        is_dir_module = os.path.basename(file) in ('mod.rs', 'lib.rs', 'main.rs')
        for hit in PATH.finditer(text):
            for tail in targets(hit.group(2)):
                segs = [s for s in tail.split('::') if s]
                if hit.group(1) == 'crate':
                    base = []
                else:
                    base = here[:] if is_dir_module else here[:-1]
                    while segs and segs[0] == 'super':
                        base, segs = base[:-1], segs[1:]
                t = owner('::'.join(base + segs))
                if t is not None and t != m:
                    out[m].add(t)
    return out


def circles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def main(roots):
    bad = 0
    for root in roots:
        graph = edges(modules(root))
        for comp in circles(graph):
            bad += 1
            print(f'{root}: import circle of {len(comp)} files:', file=sys.stderr)
            for m in comp:
                inside = sorted(t or '<root>' for t in graph[m] if t in comp)
                print(f'  {m or "<root>"} -> {", ".join(inside)}', file=sys.stderr)
    if bad:
        print('break each circle: move what both sides need into a file both can use', file=sys.stderr)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
