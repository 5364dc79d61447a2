#!/bin/bash
# `mm fit churn` on a bench lake against issue 52's baseline, in the same run (docs/benchmarks.md,
# "The churn fit against its baseline (11.9M and 111.4M rows)"). Builds BASE's `mm` (default
# 880a391, the commit the issue was measured on) in a worktree WORK/base with a target directory
# of its own (a full build: about half an hour on 2 cores), unless MM_BASE_BIN names one already
# built; simulates the lake once (250,000 players over DAYS days, default 28, 6v6 only) with the
# current `mm` (MM_BIN, default target/debug/mm, or $CARGO_TARGET_DIR/debug/mm); then runs `mm
# fit churn` with its defaults (no skill feature: the baseline's default) PAIRS times for each
# binary, alternating, each into fresh folders, and prints each run's wall seconds, the feature
# build and fit seconds it reports, its peak RSS, the chosen C and the range of its
# cross-validation fits' seconds, and after each pair how far the two models are apart
# (tests/bench/churn_models_diff.py). Each run's feature table and
# exported feature rows are deleted after it (its model and metrics are kept). DAYS=280 gives
# 111.4M rows: a 15 GB lake, and about 21 GB more while a run works. Run it with nothing else on
# the machine. With --report, prints the lines of the runs already in WORK/runs from their logs
# and runs nothing.
#
#     tests/bench/churn_fit_vs.sh WORK [BASE] [PAIRS] [DAYS]
#     tests/bench/churn_fit_vs.sh --report WORK
set -u
[ $# -ge 1 ] || { sed -n '2,19p' "$0"; exit 2; }
. "$(dirname "$0")/log_stamp.sh"
# The fit's seconds (printed by both binaries) split into the training sample's read and the
# cross-validation with the final fit: the second part from the log's "training sample" line to
# its "model fitted" line, the sample the rest (the rows' counts before it are not in the fit).
fit_split() {  # log
  local fit a b
  fit=$(grep -Eo 'features [0-9.]+ s, fit [0-9.]+ s' "$1" | tail -1 | grep -Eo '[0-9.]+ s$')
  a=$(stamp "$1" 'churn training sample') && b=$(stamp "$1" 'churn model fitted') \
    && awk -v f="${fit% s}" -v a="$a" -v b="$b" \
      'BEGIN { printf "fit %.1f s: the training sample %.1f s, cross-validation and final fit %.1f s", f, f - (b - a), b - a }'
}
report() {  # run folder, its label
  local wall kib features c
  read -r wall kib < "$1/time"
  features=$(grep -Eo 'features [0-9.]+ s, fit' "$1/log" | tail -1)
  c=$(grep -Eo 'C = [0-9.e-]+' "$1/log" | tail -1)
  echo "$2: wall ${wall} s, ${features% fit} $(fit_split "$1/log"), peak $((kib / 1024)) MiB, ${c}"
  # Each cross-validation fit's seconds, as the log's "fitted fold=..." lines give them.
  grep -Eo 'fitted fold=.* seconds=[0-9.]+' "$1/log" | grep -Eo '[0-9.]+$' | sort -g \
    | awk '{ v[NR] = $1 } END { if (NR) printf "  %d cross-validation fits, %.2f to %.2f s each\n", NR, v[1], v[NR] }'
}
if [ "$1" = --report ]; then
  for d in "$2"/runs/*/; do
    [ -f "$d/time" ] && report "$d" "$(basename "$d")"
  done
  exit 0
fi
work=$1
base=${2:-880a391}
pairs=${3:-1}
days=${4:-28}
repo=$(cd "$(dirname "$0")/../.." && pwd)
mm_new=${MM_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/mm}
mkdir -p "$work"
work=$(cd "$work" && pwd)
mm_base=${MM_BASE_BIN:-$work/base-target/debug/mm}
if [ ! -x "$mm_base" ]; then
  [ -d "$work/base" ] || git -C "$repo" worktree add -f "$work/base" "$base" >/dev/null || exit 1
  (cd "$work/base" && CARGO_TARGET_DIR=$work/base-target cargo build --locked -p mm-cli) \
    > "$work/base-build.log" 2>&1 || { echo "baseline build failed: $work/base-build.log"; exit 1; }
fi
lake=$work/lake
if [ ! -d "$lake/matches" ]; then
  "$mm_new" simulate --lake "$lake" --players 250000 --days "$days" --duel-share 0 -q || exit 1
fi
# Fit on all days but the last (the scoring window is the last day's labels); the simulator's
# first day is 2024-01-01.
until=$(date -u -d "2024-01-01 + $((days - 2)) days" +%F)
run() {  # name binary k
  local out=$work/runs/$1-$3
  rm -rf "$out" && mkdir -p "$out"
  /usr/bin/time -f '%e %M' -o "$out/time" "$2" fit churn --lake "$lake" --mode tdm-6v6 \
    --until $until --out "$out/out" --tables "$out/tables" --rebuild $4 > "$out/log" 2>&1 \
    || { echo "$1 run $3 failed: $out/log"; exit 1; }
  report "$out" "$1 run $3"
  rm -rf "$out/tables" "$out/out/churn_features.parquet"
}
for k in $(seq 1 "$pairs"); do
  run base "$mm_base" "$k" ""
  run current "$mm_new" "$k" "--no-skill"
  python3 "$repo/tests/bench/churn_models_diff.py" "$work/runs/base-$k/out/churn_model.json" \
    "$work/runs/current-$k/out/churn_model.json"
done
