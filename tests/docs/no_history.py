"""Fails when a tracked file outside the changelog and the benchmarks page carries history:
a date from the project's own time (2025 on; the data's dates are earlier), a commit hash named
as one, or an absolute path of a developer's machine.

    python3 tests/docs/no_history.py [ROOT]

Dates, hashes and before/after runs belong in commit messages and CHANGELOG.md; the current
figures, with their commands, in docs/benchmarks.md (CONTRIBUTING.md).
"""

import re
import subprocess
import sys
from pathlib import Path

ALLOWED = {"CHANGELOG.md", "docs/benchmarks.md", "Cargo.lock", "tests/docs/no_history.py"}
RULES = [
    ("a date", re.compile(r"\b20(2[5-9]|[3-9]\d)-(0[1-9]|1[0-2])-([0-2]\d|3[01])\b")),
    ("a commit hash", re.compile(r"\b(commit|main at|HEAD at)\s+[0-9a-f]{7,40}\b", re.I)),
    ("a machine path", re.compile(r"(^|[\s\"'(=`])/(work|root|home/[a-z]\w*|Users/\w+)/")),
]


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    files = subprocess.run(
        ["git", "-C", str(root), "ls-files"], check=True, capture_output=True, text=True
    ).stdout.split()
    found = []
    for rel in files:
        if rel in ALLOWED:
            continue
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files (Parquet, PNG) carry no prose
        for n, line in enumerate(text.splitlines(), 1):
            for what, rx in RULES:
                if rx.search(line):
                    found.append(f"{rel}:{n}: {what}: {line.strip()[:120]}")
    for f in found:
        print(f)
    if found:
        print(f"{len(found)} lines carry history outside CHANGELOG.md and docs/benchmarks.md")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
