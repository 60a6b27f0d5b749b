#!/usr/bin/env bash
# Benchmark `rewind track` against the git CLI doing the same job
# (`git add --all . && git write-tree` on its own bare git dir).
#
# Usage:  bench/track.sh [REWIND_BIN]          (default: target/release/rewind)
#
# Environment:
#   BENCH_RUNS=5        timed runs per case and tool
#   BENCH_TREE=DIR      reuse this tree (generated there first if DIR is missing
#                       or empty); without it a temp tree is generated and removed.
#                       NB: case (c) modifies files of the tree in place.
#   BENCH_FILES=50000 BENCH_BYTES=400000000 BENCH_IGNORED=5000 BENCH_SEED=1
#                       generator parameters (fixtures/gen_tree.py)
#   BENCH_CHANGE=20     files changed before each run of case (c)
#   BENCH_TMP=DIR       where stores and the temp tree go (default: $TMPDIR or /tmp)
#   BENCH_KEEP=1        keep the temp dir (stores, raw timings) for inspection
#
# Cases, each measured as N alternating runs (rewind, git, rewind, git, ...):
#   (a) first snapshot: fresh rewind data dir / fresh `git init --bare` dir each run
#   (b) no change: same store again after an untimed warm-up snapshot;
#       also a bare stat walk `find TREE -printf '%s\n'` for reference
#   (c) N files changed: `gen_tree.py --change N` before each rewind+git pair
# Each run is `/usr/bin/time -f '%e %M'` (max RSS KB; wall time taken with bash's
# microsecond clock around it, %e has only 10 ms resolution); git's RSS is the
# max over its processes. Medians are reported; the markdown table goes to
# stdout, progress and raw timings to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
gen="$root/fixtures/gen_tree.py"

