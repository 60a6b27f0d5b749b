#!/usr/bin/env bash
# Benchmarks for diff-full, restore and revert on a 20,000-file tree with 1,000 modified files,
# each side by side with the git CLI doing the same job:
#   diff-full  vs  git diff --numstat --no-renames + one git cat-file --batch for both sides
#   restore    vs  git read-tree <tree> && git checkout-index -a -f   (its own git dir and work tree)
#   revert of 300 files (no peer; the goal is an absolute 0.3 s)
#
# usage: bench/ops.sh [REWIND_BIN]    (default target/release/rewind; BENCH_RUNS=5)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-$here/target/release/rewind}")
runs=${BENCH_RUNS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
cp "$bin" "$work/rewind"

python3 "$here/fixtures/gen_tree.py" "$work/tree" --files 20000 --bytes 100000000 --ignored 0 >/dev/null
rw() { "$work/rewind" --data-dir "$work/data" -C "$work/tree" "$@"; }
from=$(rw track)
python3 "$here/fixtures/gen_tree.py" "$work/tree" --change 1000 --seed 3 >/dev/null
to=$(rw track)
store=$(rw path)
# The peer's own git dir (a copy of the store: same objects) and work tree.
cp -r "$store" "$work/peer.git"
cp -a "$work/tree" "$work/peer-tree"
git --git-dir "$work/peer.git" --work-tree "$work/peer-tree" read-tree "$to"
git --git-dir "$store" diff --name-only --no-renames "$from" "$to" | awk 'NR <= 300' >"$work/revert-paths"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# time_into FILE CMD...: append CMD's wall time in seconds to FILE.
time_into() {
  local out=$1 s e
  shift
  s=$(date +%s.%N)
  "$@" >/dev/null
  e=$(date +%s.%N)
  echo "$e - $s" | bc -l >>"$out"
}
# row NAME A-TIMES B-TIMES PEER-NAME
row() {
  local a b
  a=$(median <"$2")
  if [ -n "${3:-}" ]; then
    b=$(median <"$3")
    printf '| %s | %.3f s | %s %.3f s | %.2f |\n' "$1" "$a" "$4" "$b" "$(echo "$a / $b" | bc -l)"
  else
    printf '| %s | %.3f s | — | — |\n' "$1" "$a"
  fi
}

peer_diff_full() {
  git --git-dir "$store" diff --numstat --no-renames "$from" "$to" | cut -f3 | while read -r path; do
    printf '%s:%s\n%s:%s\n' "$from" "$path" "$to" "$path"
  done | git --git-dir "$store" cat-file --batch
}
peer_checkout() { # tree
  git --git-dir "$work/peer.git" --work-tree "$work/peer-tree" read-tree "$1" &&
    git --git-dir "$work/peer.git" --work-tree "$work/peer-tree" checkout-index -a -f
}

for _ in $(seq "$runs"); do
  time_into "$work/t-diff" rw diff-full "$from" "$to"
  time_into "$work/t-diff-peer" peer_diff_full
done
# Each restore goes the other way, so every run rewrites the same 1,000 files.
target=$from
for _ in $(seq "$runs"); do
  time_into "$work/t-restore" rw restore "$target"
  time_into "$work/t-restore-peer" peer_checkout "$target"
  if [ "$target" = "$from" ]; then target=$to; else target=$from; fi
done
rw restore "$to" >/dev/null
target=$from
for _ in $(seq "$runs"); do
  time_into "$work/t-revert" xargs -d '\n' "$work/rewind" --data-dir "$work/data" -C "$work/tree" revert "$target" -- <"$work/revert-paths"
  if [ "$target" = "$from" ]; then target=$to; else target=$from; fi
done

echo "| operation (20,000 files, 1,000 modified) | rewind | peer | ratio |"
echo "|---|---|---|---|"
row "diff-full" "$work/t-diff" "$work/t-diff-peer" "git numstat + cat-file"
row "restore" "$work/t-restore" "$work/t-restore-peer" "git read-tree + checkout-index -a -f"
row "revert of 300 files" "$work/t-revert"
