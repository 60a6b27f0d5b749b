# Sourced by the 200,000-file benchmarks (scale.sh, restore_ab.sh). `bench_workdir NAME` sets
# `work` to $BENCH_DIR (kept) or to a new temp dir removed at exit, and isolates HOME, git's
# config and rewind's environment there.
bench_workdir() {
  if [[ -n ${BENCH_DIR:-} ]]; then
    work=$BENCH_DIR
    mkdir -p "$work"
  else
    work=$(mktemp -d "${TMPDIR:-/tmp}/rewind-$1.XXXXXX")
    trap 'rm -rf "$work"' EXIT
  fi
  mkdir -p "$work/home/.config"
  export HOME=$work/home XDG_CONFIG_HOME=$work/home/.config
  export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
  unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE REWIND_DATA_DIR REWIND_NOW XDG_DATA_HOME
}
