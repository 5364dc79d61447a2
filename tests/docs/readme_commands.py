#!/usr/bin/env python3
"""Runs the commands of README.md (the book's getting-started page) and checks what they print.

    python3 tests/docs/readme_commands.py --mm target/debug/mm --dir SCRATCH [REPO]

What counts as a command, and what is done with it:

- every line of a ```bash block (a trailing backslash continues it; comments are dropped), and
  every inline code span that starts with `cargo run -- `;
- `cargo run -- ARGS` runs as `MM ARGS` (the binary the test command built: `cargo run` would
  build it again with other features), in SCRATCH, where `data/` is the repository's own, so
  the relative paths of the README (`data/sample`, `out/…`) mean what they mean in a clone;
- `cargo test ...` must be the test command `.ci/run` runs (it runs it before this script);
- a ```text block right after a ```bash block is what the block's commands print: each of
  its lines must be printed, in order, with every number free to differ (a time, a figure that
  moves with the code) but not the words around it.

A command that fails, a README command this script cannot run, or a line of the shown output
that the command no longer prints, fails the check: the README cannot drift from the code.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

NUMBER = re.compile(r"[+-]?\d[\d,]*(\.\d+)?(e[+-]?\d+)?")


def blocks(text):
    """(kind, lines) for each fenced block, in order."""
    out, kind, lines = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if kind is None:
                kind, lines = line[3:].strip() or "plain", []
            else:
                out.append((kind, lines))
                kind = None
            continue
        if kind is not None:
            lines.append(line)
    return out


def commands(lines):
    """The commands of a bash block: continuations joined, comments and blank lines dropped."""
    out, cur = [], ""
    for line in lines:
        line = line.split(" #")[0].rstrip() if not line.lstrip().startswith("#") else ""
        if not line and not cur:
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        if cur.strip():
            out.append(cur.strip())
        cur = ""
    return out


def shape(line):
    """A printed line with its numbers replaced, and its spacing collapsed."""
    return " ".join(NUMBER.sub("#", line).split())


def run(cmd, mm, cwd, ci_text):
    """Runs one README command; returns its stdout."""
    if cmd.startswith("cargo test"):
        if cmd not in ci_text:
            sys.exit(f"readme: `{cmd}` is not the test command .ci/run runs")
        print(f"readme: `{cmd}`: run by .ci/run itself")
        return ""
    if not cmd.startswith("cargo run -- "):
        sys.exit(f"readme: cannot run `{cmd}` (only `cargo run -- ...` and `cargo test ...`)")
    argv = [mm] + shlex.split(cmd[len("cargo run -- "):])
    print(f"readme: {cmd}", flush=True)
    p = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, text=True)
    sys.stdout.write(p.stdout)
    if p.returncode != 0:
        sys.exit(f"readme: `{cmd}` exited with {p.returncode}")
    return p.stdout


def check_shown(shown, printed, cmd):
    """Every line of the README's shown output is printed, in order, numbers aside."""
    want = [shape(l) for l in shown if l.strip()]
    got = [shape(l) for l in printed.splitlines() if l.strip()]
    i = 0
    for w in want:
        while i < len(got) and got[i] != w:
            i += 1
        if i == len(got):
            sys.exit(
                f"readme: `{cmd}` no longer prints this line of the README (numbers aside), "
                f"or not in this order:\n  {w}\nit printed:\n  " + "\n  ".join(got)
            )
        i += 1
    print(f"readme: the {len(want)} lines the README shows for `{cmd}` are printed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repo", nargs="?", default=".")
    ap.add_argument("--mm", required=True, help="the mm binary")
    ap.add_argument("--dir", required=True, help="scratch folder to run in")
    a = ap.parse_args()
    repo = Path(a.repo).resolve()
    mm = str(Path(a.mm).resolve())
    cwd = Path(a.dir)
    cwd.mkdir(parents=True, exist_ok=True)
    if any(cwd.iterdir()):
        sys.exit(f"readme: {cwd} is not empty: the README's commands start from a fresh clone")
    if not (cwd / "data").exists():
        os.symlink(repo / "data", cwd / "data")
    ci_text = (repo / ".ci" / "run").read_text()
    text = (repo / "README.md").read_text()
    ran = 0
    bs = blocks(text)
    for i, (kind, lines) in enumerate(bs):
        if kind != "bash":
            continue
        printed, cmds = "", commands(lines)
        for cmd in cmds:
            printed += run(cmd, mm, cwd, ci_text)
            ran += 1
        if i + 1 < len(bs) and bs[i + 1][0] == "text" and cmds:
            check_shown(bs[i + 1][1], printed, cmds[0])
    # Inline commands, after the blocks (they read what the blocks made).
    for cmd in dict.fromkeys(re.findall(r"`(cargo run -- [^`]+)`", text.replace("\n", " "))):
        run(" ".join(cmd.split()), mm, cwd, ci_text)
        ran += 1
    print(f"readme: {ran} commands run")


if __name__ == "__main__":
    main()
