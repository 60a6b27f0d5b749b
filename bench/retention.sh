#!/usr/bin/env bash
# Store size after a simulated busy week (issue 18), against a `git gc --aggressive` copy of
# the same store:
#   a 2,000-file / 20 MB project (fixtures/gen_tree.py); one session a day; every hour a turn
#   (`turn begin`, small edits to FILES_PER_TURN text files, `turn end`) and a `prune`, the
#   clock (REWIND_NOW) stepping an hour per turn.
# Prints the objects' size (apparent bytes and disk blocks, as `du`), the same for a copy of the
# store after `git gc --aggressive --prune=now`, their ratio (goal <= 1.5), and refs/ + logs/ +
# packed-refs against objects (goal <= 10%).
#
# usage: bench/retention.sh [REWIND_BIN]    (default target/release/rewind; DAYS=7, FILES_PER_TURN=5)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-$here/target/release/rewind}")
days=${DAYS:-7}
per_turn=${FILES_PER_TURN:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
cp "$bin" "$work/rewind"

python3 "$here/fixtures/gen_tree.py" "$work/tree" --files 2000 --bytes 20000000 --ignored 100 >/dev/null 2>&1
start=$(date -u -d 2026-01-05T08:00:00Z +%s)
now=
rw() { REWIND_NOW=$now "$work/rewind" --data-dir "$work/data" -C "$work/tree" "$@"; }
at() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }

prune_secs=0
for hour in $(seq 0 $((days * 24 - 1))); do
  t=$((start + hour * 3600))
  session=day$((hour / 24))
  now=$(at "$t")
  rw turn begin --session="$session" --turn="t$hour" >/dev/null
  python3 "$here/bench/edit_files.py" "$work/tree" "$per_turn" "$hour"
  now=$(at $((t + 1800)))
  rw turn end --session="$session" --turn="t$hour" >/dev/null
  now=$(at $((t + 3000)))
  s=$(date +%s.%N)
  rw prune >/dev/null
  prune_secs=$(echo "$prune_secs + $(date +%s.%N) - $s" | bc -l)
done
store=$(rw path)

# bytes DIR...: apparent size and disk blocks (bytes) of what exists among DIR...
bytes() {
  local existing=() p
  for p in "$@"; do [ -e "$p" ] && existing+=("$p"); done
  [ ${#existing[@]} -eq 0 ] && { echo "0 0"; return; }
  echo "$(du -scb "${existing[@]}" | tail -1 | cut -f1) $(du -sc -B1 "${existing[@]}" | tail -1 | cut -f1)"
}
loose() { git --git-dir "$1" count-objects -v | awk '/^count:/ {print $2}'; }
git --git-dir "$store" fsck --strict --no-progress >/dev/null 2>"$work/fsck.err" || { cat "$work/fsck.err"; exit 1; }

cp -a "$store" "$work/gc.git"
git --git-dir "$work/gc.git" gc -q --aggressive --prune=now 2>/dev/null # (a notice on the unborn HEAD)

read -r ours_b ours_d < <(bytes "$store/objects")
read -r git_b git_d < <(bytes "$work/gc.git/objects")
read -r refs_b refs_d < <(bytes "$store/refs" "$store/logs" "$store/packed-refs")
commits=$(git --git-dir "$store" rev-list --all --reflog | wc -l)
echo "$((days * 24)) turns in $days sessions, $per_turn files edited per turn, a prune an hour"
echo "(hourly prunes: $(printf %.1f "$prune_secs") s in all); store: $(loose "$store") loose objects, $commits commits reachable"
echo
echo "| | apparent bytes | disk (du) |"
echo "|---|---|---|"
echo "| objects/ | $ours_b | $ours_d |"
echo "| objects/ of a git gc --aggressive copy | $git_b | $git_d |"
printf '| ratio (goal <= 1.5) | %.2f | %.2f |\n' "$(echo "$ours_b / $git_b" | bc -l)" "$(echo "$ours_d / $git_d" | bc -l)"
echo "| refs/ + logs/ + packed-refs | $refs_b | $refs_d |"
printf '| refs and logs / objects (goal <= 0.10) | %.2f | %.2f |\n' "$(echo "$refs_b / $ours_b" | bc -l)" "$(echo "$refs_d / $ours_d" | bc -l)"
