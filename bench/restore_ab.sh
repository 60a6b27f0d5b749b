#!/usr/bin/env bash
# Two builds' one-shot restore of 1,000 files in the 200,000-file tree, round by round in one
# store, each after an untimed `track` and beside a no-change `track` timed a second later (the
# "restore after a track" case of bench/scale.sh, which measures one build at a time).
#
# usage: bench/restore_ab.sh OLD_BIN NEW_BIN [ROUNDS]     (ROUNDS default 12)
#   BENCH_DIR=DIR    where the tree and the store go (default: a temp dir under $TMPDIR or /tmp,
#                    removed at the end); needs about 3 GB free
#
# Each round runs both builds, the first one first in odd rounds and last in even ones: the
# restores alternate between the two snapshots, and a build that always went first would always
# restore the same way (the two directions differ by tens of milliseconds here). Medians per
# build, and per build and direction, of whole processes (milliseconds); the first round is a
# warm-up and not counted. A markdown table goes to stdout, progress to stderr.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ $# -ge 2 ]] || { echo "usage: $0 OLD_BIN NEW_BIN [ROUNDS]" >&2; exit 2; }
rounds=${3:-12}
source "$root/bench/workdir.sh"
bench_workdir restore-ab
# (Copies: a rebuild while this runs must not change the programs.)
cp "$(realpath "$1")" "$work/old"
cp "$(realpath "$2")" "$work/new"
declare -A name=([old]=$(basename "$1") [new]=$(basename "$2"))
tree=$work/tree data=$work/data

echo "generating the tree" >&2
rm -rf "$tree" "$data"
python3 "$root/fixtures/gen_tree.py" "$tree" --files 200000 --bytes 1600000000 --ignored 20000 >&2
"$work/old" -q --data-dir "$data" -C "$tree" track >"$work/base"
python3 "$root/fixtures/gen_tree.py" "$tree" --change 1000 --seed 7 >&2
"$work/old" -q --data-dir "$data" -C "$tree" track >"$work/edited"
at=edited

ms() { # CMD...: its wall time in milliseconds, its output thrown away
  local s e
  s=$(date +%s%N)
  "$@" >/dev/null
  e=$(date +%s%N)
  echo $(((e - s) / 1000000))
}

: >"$work/rounds"
for i in $(seq 0 "$rounds"); do
  echo "round $i of $rounds" >&2
  order="old new"
  ((i % 2 == 0)) && order="new old"
  for build in $order; do
    if [[ $at == edited ]]; then to=base; else to=edited; fi
    restore=$(ms "$work/$build" -q --data-dir "$data" -C "$tree" restore "$(cat "$work/$to")")
    at=$to
    "$work/$build" -q --data-dir "$data" -C "$tree" track >/dev/null
    # (The kernel may still be freeing the files the restore took out: see scale.sh.)
    sleep 1
    track=$(ms "$work/$build" -q --data-dir "$data" -C "$tree" track)
    ((i == 0)) || echo "$build $to $restore $track" >>"$work/rounds"
  done
done

median() { sort -n | awk '{a[NR]=$1} END {print NR == 0 ? "–" : (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
column() { awk -v b="$1" -v d="$2" -v c="$3" '$1==b && (d=="" || $2==d) {print $c}' "$work/rounds"; }
ratios() { awk -v b="$1" '$1==b {printf "%.3f\n", $3/$4}' "$work/rounds"; }
echo "| build | restore, ms | no-change track, ms | restore / track (min–max) | restore to base / to edited, ms |"
echo "|---|---|---|---|---|"
for build in old new; do
  range=$(ratios $build | sort -n | awk 'NR==1 {lo=$1} {hi=$1} END {print lo "–" hi}')
  echo "| $build (${name[$build]}) |" \
    "$(column $build '' 3 | median) | $(column $build '' 4 | median) |" \
    "**$(ratios $build | median)** ($range) |" \
    "$(column $build base 3 | median) / $(column $build edited 3 | median) |"
done
echo
echo "($rounds rounds, each build once a round; medians.)"
