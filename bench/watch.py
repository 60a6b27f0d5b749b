#!/usr/bin/env python3
"""Issue 16: snapshots under the file-system watcher, at 200,000 files, beside git and jj.

usage: bench/watch.py REWIND_BIN [--jj JJ_BIN] [--dir DIR] [--runs N]

One run, one machine: a tree from `fixtures/gen_tree.py --files 200000 --bytes 1600000000
--ignored 20000` (made in DIR unless there), three copies of it (rewind, git, jj each snapshot
their own, so that no tool's data lands in another's tree), then for each tool:
  first       the first snapshot (rewind: the first `track` through `rewind serve`)
  no change   a snapshot when nothing changed
  20 changed  a snapshot after 20 files were edited (the edits are outside the timing)
rewind runs as `rewind serve` (watcher on) and `rewind serve --no-watch`, timed per request
(the JSON-RPC round trip, what a runtime waits for); git as `git add --all && git write-tree`
on its own git dir, jj as `jj util snapshot`, timed as whole processes. Medians of N runs, with
min-max; peak memory (VmHWM) of each serve process, and its CPU time over 10 idle seconds.
Markdown to stdout, progress to stderr.
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def edit(tree, files, rng, count=20):
    """Append a line to `count` random files of `tree` (the same names in every copy)."""
    for rel in rng.sample(files, count):
        with open(os.path.join(tree, rel), "ab") as f:
            f.write(b"edited %d\n" % rng.randrange(1 << 30))


def make_dir(tree, run, count=20):
    """Make directory `new-<run>` in `tree` with `count` small files (a new module)."""
    new = os.path.join(tree, f"new-{run}")
    os.makedirs(new)
    for i in range(count):
        with open(os.path.join(new, f"file-{i}.rs"), "wb") as f:
            f.write(b"pub fn f%d() {}\n" % i)


def steps(snapshot, tree, files, runs):
    """Time `snapshot()` (seconds) `runs` times each: with no change, after 20 files edited, and
    after a directory of 20 files made."""
    same, changed, made = [], [], []
    for run in range(runs):
        same.append(snapshot())
        edit(tree, files, random.Random(run))
        changed.append(snapshot())
        make_dir(tree, run)
        made.append(snapshot())
    return same, changed, made


def listing(tree):
    out = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".jj", "node_modules", "target", "build")]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.isfile(path) and not os.path.islink(path) and name != ".gitignore":
                out.append(os.path.relpath(path, tree))
    return sorted(out)


class Serve:
    def __init__(self, binary, data, tree, watch):
        args = [binary, "-q", "--data-dir", data, "-C", tree, "serve"] + ([] if watch else ["--no-watch"])
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next = 0

    def call(self, method):
        self.next += 1
        request = json.dumps({"jsonrpc": "2.0", "id": self.next, "method": method}) + "\n"
        start = time.perf_counter()
        self.proc.stdin.write(request.encode())
        self.proc.stdin.flush()
        response = json.loads(self.proc.stdout.readline())
        elapsed = time.perf_counter() - start
        if "error" in response:
            raise SystemExit(f"{method}: {response}")
        return elapsed, response["result"]

    def status(self, field):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # MiB

    def cpu(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def timed(args, cwd, env=None):
    start = time.perf_counter()
    subprocess.run(args, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def fmt(samples):
    med = statistics.median(samples)
    unit = (lambda s: f"{s * 1000:.1f} ms") if med < 1 else (lambda s: f"{s:.2f} s")
    if len(samples) == 1:
        return unit(med)
    return f"{unit(med)} ({unit(min(samples))}–{unit(max(samples))})"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("rewind")
    parser.add_argument("--jj")
    parser.add_argument("--dir", default="/tmp/rewind-watch-bench")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--restore-only", action="store_true",
                        help="only the restore case, on the copies an earlier run left in DIR")
    args = parser.parse_args()
    rewind = os.path.abspath(args.rewind)
    os.makedirs(args.dir, exist_ok=True)
    base = os.path.join(args.dir, "tree")
    env = dict(os.environ, HOME=args.dir, XDG_CONFIG_HOME=os.path.join(args.dir, ".config"),
               GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "REWIND_DATA_DIR"):
        env.pop(var, None)
    os.environ.clear()
    os.environ.update(env)
    if args.restore_only:
        restore_case(rewind, args)
        return
    if not os.path.isdir(base):
        log("generating the tree")
        subprocess.run([sys.executable, os.path.join(ROOT, "fixtures/gen_tree.py"), base, "--files", "200000",
                        "--bytes", "1600000000", "--ignored", "20000"], check=True, stdout=sys.stderr)
    tools = ["watched", "walked", "git"] + (["jj"] if args.jj else [])
    trees = {}
    for tool in tools:
        trees[tool] = os.path.join(args.dir, f"tree-{tool}")
        for leftover in (trees[tool], os.path.join(args.dir, f"data-{tool}"), os.path.join(args.dir, "git-dir")):
            if tool != "git" and leftover.endswith("git-dir"):
                continue
            shutil.rmtree(leftover, ignore_errors=True)
        log(f"copying the tree for {tool}")
        subprocess.run(["cp", "-a", base + "/.", trees[tool]], check=True)
    files = listing(base)
    rng = random.Random(16)
    results = {}

    for tool, watch in (("watched", True), ("walked", False)):
        serve = Serve(rewind, os.path.join(args.dir, f"data-{tool}"), trees[tool], watch)
        first, snapshot = serve.call("track")
        log(f"{tool}: first track {first:.2f} s, {snapshot['files']} files")
        serve.call("track")  # the first no-change snapshot after the first (the index settles)
        timings = steps(lambda: serve.call("track")[0], trees[tool], files, args.runs)
        cpu_before = serve.cpu()
        time.sleep(10)
        idle = serve.cpu() - cpu_before
        peak = serve.status("VmHWM")
        _, status = serve.call("status")
        serve.close()
        results[tool] = (first, *timings, f"{peak:.0f} MiB", f"{idle:.2f} s", status["watcher"])
        log(tool, results[tool][:5], status["watcher"])

    git_dir = os.path.join(args.dir, "git-dir")
    subprocess.run(["git", "init", "-q", "--bare", git_dir], check=True)
    git = ["sh", "-c", f'git --git-dir="{git_dir}" --work-tree=. add --all . && '
           f'git --git-dir="{git_dir}" --work-tree=. write-tree']
    first = timed(git, trees["git"])
    results["git"] = (first, *steps(lambda: timed(git, trees["git"]), trees["git"], files, args.runs),
                      "", "", None)
    log("git", results["git"][:3])

    if args.jj:
        jj_env = dict(env, JJ_CONFIG="/dev/null", JJ_USER="bench", JJ_EMAIL="bench@example.com")
        subprocess.run([args.jj, "git", "init"], cwd=trees["jj"], env=jj_env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        snap = [args.jj, "util", "snapshot"]
        first = timed(snap, trees["jj"], jj_env)
        snapshot = lambda: timed(snap, trees["jj"], jj_env)  # noqa: E731
        results["jj"] = (first, *steps(snapshot, trees["jj"], files, args.runs), "", "", None)
        log("jj", results["jj"][:3])

    names = {
        "watched": "rewind serve (watcher)",
        "walked": "rewind serve --no-watch",
        "git": "git add --all && git write-tree",
        "jj": f"jj util snapshot ({subprocess.run([args.jj, '--version'], capture_output=True, text=True).stdout.strip()})"
        if args.jj else "",
    }
    print(f"20 of {len(files)} files edited at random per run, then a new directory of 20 files made; "
          f"{args.runs} runs, median (min–max)\n")
    print("| tool | first snapshot | no change | 20 files changed | new directory, 20 files | peak memory "
          "| CPU over 10 s idle |")
    print("|---|---|---|---|---|---|---|")
    for tool in tools:
        first, same, changed, made, peak, idle, _ = results[tool]
        print(f"| {names[tool]} | {fmt([first])} | {fmt(same)} | {fmt(changed)} | {fmt(made)} | {peak} | {idle} |")
    print()
    w = results["watched"]
    for peer in ["git", "walked"] + (["jj"] if args.jj else []):
        p = results[peer]
        ratios = [statistics.median(w[i]) / statistics.median(p[i]) for i in (1, 2, 3)]
        print(f"watched / {peer}, no change: {ratios[0]:.3f}; 20 changed: {ratios[1]:.3f}; "
              f"new directory: {ratios[2]:.3f}")
    restore_case(rewind, args)


def restore_case(rewind, args):
    """Restore of 1,000 changed files (`gen_tree.py --change 1000`), back and forth between two
    snapshots through `rewind serve`, with and without the watcher; the undo point included (it
    reads the 1,000 files the restore before wrote). Beside it, a no-change track of the same
    server, taken after a track that read what the restore wrote; and, as the peer, `git
    checkout` of the same two trees in a copy of the tree (whole processes: git's checkout
    refreshes its index, a stat of every file, as rewind's unwatched undo point does)."""
    print("\nrestore of 1,000 changed files through serve, undo point included, median (min–max)\n")
    print("| serve | restore | no-change track | restore / track | restore / git checkout |")
    print("|---|---|---|---|---|")
    git_runs = git_checkouts(args)
    for tool, watch in (("watched", True), ("walked", False)):
        # A restore syncs the file system (its promise: durable before the first file changes),
        # which writes back whatever else is dirty there: git's checkouts just before, if left.
        os.sync()
        tree = os.path.join(args.dir, f"tree-{tool}")
        serve = Serve(rewind, os.path.join(args.dir, f"data-{tool}"), tree, watch)
        base = serve.call("track")[1]["hash"]
        subprocess.run([sys.executable, os.path.join(ROOT, "fixtures/gen_tree.py"), tree, "--change", "1000",
                        "--seed", "7"], check=True, stdout=subprocess.DEVNULL)
        edited = serve.call("track")[1]["hash"]
        restores, tracks = [], []
        for run in range(args.runs):
            target = base if run % 2 == 0 else edited
            request = {"jsonrpc": "2.0", "id": 10_000 + run, "method": "restore", "params": {"hash": target}}
            start = time.perf_counter()
            serve.proc.stdin.write((json.dumps(request) + "\n").encode())
            serve.proc.stdin.flush()
            response = json.loads(serve.proc.stdout.readline())
            restores.append(time.perf_counter() - start)
            if "error" in response:
                raise SystemExit(f"restore: {response}")
            serve.call("track")  # reads what the restore wrote
            tracks.append(serve.call("track")[0])  # no change
        serve.close()
        ratio = statistics.median(restores) / statistics.median(tracks)
        versus_git = statistics.median(restores) / statistics.median(git_runs)
        print(f"| {'watcher' if watch else '--no-watch'} | {fmt(restores)} | {fmt(tracks)} | {ratio:.2f} "
              f"| {versus_git:.2f} |")
    print(f"| git checkout (peer) | {fmt(git_runs)} | | | |")


def git_checkouts(args):
    """`git checkout` back and forth between the two trees of the restore case, in its own copy
    (made once: the base tree, committed, then `--change 1000 --seed 7`, committed)."""
    tree = os.path.join(args.dir, "tree-git-restore")
    git_dir = os.path.join(args.dir, "git-restore.git")
    env = dict(os.environ, GIT_DIR=git_dir, GIT_WORK_TREE=tree)
    git = lambda *a: subprocess.run(["git", *a], cwd=tree, env=env, check=True, capture_output=True, text=True)
    if not os.path.isdir(git_dir):
        log("copying the tree for git checkout")
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["cp", "-a", os.path.join(args.dir, "tree") + "/.", tree], check=True)
        subprocess.run(["git", "init", "-q", "--bare", git_dir], check=True)
        git("config", "core.bare", "false")
        # (No `gc --auto`: the commits below would start one in the background, packing the
        # tree's 180,000 loose objects on a core while the restores are timed.)
        git("config", "gc.auto", "0")
        for message in ("base", "edited"):
            if message == "edited":
                subprocess.run([sys.executable, os.path.join(ROOT, "fixtures/gen_tree.py"), tree, "--change",
                                "1000", "--seed", "7"], check=True, stdout=subprocess.DEVNULL)
            git("add", "-A", ".")
            git("-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-qm", message)
    commits = git("rev-list", "--all", "--reverse").stdout.split()  # base, edited
    runs = []
    for run in range(args.runs):
        start = time.perf_counter()
        git("checkout", "-q", "--detach", commits[run % 2])
        runs.append(time.perf_counter() - start)
    return runs


if __name__ == "__main__":
    main()
