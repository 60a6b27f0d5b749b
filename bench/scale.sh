#!/usr/bin/env bash
# Issue 16 at 200,000 files: restore and the first snapshot, each beside its yardstick in one run.
#
# usage: bench/scale.sh [REWIND_BIN]     (default: target/release/rewind)
#   BENCH_DIR=DIR    where the tree and the stores go (default: a temp dir under $TMPDIR or /tmp,
#                    removed at the end); needs about 7 GB free
#   BENCH_RUNS=9     pairs for the restore case;  BENCH_FIRST_RUNS=3  pairs for the first snapshot
#
# Tree: `gen_tree.py --files 200000 --bytes 1600000000 --ignored 20000` (180,000 files
# snapshotted, 1.6 GB, mostly text).
#   restore:  `rewind restore` of 1,000 changed files (`gen_tree.py --change 1000 --seed 7`),
#             back and forth between the two snapshots, undo point included (its snapshot finds
#             the 1,000 files the last restore wrote), against a no-change `rewind track` of a
#             copy of the tree; runs alternate (A B A B ...), ratio per pair.
#   restore after a track: the same restores, each after an untimed `track` (as a runtime takes
#             at every step), so that the undo point is a no-change snapshot, against a timed
#             no-change `track` of the same tree a second after; ratio per round.
#   first:    the same tree plus 100 incompressible 8 MB assets (800 MB), size cap lifted
#             (`track --max-file-size 1000000000`: every file in), fresh data dir each run, against
#             `git add --all . && git write-tree` on a fresh `git init --bare` dir; stores are
#             removed between runs, outside the timings. Wall time, user+system time, peak memory.
# Markdown tables go to stdout, progress to stderr.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$(realpath "${1:-$root/target/release/rewind}")
runs=${BENCH_RUNS:-9}
first_runs=${BENCH_FIRST_RUNS:-3}
command -v farm-bench >/dev/null || { echo "farm-bench is required" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "/usr/bin/time (GNU time) is required" >&2; exit 2; }
source "$root/bench/workdir.sh"
bench_workdir scale
cp "$bin" "$work/rewind" # a rebuild while this runs must not change the program
rw=$work/rewind
tree=$work/tree

echo "generating the tree" >&2
rm -rf "$tree" "$work/data"
python3 "$root/fixtures/gen_tree.py" "$tree" --files 200000 --bytes 1600000000 --ignored 20000 >&2

