#!/usr/bin/env bash
# One agent turn that edits 20 files of a 20,000-file tree, side by side with the git CLI doing
# the same job on its own git dir (OpenCode's way):
#   rewind  turn begin; 20 edits; turn end                      (new session turn each run)
#   git     add -A && write-tree; 20 edits; add -A && write-tree; diff --numstat
# then again with a second session's turn left open, so every `turn end` works out which
# changes were made while both were open (attribution).
#
# usage: bench/turn.sh [REWIND_BIN]    (default target/release/rewind; BENCH_RUNS=9)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-$here/target/release/rewind}")
runs=${BENCH_RUNS:-9}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
python3 "$here/fixtures/gen_tree.py" "$work/tree" --files 20000 --bytes 100000000 --ignored 0 >/dev/null
cp -a "$work/tree" "$work/peer-tree"
git --git-dir "$work/peer.git" init -q --bare
rw() { "$bin" -q --data-dir "$work/data" -C "$work/tree" "$@" >/dev/null; }
g() { git --git-dir "$work/peer.git" --work-tree "$work/peer-tree" "$@"; }
rewind_turn() { # (runs in a subshell: the turn counter lives in a file)
  local n=$(($(cat "$work/n" 2>/dev/null || echo 0) + 1))
  echo "$n" >"$work/n"
  rw turn begin --session s --turn "$n"
  for i in $(seq 1 20); do echo "edit $n" >>"$work/tree/bench-$i.txt"; done
  rw turn end --session s --turn "$n"
}
git_turn() {
  g add -A && a=$(g write-tree)
  for i in $(seq 1 20); do echo "edit" >>"$work/peer-tree/bench-$i.txt"; done
  g add -A && b=$(g write-tree) && g diff --numstat "$a" "$b" >/dev/null
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
seconds() { local s e; s=$(date +%s.%N); "$@"; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
measure() {
  rewind_turn; git_turn # warm-up
  : >"$work/r" ; : >"$work/g" ; : >"$work/ratio"
  for _ in $(seq "$runs"); do
    r=$(seconds rewind_turn); p=$(seconds git_turn)
    echo "$r" >>"$work/r"; echo "$p" >>"$work/g"; echo "$r / $p" | bc -l >>"$work/ratio"
  done
  printf '| %s | %.3f s | %.3f s | **%.2f** |\n' "$1" "$(median <"$work/r")" "$(median <"$work/g")" "$(median <"$work/ratio")"
}
echo "| case | rewind | git | rewind / git |"
echo "|---|---|---|---|"
measure "one session"
rw turn begin --session other --turn 1
measure "another session's turn open"
