#!/usr/bin/env bash
# What the agent waits for: `rewind hook claude-code` (a whole process, payload on stdin) on a
# 20,000-file, 100 MB tree whose session already has 50 turns, side by side with a no-change
# `rewind track` on the same project:
#   prompt + stop   UserPromptSubmit then Stop (a turn, no edits)  vs  track; track
#   stop, no turn   a Stop with no turn open (quiet)               vs  track
#   interrupted     a prompt while the last turn is open (it ends) vs  track
# Alternating runs; medians of the times and of the per-pair ratios.
#
# usage: bench/hook.sh [REWIND_BIN]    (default target/release/rewind; BENCH_RUNS=9)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-$here/target/release/rewind}")
runs=${BENCH_RUNS:-9}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
python3 "$here/fixtures/gen_tree.py" "$work/tree" --files 20000 --bytes 100000000 --ignored 0 >/dev/null
payload() { # EVENT EXTRA
  printf '{"session_id":"s","transcript_path":"/t.jsonl","cwd":"%s","permission_mode":"default","hook_event_name":"%s",%s}' \
    "$work/tree" "$1" "$2"
}
payload UserPromptSubmit '"prompt":"edit the files"' >"$work/prompt.json"
payload Stop '"stop_hook_active":false' >"$work/stop.json"
hook() { "$bin" --data-dir "$work/data" hook claude-code <"$work/$1.json"; }
track() { "$bin" -q --data-dir "$work/data" -C "$work/tree" track >/dev/null; }
for i in $(seq 50); do hook prompt; echo "$i" >>"$work/tree/bench-$i.txt"; hook stop; done
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
seconds() { local s e; s=$(date +%s.%N); "$@"; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
turn() { hook prompt; hook stop; }
two_tracks() { track; track; }
measure() { # NAME HOOK_CASE PEER [SETUP]
  : >"$work/a"; : >"$work/b"; : >"$work/ratio"
  for _ in $(seq "$runs"); do
    ${4:-true}
    a=$(seconds "$2"); b=$(seconds "$3")
    echo "$a" >>"$work/a"; echo "$b" >>"$work/b"; echo "$a / $b" | bc -l >>"$work/ratio"
  done
  printf '| %s | %.3f s | %.3f s | **%.2f** |\n' "$1" "$(median <"$work/a")" "$(median <"$work/b")" "$(median <"$work/ratio")"
}
stop_quiet() { hook stop; }
prompt_only() { hook prompt; }
echo "| case | hook | track (no change) | hook / track |"
echo "|---|---|---|---|"
measure "prompt + stop (2 processes; peer: 2 tracks)" turn two_tracks
measure "stop with no turn open" stop_quiet track
measure "prompt with the last turn left open (ends it, begins the next)" prompt_only track
