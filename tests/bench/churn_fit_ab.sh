#!/bin/bash
# Two builds of this repository's `mm` (OLD and NEW, paths to binaries) on the same churn
# feature table, alternating PAIRS times (docs/benchmarks.md, "The churn fit against its
# baseline"): `mm fit churn --no-skill` on LAKE (6v6, fitted on all days but the last), the
# feature table built once by NEW into WORK/tables and reused by every run, each run into a
# fresh folder. Prints each run's wall seconds, its fit seconds, the seconds from the fitted
# model to the exported one (the scoring pass, which reads every row and writes
# churn_features.parquet, and the export's refit), and its peak RSS. Run it with nothing else
# on the machine.
#
#     tests/bench/churn_fit_ab.sh WORK LAKE OLD NEW [PAIRS]
set -u
[ $# -ge 4 ] || { sed -n '2,11p' "$0"; exit 2; }
work=$1 lake=$2 old=$3 new=$4 pairs=${5:-2}
mkdir -p "$work"
last=$(ls "$lake/matches" | grep -o 'day=[0-9-]*' | sort | tail -1 | cut -d= -f2)
until=$(date -u -d "$last - 1 day" +%F)
args=(--lake "$lake" --mode tdm-6v6 --until "$until" --tables "$work/tables" --no-skill)
[ -d "$work/tables" ] || "$new" fit churn "${args[@]}" --out "$work/build" > "$work/build.log" 2>&1 \
  || { echo "feature build failed: $work/build.log"; exit 1; }
. "$(dirname "$0")/log_stamp.sh"
run() {  # name binary k
  local out=$work/runs/$1-$3
  rm -rf "$out" && mkdir -p "$out"
  /usr/bin/time -f '%e %M' -o "$out/time" "$2" fit churn "${args[@]}" --out "$out/out" \
    > "$out/log" 2>&1 \
    || { echo "$1 run $3 failed: $out/log"; exit 1; }
  local wall kib fitted a b
  read -r wall kib < "$out/time"
  fitted=$(grep -Eo 'fit [0-9.]+ s, total' "$out/log" | tail -1)
  a=$(stamp "$out/log" 'churn model fitted') && b=$(stamp "$out/log" 'churn model refitted')
  echo "$1 run $3: wall ${wall} s, ${fitted%, total}, scoring and refit" \
    "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", b - a }') s, peak $((kib / 1024)) MiB"
  rm -f "$out/out/churn_features.parquet"
}
for k in $(seq 1 "$pairs"); do
  run old "$old" "$k"
  run new "$new" "$k"
done
