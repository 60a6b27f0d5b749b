#!/usr/bin/env python3
"""The file system's floor for what a restore of N files does to them, with none of rewind's
work: write N temp files (each beside a file, with that file's bytes), one `syncfs`, swap each
in (`renameat2(RENAME_EXCHANGE)`), unlink what came out. Serial, then the unlinks on 2, 4 and 8
threads. Then the same cycle, round by round, with the one `syncfs` against an `fdatasync` of
each temp file on 8 threads (what a run that does not batch its syncs would wait for). The tree
is left as it was (same bytes; new inodes and mtimes).

usage: bench/restore_floor.py TREE [N]
"""
import ctypes
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

libc = ctypes.CDLL("libc.so.6", use_errno=True)
RENAME_EXCHANGE = 2
AT_FDCWD = -100


def pick(tree, n):
    files = []
    for d, dirs, names in os.walk(tree):
        dirs[:] = [x for x in dirs if x not in (".git", "node_modules", "target", "build")]
        files += [os.path.join(d, x) for x in names if not x.startswith(".")]
    return random.Random(1).sample(files, n)


def stage(paths, data):
    for path, b in zip(paths, data):
        fd = os.open(path + ".floor-tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b)
        os.close(fd)


def syncfs(tree):
    fd = os.open(tree, os.O_RDONLY)
    libc.syncfs(fd)
    os.close(fd)


def swap(paths):
    for path in paths:
        if libc.renameat2(AT_FDCWD, (path + ".floor-tmp").encode(), AT_FDCWD, path.encode(), RENAME_EXCHANGE):
            raise OSError(ctypes.get_errno(), "renameat2")


def fdatasync_each(paths):
    def one(path):
        fd = os.open(path + ".floor-tmp", os.O_RDONLY)
        os.fdatasync(fd)
        os.close(fd)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, paths, chunksize=16))


def compare_syncs(tree, paths, data, rounds=8):
    syncs = {
        "one syncfs": lambda: syncfs(tree),
        "fdatasync each, 8 threads": lambda: fdatasync_each(paths),
    }
    taken = {name: [] for name in syncs}
    for round in range(rounds):
        for name in sorted(syncs, reverse=round % 2 == 1):
            stage(paths, data)
            t = time.perf_counter()
            syncs[name]()
            taken[name].append((time.perf_counter() - t) * 1000)
            swap(paths)
            for p in paths:
                os.unlink(p + ".floor-tmp")
    for name, ms in taken.items():
        ms.sort()
        print(f"  {name}: median {ms[len(ms) // 2]:.0f} ms ({ms[0]:.0f}–{ms[-1]:.0f}), {rounds} rounds")


def main():
    tree, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    paths = pick(tree, n)
    data = [open(p, "rb").read() for p in paths]
    ms = lambda t: f"{(time.perf_counter() - t) * 1000:.0f} ms"
    t = time.perf_counter(); stage(paths, data); staged = ms(t)
    t = time.perf_counter(); syncfs(tree); synced = ms(t)
    t = time.perf_counter(); swap(paths); swapped = ms(t)
    t = time.perf_counter()
    for p in paths:
        os.unlink(p + ".floor-tmp")
    print(f"{n} files: write temp files {staged}, syncfs {synced}, swap {swapped}, unlink {ms(t)}")
    for threads in (2, 4, 8):
        stage(paths, data)
        syncfs(tree)
        swap(paths)
        t = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(os.unlink, [p + ".floor-tmp" for p in paths], chunksize=50))
        print(f"  unlink on {threads} threads: {ms(t)}")
    compare_syncs(tree, paths, data)


if __name__ == "__main__":
    main()
