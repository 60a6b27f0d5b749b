#!/usr/bin/env bash
# The cost of a prune that repacks a large store, for two builds side by side: a 50,000-file /
# 400 MB tree (fixtures/gen_tree.py), its first snapshot (a pack), then 25 snapshots of 20
# changed files each (loose objects); each build prunes its own copy of that store (nothing
# expires; the loose objects call for a repack). Prints wall time, peak memory and `objects/`
# before and after.
#
# usage: bench/repack.sh OLD_BIN NEW_BIN    (FILES=50000 BYTES=400000000)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
old=$(realpath "$1")
new=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"

python3 "$here/fixtures/gen_tree.py" "$work/tree" --files "${FILES:-50000}" --bytes "${BYTES:-400000000}" --ignored 0 >/dev/null 2>&1
rw() { "$1" --data-dir "$work/data" -C "$work/tree" "${@:2}"; }
rw "$new" track >/dev/null
for seed in $(seq 1 25); do
  python3 "$here/fixtures/gen_tree.py" "$work/tree" --change 20 --seed "$seed" >/dev/null 2>&1
  rw "$new" track >/dev/null
done
store=$(rw "$new" path)
echo "store before: $(du -sh "$store/objects" | cut -f1), $(git --git-dir "$store" count-objects -v | awk '/^count:/ {print $2}') loose objects"
echo
echo "| build | prune (wall) | peak memory | objects/ after |"
echo "|---|---|---|---|"
cp -a "$store" "$work/pristine.git"
for build in old new; do
  bin=$old
  [ $build = new ] && bin=$new
  rm -rf "$store"
  cp -a "$work/pristine.git" "$store"
  sync
  /usr/bin/time -f "%e %M" -o "$work/time" "$bin" --data-dir "$work/data" -C "$work/tree" prune >/dev/null
  read -r secs kb <"$work/time"
  git --git-dir "$store" fsck --strict --no-progress >/dev/null 2>"$work/fsck.err" || { cat "$work/fsck.err"; exit 1; }
  echo "| $build | $secs s | $((kb / 1024)) MB | $(du -sh "$store/objects" | cut -f1) |"
done
