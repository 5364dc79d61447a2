"""Lists the non-test Rust functions longer than a limit (issue 51: 120 lines), longest first.

    python3 tests/docs/long_functions.py [ROOT] [--limit 120]

A function is counted from its `fn` line to its closing brace, by brace depth (braces inside
strings and comments are counted too: close enough for a size check). Code after a
`#[cfg(test)]` line in a file, and the `tests/` folders, are skipped. Exits 1 when any
function is over the limit (CI runs it), 0 otherwise.
"""

import os
import re
import sys

FN = re.compile(r"\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)")


def long_functions(root: str, limit: int):
    found = []
    for top in ("pipelines", "models"):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if x not in ("tests", "target")]
            for f in files:
                if not f.endswith(".rs"):
                    continue
                path = os.path.join(d, f)
                lines = open(path, encoding="utf-8").read().split("\n")
                i = 0
                while i < len(lines):
                    if re.match(r"\s*#\[cfg\(test\)\]", lines[i]):
                        break
                    m = FN.match(lines[i])
                    if not m:
                        i += 1
                        continue
                    j, depth, opened = i, 0, False
                    while j < len(lines):
                        depth += lines[j].count("{") - lines[j].count("}")
                        opened = opened or "{" in lines[j]
                        if opened and depth <= 0:
                            break
                        if not opened and lines[j].rstrip().endswith(";"):
                            break
                        j += 1
                    n = j - i + 1
                    if opened and n > limit:
                        found.append((n, os.path.relpath(path, root), m.group(6)))
                    i = j + 1 if opened else i + 1
    return sorted(found, reverse=True)


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    limit = int(sys.argv[sys.argv.index("--limit") + 1]) if "--limit" in sys.argv else 120
    root = args[0] if args and args[0] != str(limit) else "."
    rows = long_functions(root, limit)
    for n, path, name in rows:
        print(f"{n:5d}  {path}  {name}")
    print(f"{len(rows)} functions over {limit} lines")
    return 1 if rows else 0


if __name__ == "__main__":
    sys.exit(main())
