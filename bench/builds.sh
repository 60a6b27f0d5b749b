#!/usr/bin/env bash
# Two builds of rewind side by side (`farm-bench --vs`, runs alternated pair by pair), on the
# cases docs/benchmarks.md quotes: track (first snapshot, no change, 20 files changed),
# diff-full and restore of 1,000 changed files, revert of one directory (lib/), prune (a repack), and
# one agent turn (begin, 20 edits, end). BENCH_CASES picks some of them.
# Prints a markdown table of NEW/OLD wall-time ratios (median of the pairs, min–max).
#
# usage: bench/builds.sh OLD_BIN NEW_BIN     (BENCH_RUNS=9; BENCH_FILES=50000 BENCH_BYTES=400000000 BENCH_IGNORED=5000)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
old=$(realpath "$1") new=$(realpath "$2")
runs=${BENCH_RUNS:-9}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
python3 "$here/fixtures/gen_tree.py" "$work/tree" --files "${BENCH_FILES:-50000}" \
  --bytes "${BENCH_BYTES:-400000000}" --ignored "${BENCH_IGNORED:-5000}" >/dev/null
cp -a "$work/tree" "$work/tree-new"
mv "$work/tree" "$work/tree-old"

# One script per case, run as `sh CASE.sh BIN WHICH` (WHICH: old or new, for its own tree and store).
cat >"$work/first.sh" <<'SH'
rm -rf "$W/first-$2" && exec "$1" -q --data-dir "$W/first-$2" -C "$W/tree-$2" track
SH
cat >"$work/nochange.sh" <<'SH'
exec "$1" -q --data-dir "$W/data-$2" -C "$W/tree-$2" track
SH
cat >"$work/changed.sh" <<'SH'
for i in $(seq 1 20); do echo "change $$" >>"$W/tree-$2/bench-$i.txt"; done
exec "$1" -q --data-dir "$W/data-$2" -C "$W/tree-$2" track
SH
cat >"$work/difffull.sh" <<'SH'
exec "$1" -q --data-dir "$W/data-$2" -C "$W/tree-$2" diff-full "$(cat "$W/base-$2")"
SH
cat >"$work/restore.sh" <<'SH'
"$1" -q --data-dir "$W/data-$2" -C "$W/tree-$2" restore "$(cat "$W/base-$2")" >/dev/null
exec "$1" -q --data-dir "$W/data-$2" -C "$W/tree-$2" restore "$(cat "$W/edited-$2")"
SH
cat >"$work/revert.sh" <<'SH'
"$1" -q --data-dir "$W/data-$2" -C "$W/tree-$2" revert "$(cat "$W/base-$2")" -- lib >/dev/null
exec "$1" -q --data-dir "$W/data-$2" -C "$W/tree-$2" revert "$(cat "$W/edited-$2")" -- lib
SH
cat >"$work/prune.sh" <<'SH'
exec "$1" -q --data-dir "$W/data-$2" -C "$W/tree-$2" prune --retention 7d
SH
cat >"$work/turn.sh" <<'SH'
n=$(($(cat "$W/n-$2" 2>/dev/null || echo 0) + 1)); echo "$n" >"$W/n-$2"
"$1" -q --data-dir "$W/data-$2" -C "$W/tree-$2" turn begin --session s --turn "$n" >/dev/null
for i in $(seq 1 20); do echo "edit $n" >>"$W/tree-$2/bench-$i.txt"; done
exec "$1" -q --data-dir "$W/data-$2" -C "$W/tree-$2" turn end --session s --turn "$n"
SH
export W="$work"
for which in old new; do
  bin=$old; [ "$which" = new ] && bin=$new
  "$bin" -q --data-dir "$work/data-$which" -C "$work/tree-$which" track >"$work/base-$which"
  # 1,000 files changed since the base snapshot (diff-full and restore compare the two).
  python3 "$here/fixtures/gen_tree.py" "$work/tree-$which" --change 1000 --seed 7 >/dev/null
  "$bin" -q --data-dir "$work/data-$which" -C "$work/tree-$which" track >"$work/edited-$which"
done

echo "| case | new / old (median of $runs pairs, min–max) |"
echo "|---|---|"
for case in ${BENCH_CASES:-first nochange changed difffull restore revert prune turn}; do
  out=$(farm-bench -n "$runs" --timeout 1800 --vs "sh $work/$case.sh $old old" -- sh "$work/$case.sh" "$new" new 2>&1)
  ratio=$(echo "$out" | awk '/^A\/B wall/ {printf "%.2f (%.2f–%.2f)", $4, $3, $5}')
  echo "| $case | ${ratio:-failed: $(echo "$out" | tail -2 | tr '\n' ' ')} |"
done
