#!/usr/bin/env bash
# Line-diff timing of two rewind builds side by side (e.g. before and after a diff change), on a
# 20,000-file tree (100 MB), runs interleaved so machine load hits both alike:
#   rewrite: 1,000 files rewritten (`gen_tree.py --change 1000`: nearly every line differs)
#   edits:   1,000 text files with every 40th line edited (small, scattered hunks)
# For each: `diff-full` (numstat counts + texts) and `diff` (unified text); medians of BENCH_RUNS,
# and a note on stderr when the two builds' outputs differ.
#
# usage: bench/diff.sh OLD_BIN NEW_BIN    (BENCH_RUNS=7)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
old=$(realpath "$1")
new=$(realpath "$2")
runs=${BENCH_RUNS:-7}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"

python3 "$here/fixtures/gen_tree.py" "$work/tree" --files 20000 --bytes 100000000 --ignored 0 >/dev/null
rw() { "$old" --data-dir "$work/data" -C "$work/tree" "$@"; }
base=$(rw track)
python3 "$here/fixtures/gen_tree.py" "$work/tree" --change 1000 --seed 3 2>/dev/null
rewrite=$(rw track)
rw restore "$base" >/dev/null
python3 - "$work/tree" <<'PY'
import os, random, sys
root = sys.argv[1]
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
               if not os.path.islink(os.path.join(d, f)) and not f.startswith("."))
rng = random.Random(5)
done = 0
for path in rng.sample(files, len(files)):
    data = open(path, "rb").read()
    if b"\0" in data[:8000] or data.count(b"\n") < 40:
        continue
    lines = data.split(b"\n")
    for i in range(rng.randrange(40), len(lines), 40):
        lines[i] = b"edited " + lines[i]
    open(path, "wb").write(b"\n".join(lines))
    done += 1
    if done == 1000:
        break
PY
edits=$(rw track)

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
time_into() { # FILE CMD...: append CMD's wall time in seconds to FILE
  local out=$1 s e
  shift
  s=$(date +%s.%N)
  "$@" >/dev/null
  e=$(date +%s.%N)
  echo "$e - $s" | bc -l >>"$out"
}
echo "| case | command | old build | new build | new / old |"
echo "|---|---|---|---|---|"
for case in rewrite edits; do
  to=${!case}
  for cmd in diff-full diff; do
    for _ in $(seq "$runs"); do
      for b in old new; do
        time_into "$work/t-$case-$cmd-$b" "${!b}" --data-dir "$work/data" -C "$work/tree" "$cmd" "$base" "$to"
      done
    done
    for b in old new; do "${!b}" --data-dir "$work/data" -C "$work/tree" "$cmd" "$base" "$to" >"$work/out-$b"; done
    cmp -s "$work/out-old" "$work/out-new" || echo "note: $case $cmd: the builds' outputs differ" >&2
    a=$(median <"$work/t-$case-$cmd-old")
    b=$(median <"$work/t-$case-$cmd-new")
    printf '| %s | `%s` | %.3f s | %.3f s | %.2f |\n' "$case" "$cmd" "$a" "$b" "$(echo "$b / $a" | bc -l)"
  done
done
