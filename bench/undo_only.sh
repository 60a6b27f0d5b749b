#!/usr/bin/env bash
# Issue 14 on a 20,000-file tree (100 MB):
# 1. `undo --turn 1 --only --dry-run` (three-way merges) against `undo --turn 1 --dry-run` (a
#    plain range undo), after turn 1 rewrote 200 files, turn 2 200 others, and the user appended
#    a line to 100 of turn 1's files (so 100 merges).
# 2. `rewind diff A B` (renames paired as git's -M) against `git diff -M A B` on the store's trees,
#    after 200 files were moved (half of them edited a little).
# Whole processes, pairs alternated (farm-bench --vs), medians.
#
# usage: bench/undo_only.sh [REWIND_BIN]    (default target/release/rewind)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-$here/target/release/rewind}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
tree="$work/tree"
python3 "$here/fixtures/gen_tree.py" "$tree" --files 20000 --bytes 100000000 --ignored 0 >/dev/null
rw() { "$bin" -q --data-dir "$work/data" -C "$tree" "$@"; }
# The 200 largest text files below 64 KB: turn 1 rewrites the first 200, turn 2 the next 200.
mapfile -t files < <(cd "$tree" && find . -type f -name '*.*' -size -64k -size +2k \
  ! -name '*.bin' ! -name '*.png' ! -name '.gitignore' -printf '%P\n' | sort | head -400)
edit() { # prefix file...: replace every 7th line with "<prefix> <n>"
  local prefix=$1; shift
  for f in "$@"; do awk -v p="$prefix" 'NR % 7 == 3 {print p, NR; next} {print}' "$tree/$f" >"$tree/$f.new"
    mv "$tree/$f.new" "$tree/$f"; done
}
rw turn begin --session s --turn 1 >/dev/null
edit "turn one" "${files[@]:0:200}"
rw turn end --session s --turn 1 >/dev/null
rw turn begin --session s --turn 2 >/dev/null
edit "turn two" "${files[@]:200:200}"
rw turn end --session s --turn 2 >/dev/null
for f in "${files[@]:0:100}"; do echo "the user's line" >>"$tree/$f"; done
echo "## undo --only --dry-run (100 merges) vs a plain undo --dry-run"
farm-bench -n 7 --vs "$bin -q --data-dir $work/data -C $tree undo --session s --turn 1 --dry-run" \
  -- "$bin" -q --data-dir "$work/data" -C "$tree" undo --session s --turn 1 --only --dry-run

a=$(rw track)
mkdir -p "$tree/moved"
for f in "${files[@]:0:200}"; do mv "$tree/$f" "$tree/moved/$(echo "$f" | tr / _)"; done
for f in "${files[@]:0:100}"; do echo "edited after the move" >>"$tree/moved/$(echo "$f" | tr / _)"; done
b=$(rw track)
store=$(rw path)
echo "## rewind diff A B vs git diff -M A B (200 moves)"
farm-bench -n 7 --vs "git --git-dir $store diff -M $a $b" \
  -- "$bin" -q --data-dir "$work/data" -C "$tree" diff "$a" "$b"
cmp <("$bin" -q --data-dir "$work/data" -C "$tree" diff "$a" "$b") \
  <(git --git-dir "$store" diff -M "$a" "$b") && echo "(the two diffs are byte-identical)"
