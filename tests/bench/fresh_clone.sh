#!/bin/bash
# The README's two commands from a fresh clone, timed as a newcomer meets them
# (docs/benchmarks.md, Build time). Clones REPO (default: this checkout) into WORK/mm and runs,
# with an empty cargo home (WORK/cargo-home: every crate is downloaded by the first command)
# and an empty target directory: the first command with --timings, the second command's build
# (`cargo test --workspace --no-run`), then the tests. Prints each step's wall time; then
# `tests/bench/timings.py WORK/mm/target/cargo-timings/cargo-timing.html` sums the first
# command's compilation by crate family. WORK must not exist. About half an hour on 2 cores;
# run it with nothing else on the machine.
#
#     tests/bench/fresh_clone.sh WORK [REPO]
set -u
[ $# -ge 1 ] || { sed -n '2,11p' "$0"; exit 2; }
work=$1
repo=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
[ -e "$work" ] && { echo "$work exists" >&2; exit 2; }
mkdir -p "$work"
export CARGO_HOME=$work/cargo-home
unset CARGO_TARGET_DIR
git clone -q "$repo" "$work/mm" && cd "$work/mm" || exit 1
echo "commit $(git rev-parse --short HEAD)"
t0=$(date +%s)
cargo run --timings -- retrain data/sample --simulate data/world.toml > "$work/run.log" 2>&1 || { echo "first command failed: $work/run.log"; exit 1; }
t1=$(date +%s)
cargo test --workspace --no-run > "$work/test-build.log" 2>&1 || { echo "test build failed: $work/test-build.log"; exit 1; }
t2=$(date +%s)
cargo test --workspace > "$work/test.log" 2>&1 || { echo "tests failed: $work/test.log"; exit 1; }
t3=$(date +%s)
echo "first command $((t1 - t0)) s; test build $((t2 - t1)) s; tests $((t3 - t2)) s; total $((t3 - t0)) s"