rewind=${1:-$root/target/release/rewind}
if [[ $rewind != */* ]]; then rewind=$(command -v "$rewind" || true); fi
[[ -n $rewind && -f $rewind && -x $rewind ]] || { echo "rewind binary not found or not executable: ${1:-$root/target/release/rewind}" >&2; exit 2; }
rewind=$(cd "$(dirname "$rewind")" && pwd)/$(basename "$rewind")

runs=${BENCH_RUNS:-5}
files=${BENCH_FILES:-50000}
bytes=${BENCH_BYTES:-400000000}
ignored=${BENCH_IGNORED:-5000}
seed=${BENCH_SEED:-1}
nchange=${BENCH_CHANGE:-20}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_RUNS must be a positive integer" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "/usr/bin/time (GNU time) is required" >&2; exit 2; }

work=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/rewind-bench.XXXXXX")

# Hermetic: neither tool sees the user's or the system's git config or global
# excludes (~/.config/git/ignore), so both apply exactly the tree's .gitignore files.
mkdir -p "$work/home/.config"
export HOME=$work/home XDG_CONFIG_HOME=$work/home/.config
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_CONFIG_PARAMETERS
unset REWIND_DATA_DIR REWIND_NOW XDG_DATA_HOME
# Run a private copy of the binary: a rebuild of target/release/rewind while the
# benchmark runs must not change the program half way through.
rewind_src=$rewind
rw_commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "no commit")
rw_dirty=$(git -C "$root" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null | head -c 1)
cp "$rewind_src" "$work/rewind-bin"
rewind=$work/rewind-bin
rw_sum=$(sha256sum "$rewind" | cut -c1-12)
rw_ver=$("$rewind" --version 2>/dev/null | head -n 1 || true)

cleanup() {
  if [[ ${BENCH_KEEP:-0} == 1 ]]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
log() { echo "[bench] $*" >&2; }

# ---------------------------------------------------------------- tree
if [[ -n ${BENCH_TREE:-} ]]; then
  tree=$BENCH_TREE
  if [[ ! -d $tree || -z $(ls -A "$tree" 2>/dev/null) ]]; then
    log "generating tree into $tree"
    python3 "$gen" "$tree" --files "$files" --bytes "$bytes" --ignored "$ignored" --seed "$seed"
  else
    log "reusing tree $tree"
    origin="reused \$BENCH_TREE; possibly changed by earlier runs of case (c)"
  fi
else
  tree=$work/tree
  log "generating tree into $tree"
  python3 "$gen" "$tree" --files "$files" --bytes "$bytes" --ignored "$ignored" --seed "$seed"
fi
tree=$(cd "$tree" && pwd)
origin=${origin:-fixtures/gen_tree.py --files $files --bytes $bytes --ignored $ignored --seed $seed}

n_entries=$(find "$tree" -not -type d | wc -l)
n_dirs=$(find "$tree" -mindepth 1 -type d | wc -l)
n_bytes=$(find "$tree" -type f -printf '%s\n' | awk '{t+=$1} END{printf "%d", t}')

log "warming the page cache (reading every file once)"
find "$tree" -type f -print0 | xargs -0 cat > /dev/null

# ---------------------------------------------------------------- runners
# Each timed run appends "wall_s maxrss_kb" to $work/res.<key>.
timed() { # key outfile cmd...
  local key=$1 out=$2; shift 2
  local tf=$work/time.out t0 t1 line
  t0=$EPOCHREALTIME
  if ! /usr/bin/time -f '%e %M' -o "$tf" "$@" > "$out" 2> "$work/stderr.out"; then
    echo "command failed: $*" >&2
    tail -n 20 "$work/stderr.out" >&2
    cat "$tf" >&2 || true
    exit 1
  fi
  t1=$EPOCHREALTIME
  # GNU time's %e has 10 ms resolution: take the wall time from bash's
  # microsecond clock around the same call (includes ~1 ms of fork/exec of
  # /usr/bin/time itself, the same for every command), RSS from %M.
  line=$(tail -n 1 "$tf" | awk -v t0="$t0" -v t1="$t1" '{printf "%.4f %d", t1 - t0, $2}')
  echo "$line" >> "$work/res.$key"
  log "  $key: $line"
  if [[ -s $work/stderr.out ]]; then
    log "    stderr ($(wc -l < "$work/stderr.out") lines): $(head -n 3 "$work/stderr.out" | tr '\n' '|')"
  fi
}

rw_data=$work/rewind-data
git_dir=$work/git-store

run_rewind() { timed "$1" "$work/rewind.out" "$rewind" --data-dir "$rw_data" -C "$tree" track; }
run_git() {
  timed "$1" "$work/git.out" sh -c \
    'cd "$2" && git --git-dir "$1" --work-tree "$2" add --all . && git --git-dir "$1" write-tree' \
    sh "$git_dir" "$tree"
}
fresh_stores() {
  rm -rf "$rw_data" "$git_dir"
  git init -q --bare "$git_dir"
}
tree_id() { grep -oE '\b[0-9a-f]{40}([0-9a-f]{24})?\b' "$1" | tail -n 1 || true; }
id_check() { # label: compare the ids printed by the last rewind and git runs
  local r g
  r=$(tree_id "$work/rewind.out"); g=$(tree_id "$work/git.out")
  if [[ -z $r ]]; then
    echo "$1: rewind printed no tree id (git: ${g:-none})" >> "$work/ids"
  elif [[ $r != "$g" ]]; then
    echo "$1: DIFFER: rewind $r, git $g" >> "$work/ids"
    log "WARNING: $1: tree ids differ: rewind $r git $g"
  else
    echo "$1: match" >> "$work/ids"
  fi
}
: > "$work/ids"

median() { # file column(1|2)
  awk -v c="$2" '{print $c}' "$1" | sort -g | awk '{a[NR]=$1} END{
    if (NR == 0) { print "nan"; exit }
    if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2] + a[NR/2+1]) / 2 }'
}

# ---------------------------------------------------------------- (a) first snapshot
log "(a) first snapshot, $runs runs each"
for ((i = 1; i <= runs; i++)); do
  fresh_stores; sync; run_rewind first.rewind
  fresh_stores; sync; run_git first.git
done
id_check "(a) first snapshot"

# ---------------------------------------------------------------- (b) no change
log "(b) no change: warm-up"
fresh_stores
run_rewind warmup.rewind
run_git warmup.git
id_check "(b) warm-up snapshot"
store_mb() { if [[ -e $1 ]]; then du -sk "$1" | awk '{printf "%.0f MB", $1/1024}'; else echo "none"; fi; }
n_staged=$(git --git-dir "$git_dir" ls-files | wc -l)
rw_store=$(store_mb "$rw_data")
git_store=$(store_mb "$git_dir")
log "(b) no change, $runs runs each (+ find stat walk)"
for ((i = 1; i <= runs; i++)); do
  run_rewind nochange.rewind
  run_git nochange.git
  timed nochange.find /dev/null find "$tree" -printf '%s\n'
done
id_check "(b) no change"

# ---------------------------------------------------------------- (c) N files changed
log "(c) $nchange files changed, $runs runs each"
for ((i = 1; i <= runs; i++)); do
  python3 "$gen" "$tree" --change "$nchange" --seed $((1000 + i)) 2> /dev/null
  sync
  run_rewind changed.rewind
  run_git changed.git
  id_check "(c) $nchange changed, run $i"
done

# ---------------------------------------------------------------- report
for f in "$work"/res.*; do log "raw ${f##*/res.}: $(awk '{printf "%s/%s ", $1, $2}' "$f")"; done

s() { median "$work/res.$1" 1; }
m() { median "$work/res.$1" 2 | awk '{printf "%.0f", $1/1024}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "n/a" }'; }
secs() { awk -v a="$1" 'BEGIN{printf "%.3f", a}'; }

cat <<EOF
### rewind track vs git add --all && git write-tree

Tree: $n_entries files and symlinks ($n_staged tracked, $((n_entries - n_staged)) ignored by .gitignore rules), $n_dirs directories, $(awk -v b="$n_bytes" 'BEGIN{printf "%.0f", b/1e6}') MB ($origin).
Machine: $(nproc) CPUs, $(uname -sr), $(awk '/MemTotal/{printf "%.0f GB RAM", $2/1048576}' /proc/meminfo); $(git --version); ${rw_ver:-rewind (no --version)} (\`${rewind_src#$root/}\`, sha256 ${rw_sum}…; repo at ${rw_commit}${rw_dirty:+ + uncommitted changes} when the run started).
Median of $runs runs each, runs alternating rewind/git; page cache warm. Wall time in seconds, peak memory = max RSS.

| case | rewind (s) | git (s) | rewind/git | rewind max RSS (MB) | git max RSS (MB) |
|---|---:|---:|---:|---:|---:|
| (a) first snapshot (fresh store) | $(secs "$(s first.rewind)") | $(secs "$(s first.git)") | $(ratio "$(s first.rewind)" "$(s first.git)") | $(m first.rewind) | $(m first.git) |
| (b) no change | $(secs "$(s nochange.rewind)") | $(secs "$(s nochange.git)") | $(ratio "$(s nochange.rewind)" "$(s nochange.git)") | $(m nochange.rewind) | $(m nochange.git) |
| (c) $nchange files changed | $(secs "$(s changed.rewind)") | $(secs "$(s changed.git)") | $(ratio "$(s changed.rewind)" "$(s changed.git)") | $(m changed.rewind) | $(m changed.git) |

| no change vs a bare stat walk | rewind (s) | \`find -printf '%s\\n'\` (s) | rewind/find |
|---|---:|---:|---:|
| (d) same tree | $(secs "$(s nochange.rewind)") | $(secs "$(s nochange.find)") | $(ratio "$(s nochange.rewind)" "$(s nochange.find)") |

Store size after one snapshot (du): rewind ${rw_store} (\`--data-dir\`), git ${git_store} (loose objects + index).
Tree id check, rewind's printed id vs git write-tree (runs per verdict):
$(sed -E 's/, run [0-9]+:/:/' "$work/ids" | sort | uniq -c | awk '{n=$1; $1=""; printf "-%s (%d)\n", $0, n}')
EOF
