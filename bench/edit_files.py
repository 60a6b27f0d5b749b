#!/usr/bin/env python3
"""Small edits, as an agent makes them, to N text files of a tree made by fixtures/gen_tree.py.

    python3 bench/edit_files.py TREE N SEED

Each picked file gets one to three edits: a few lines replaced, inserted or deleted. Binary
files (a NUL in the first 8,000 bytes), ignored directories and symlinks are never picked.
The same (TREE contents, N, SEED) always makes the same edits.
"""
import os
import random
import sys

IGNORED_DIRS = {".git", "node_modules", "build", "dist", "generated"}
WORDS = ("let value index store result error return match item config path buffer "
         "count update handle request response state cache entry").split()


def text_files(tree):
    """Every text file of the tree that is not ignored, sorted."""
    found = []
    for root, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_DIRS)
        for name in sorted(files):
            path = os.path.join(root, name)
            if os.path.islink(path) or name.endswith((".log", ".tmp")) or name == ".gitignore":
                continue
            with open(path, "rb") as f:
                if b"\0" in f.read(8000):
                    continue
            found.append(path)
    return found


def new_line(rng):
    indent = " " * (4 * rng.randrange(4))
    return (indent + " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 10))) + "\n").encode()


def edit(path, rng):
    with open(path, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    for _ in range(rng.randrange(1, 4)):
        at = rng.randrange(len(lines) + 1)
        kind = rng.random()
        if kind < 0.4 and lines:  # replace
            at = min(at, len(lines) - 1)
            n = rng.randrange(1, 4)
            lines[at:at + n] = [new_line(rng) for _ in range(n)]
        elif kind < 0.8:  # insert
            lines[at:at] = [new_line(rng) for _ in range(rng.randrange(1, 6))]
        elif lines:  # delete
            del lines[min(at, len(lines) - 1):at + rng.randrange(1, 4)]
    with open(path, "wb") as f:  # in place: same inode, same mode
        f.write(b"".join(lines))


def main():
    tree, n, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rng = random.Random(f"edit-{seed}")
    files = text_files(tree)
    for path in rng.sample(files, min(n, len(files))):
        edit(path, rng)


if __name__ == "__main__":
    main()
