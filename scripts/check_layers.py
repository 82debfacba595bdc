#!/usr/bin/env python3
"""The layering check: every #include "PART/..." of a source file must be an arrow that
docs/ARCHITECTURE.md allows (its table under "## Allowed includes"). A forbidden include is
named with its file and line, and the check exits 1; the build runs it (src/meson.build), so a
forbidden include fails the build.

  scripts/check_layers.py [--root DIR] [--stamp FILE]

The table's rows are `| where | may include |`: where is a folder of the repository (src/core,
perf) or one file (perf/kernel_bench.cc), the most specific row wins; may include lists parts
(folders of src/, braid for include/braid/, and perf for perf's harness), or "-" for nothing.
A file's own folder is always allowed, and so is an include without a folder when the header
is beside the file; one without a folder that is not beside it (found through an include
path) is refused: it would hide an arrow. The allowed arrows between the parts of src/ must
form no cycle.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^<>"/]+)/[^<>"]*[>"]')
BARE = re.compile(r'^\s*#\s*include\s*"([^<>"/]+)"')
SOURCES = (".h", ".hpp", ".inc", ".cc", ".cu", ".cpp")


def read_table(doc):
    """{where: set of parts}, from the rows after the heading "## Allowed includes"."""
    rules, inside = {}, False
    try:
        f = open(doc, encoding="utf-8", errors="replace")
    except OSError as e:
        sys.exit(f"check_layers: cannot read {doc}: {e.strerror} (is --root the repository?)")
    with f:
        for line in f:
            if line.startswith("## "):
                inside = line.strip() == "## Allowed includes"
                continue
            if not inside or not line.startswith("|"):
                continue
            cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            if len(cells) < 2 or cells[0] in ("where", "") or set(cells[0]) <= {"-", ":"}:
                continue
            allowed = {p.strip().strip("`") for p in cells[1].split(",")} - {"-", ""}
            rules[cells[0].rstrip("/")] = allowed
    if not rules:
        sys.exit(f"check_layers: no table under '## Allowed includes' in {doc}")
    return rules


def rule_for(rel, rules):
    """The most specific row for a file (its path relative to the root), or None."""
    best = None
    for where in rules:
        if rel == where or rel.startswith(where + "/"):
            if best is None or len(where) > len(best):
                best = where
    return best


def part_of(where):
    """The part a row names (src/core -> core), for the cycle check; None outside src/."""
    bits = where.split("/")
    return bits[1] if len(bits) == 2 and bits[0] == "src" else None


def find_cycle(rules):
    graph = {}
    for where, allowed in rules.items():
        part = part_of(where)
        if part:
            graph[part] = {a for a in allowed if a != part}
    state = {}

    def visit(p, path):
        state[p] = 1
        for q in sorted(graph.get(p, ())):
            if state.get(q) == 1:
                return path + [p, q]
            if q in graph and not state.get(q):
                cycle = visit(q, path + [p])
                if cycle:
                    return cycle
        state[p] = 2
        return None

    for p in sorted(graph):
        if not state.get(p):
            cycle = visit(p, [])
            if cycle:
                return cycle[cycle.index(cycle[-1]):]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."),
                    help="the repository (default: this script's)")
    ap.add_argument("--stamp", help="file written when the check passes (for the build)")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    doc = os.path.join(root, "docs", "ARCHITECTURE.md")
    rules = read_table(doc)
    errors = []
    # Braid's parts: the folders of src/ and the public headers (include/braid). An include
    # whose first folder is none of them (<sys/mman.h>, <nlohmann/json.hpp>) is not Braid's.
    src = os.path.join(root, "src")
    parts = {"braid", "perf"} | ({d for d in os.listdir(src)
                                  if os.path.isdir(os.path.join(src, d))}
                                 if os.path.isdir(src) else set())
    for where, allowed in sorted(rules.items()):
        for a in sorted(allowed - parts):
            errors.append(f"{doc}: row {where}: no part named {a!r} (parts: "
                          f"{', '.join(sorted(parts))})")
    cycle = find_cycle(rules)
    if cycle:
        errors.append(f"{doc}: the allowed arrows make a cycle: {' -> '.join(cycle)}")
    checked = 0
    for where in sorted(rules):
        top = os.path.join(root, where)
        if not os.path.exists(top):
            errors.append(f"{doc}: no such folder or file: {where}")
    for top in sorted({w.split("/")[0] for w in rules}):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                where = rule_for(rel, rules)
                if where is None:
                    continue
                own = os.path.basename(os.path.dirname(rel))
                allowed = rules[where]
                checked += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        bare = BARE.match(line)
                        if bare and not os.path.exists(os.path.join(dirpath, bare.group(1))):
                            errors.append(
                                f"{rel}:{number}: includes \"{bare.group(1)}\", which is not "
                                f"beside it: name the header's folder (docs/ARCHITECTURE.md, "
                                f"Allowed includes)")
                            continue
                        m = INCLUDE.match(line)
                        if not m or m.group(1) not in parts or m.group(1) == own or \
                                m.group(1) in allowed:
                            continue
                        said = ", ".join(sorted(allowed)) or "nothing of Braid"
                        errors.append(
                            f"{rel}:{number}: includes \"{m.group(1)}/...\": {where} may include "
                            f"{said} (docs/ARCHITECTURE.md, Allowed includes)")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"check_layers: {len(errors)} problem(s)", file=sys.stderr)
        return 1
    if args.stamp:
        try:
            with open(args.stamp, "w", encoding="utf-8") as f:
                f.write(f"{checked} files\n")
        except OSError as e:
            sys.exit(f"check_layers: cannot write --stamp {args.stamp}: {e.strerror}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
