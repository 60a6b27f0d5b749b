#!/bin/bash
# Replays the action log of a model violation (tests/it/model.rs) as a shell script, so that
# the failing sequence can be stepped through without the test harness.
#
#   tests/replay-model-log.sh OUTPUT [LINES]
#
# OUTPUT: the test's output holding "NO-BYTE-LOST VIOLATION ... actions so far:" and the log;
# LINES: replay only the first LINES actions (to look at the project and the store just
# before the failing one). The project is $REPLAY_DIR/p (default /tmp/rewind-replay/p), the
# data dir $REPLAY_DIR/data, the binary $REWIND_BIN (default target/debug/rewind). Each
# rewind command's output in the log is a comment (`#   {...}`); the replay prints its own, so
# the two can be compared line by line.
set -euo pipefail
log=$(realpath "$1")
lines=${2:-1000000}
bin=$(realpath "${REWIND_BIN:-target/debug/rewind}")
dir=${REPLAY_DIR:-/tmp/rewind-replay}
rm -rf "$dir"
mkdir -p "$dir/home" "$dir/xdg"
cd "$dir"
export HOME=$dir/home XDG_CONFIG_HOME=$dir/xdg GIT_CONFIG_NOSYSTEM=1 LC_ALL=C TZ=UTC
git config --global user.name model
git config --global user.email model@example.com
git config --global init.defaultBranch main
awk '/actions so far:/ {f = 1; next} /^stack backtrace:|^thread |^note: / {f = 0} f' "$log" |
    grep -v '^#' | head -n "$lines" > script.sh
rewind() { "$bin" --data-dir "$dir/data" -C "$dir/p" "$@"; }
export -f rewind
export bin dir
# The log's own `cd p` and failures (exit 1 of rewind, a failing git) are part of the run.
bash -v script.sh 2>&1 | tee out.txt | tail -n 3