timed() { # OUT CMD...: append "wall cpu peak_kb" of CMD (a shell command) to OUT
  local out=$1 s e
  shift
  s=$(date +%s.%N)
  /usr/bin/time -f '%U %S %M' -o "$work/time.txt" sh -c "$1" >/dev/null
  e=$(date +%s.%N)
  read -r u sy m <"$work/time.txt"
  echo "$(echo "$e - $s" | bc) $(echo "$u + $sy" | bc) $m" >>"$out"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
col() { awk -v c="$2" '{print $c}' "$1" | median | awk -v f="${3:-%.1f}" '{printf f, $1}'; }

# --- restore of 1,000 files against a no-change track -----------------------------------------
"$rw" -q --data-dir "$work/data" -C "$tree" track >"$work/base"
python3 "$root/fixtures/gen_tree.py" "$tree" --change 1000 --seed 7 >&2
"$rw" -q --data-dir "$work/data" -C "$tree" track >"$work/edited"
# The no-change track runs on a copy with its own store: on the restored tree it would be the
# first to see the 1,000 restored files (and the restore's own track would find none changed).
rm -rf "$tree-copy" "$work/data-copy"
cp -a "$tree" "$tree-copy"
"$rw" -q --data-dir "$work/data-copy" -C "$tree-copy" track >/dev/null
echo edited >"$work/at"
cat >"$work/toggle.sh" <<SH
#!/bin/sh
# Restore the snapshot the tree is not at.
if [ "\$(cat $work/at)" = edited ]; then to=base; else to=edited; fi
"$rw" -q --data-dir "$work/data" -C "$tree" restore "\$(cat $work/\$to)" >/dev/null && echo \$to >"$work/at"
SH
chmod +x "$work/toggle.sh"
echo "restore vs no-change track, $runs pairs" >&2
out=$(farm-bench -n "$runs" --timeout 1800 --vs "$rw -q --data-dir $work/data-copy -C $tree-copy track" -- "$work/toggle.sh" 2>&1)
echo "$out" >&2
med() { echo "$out" | awk -v k="$1" '$0 ~ "^"k {print $(NF-1)}'; }
echo "| case | rewind restore (1,000 files) | rewind no-change track | restore / track, wall (min–max) | restore / track, CPU | peak memory restore / track |"
echo "|---|---|---|---|---|---|"
echo "| 200,000 files, back-to-back restores ($runs pairs) | $(med 'A wall s') s | $(med 'B wall s') s | **$(med 'A/B wall')** ($(echo "$out" | awk '/^A\/B wall/ {print $3 "–" $5}')) | $(med 'A/B cpu') | $(med 'A peak MiB') / $(med 'B peak MiB') MiB |"
echo
# The same restores, each after the runtime's snapshot: an agent runtime tracks at every step,
# so the undo point a restore takes is usually a no-change snapshot (issue 16's model: "the
# undo-point snapshot is one no-change track"). Each round restores the other snapshot, tracks
# once untimed (it records the files the restore wrote), then times a no-change track of the
# same tree; the ratio is taken round by round.
rm -f "$work/after-restore" "$work/after-track"
"$rw" -q --data-dir "$work/data" -C "$tree" track >/dev/null
for i in $(seq 1 "$runs"); do
  echo "restore after a track, round $i of $runs" >&2
  # (The target is picked outside the timing: only `rewind restore` is timed, as the track is.)
  if [ "$(cat "$work/at")" = edited ]; then to=base; else to=edited; fi
  timed "$work/after-restore" "exec '$rw' -q --data-dir '$work/data' -C '$tree' restore $(cat "$work/$to")"
  echo "$to" >"$work/at"
  "$rw" -q --data-dir "$work/data" -C "$tree" track >/dev/null
  # (The kernel may still be freeing the files the restore took out, up to 0.3 s after it
  # exited: a track timed then would share the machine with that.)
  sleep 1
  timed "$work/after-track" "exec '$rw' -q --data-dir '$work/data' -C '$tree' track"
done
pair_ratios() { paste "$work/after-restore" "$work/after-track" | awk -v c="$1" '{printf "%.3f\n", $c/$(c+3)}'; }
echo "| case | rewind restore (1,000 files) | rewind no-change track | restore / track, wall (min–max) | restore / track, CPU | peak memory restore / track |"
echo "|---|---|---|---|---|---|"
echo "| 200,000 files, restore after a track ($runs rounds) | $(col "$work/after-restore" 1 %.3f) s | $(col "$work/after-track" 1 %.3f) s | **$(pair_ratios 1 | median)** ($(pair_ratios 1 | sort -n | awk 'NR==1 {lo=$1} {hi=$1} END {print lo "–" hi}')) | $(pair_ratios 2 | median) | $(awk '{print $3}' "$work/after-restore" | median | awk '{printf "%d", $1 / 1024}') / $(awk '{print $3}' "$work/after-track" | median | awk '{printf "%d", $1 / 1024}') MiB |"
echo
rm -rf "$work/data" "$work/data-copy" "$tree-copy"

# --- first snapshot, cap lifted, with 800 MB of incompressible assets --------------------------
python3 - "$tree/big-assets" <<'PY'
import os, random, sys
os.makedirs(sys.argv[1], exist_ok=True)
rng = random.Random(16)
for i in range(100):
    with open(os.path.join(sys.argv[1], f"asset-{i:03}.bin"), "wb") as f:
        f.write(rng.randbytes(8 << 20))
PY
rm -f "$work/first-rewind" "$work/first-git"
for i in $(seq 1 "$first_runs"); do
  echo "first snapshot, pair $i of $first_runs" >&2
  rm -rf "$work/data" "$work/git"
  sync
  timed "$work/first-rewind" "exec '$rw' -q --data-dir '$work/data' -C '$tree' track --max-file-size 1000000000"
  rm -rf "$work/data"
  git init -q --bare "$work/git"
  sync
  timed "$work/first-git" "git --git-dir '$work/git' --work-tree '$tree' add --all . && git --git-dir '$work/git' write-tree"
  rm -rf "$work/git"
done
ratios=$(paste "$work/first-rewind" "$work/first-git" | awk '{printf "%.3f\n", $1/$4}' | median)
spread=$(paste "$work/first-rewind" "$work/first-git" | awk '{printf "%.3f\n", $1/$4}' | sort -n | awk 'NR==1 {lo=$1} {hi=$1} END {print lo "–" hi}')
echo "| first snapshot, cap lifted ($first_runs pairs) | wall | CPU (user+system) | peak memory |"
echo "|---|---|---|---|"
echo "| rewind | $(col "$work/first-rewind" 1) s | $(col "$work/first-rewind" 2) s | $(awk '{print $3}' "$work/first-rewind" | median | awk '{printf "%d", $1 / 1024}') MiB |"
echo "| git | $(col "$work/first-git" 1) s | $(col "$work/first-git" 2) s | $(awk '{print $3}' "$work/first-git" | median | awk '{printf "%d", $1 / 1024}') MiB |"
cpu_ratio=$(paste "$work/first-rewind" "$work/first-git" | awk '{printf "%.3f\n", $2/$5}' | median)
echo "| rewind / git | **$ratios** ($spread) | $cpu_ratio | |"
