"""Checks that no integration test file is left out of its crate's one test binary.

    python3 tests/docs/test_modules.py [ROOT]

A crate whose Cargo.toml says `autotests = false` builds its integration tests as one binary,
`tests/integration.rs`, with a `mod` line for each file beside it (as ripgrep does: one link
instead of one a file). Cargo then no longer finds a new `tests/*.rs` by itself, so a file
without its `mod` line would never run. Exits 1, naming each such file (or a `mod` line whose
file is missing), 0 otherwise. CI runs it.
"""

import os
import re
import sys

MOD = re.compile(r"^\s*mod\s+(\w+)\s*;", re.M)


def problems(root: str):
    out = []
    for top in ("pipelines", "models"):
        for crate in sorted(os.listdir(os.path.join(root, top))):
            toml = os.path.join(root, top, crate, "Cargo.toml")
            if not os.path.isfile(toml):
                continue
            if not re.search(r"^autotests\s*=\s*false", open(toml, encoding="utf-8").read(), re.M):
                continue
            tests = os.path.join(root, top, crate, "tests")
            main = os.path.join(tests, "integration.rs")
            if not os.path.isfile(main):
                out.append(f"{top}/{crate}: autotests = false but no tests/integration.rs")
                continue
            declared = set(MOD.findall(open(main, encoding="utf-8").read()))
            files = {f[:-3] for f in os.listdir(tests) if f.endswith(".rs")} - {"integration"}
            dirs = {d for d in os.listdir(tests) if os.path.isfile(os.path.join(tests, d, "mod.rs"))}
            for f in sorted(files - declared):
                out.append(f"{top}/{crate}/tests/{f}.rs: no `mod {f};` in tests/integration.rs, so it never runs")
            for m in sorted(declared - files - dirs):
                out.append(f"{top}/{crate}/tests/integration.rs: `mod {m};` has no file")
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    found = problems(root)
    for p in found:
        print(p)
    print(f"test_modules: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
