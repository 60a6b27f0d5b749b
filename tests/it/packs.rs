//! The packs prune's repack writes: deltas between similar objects, checked by git (`verify-pack`,
//! `fsck --strict`, `cat-file`, `pack-objects` for the size of the same objects packed whole),
//! and read back by rewind itself.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::*;

/// Files of the project that [`write_version`] writes.
const FILES: usize = 100;

/// Text for file `file` at `version`: ~2 KB of pseudo-random words (so that zlib alone gains
/// little), the same from version to version but for one changed line and one more line each.
fn file_text(file: usize, version: usize) -> String {
    const WORDS: [&str; 16] = [
        "alpha", "beta", "gamma", "delta", "let", "fn", "return", "match", "value", "index",
        "store", "pack", "tree", "blob", "commit", "window",
    ];
    let mut state = (file as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut word = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        WORDS[(state % 16) as usize]
    };
    let mut lines: Vec<String> = (0..40)
        .map(|_| (0..6).map(|_| word()).collect::<Vec<_>>().join(" "))
        .collect();
    for v in 1..=version {
        let line = (v * 7 + file) % lines.len();
        lines[line] = format!("{} edited in version {v}", lines[line]);
        lines.push(format!("line added in version {v} of file {file}"));
    }
    lines.join("\n") + "\n"
}

/// Write every file of the project at `version`.
fn write_version(p: &TestProject, version: usize) {
    for file in 0..FILES {
        p.file(
            format!("d{}/f{file}.txt", file % 5),
            file_text(file, version),
        );
    }
}

/// Track `versions` versions of the project; returns the snapshot of each.
fn track_versions(p: &TestProject, versions: usize) -> Vec<String> {
    (0..versions)
        .map(|version| {
            write_version(p, version);
            p.track()
        })
        .collect()
}

/// Every object git can reach from the store's refs and reflogs, and its content as
/// `git cat-file --batch` prints it.
fn reachable_objects(sb: &Sandbox, store: &Path) -> BTreeMap<String, Vec<u8>> {
    let listing = sb.git_in(store, ["rev-list", "--objects", "--all", "--reflog"]);
    let ids: Vec<&str> = listing
        .lines()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let mut cmd = sb.git_command(None);
    cmd.arg("--git-dir")
        .arg(store)
        .args(["cat-file", "--batch"]);
    let run = run_with_stdin(&mut cmd, (ids.join("\n") + "\n").as_bytes());
    run.assert_success();
    let mut out = BTreeMap::new();
    let mut rest = run.stdout_bytes.as_slice();
    for id in ids {
        let header_end = rest.iter().position(|&b| b == b'\n').unwrap();
        let header = std::str::from_utf8(&rest[..header_end]).unwrap().to_owned();
        let size: usize = header.rsplit(' ').next().unwrap().parse().unwrap();
        let body = rest[header_end + 1..header_end + 1 + size].to_vec();
        assert!(header.starts_with(id), "{header} for {id}");
        out.insert(id.to_owned(), [header.as_bytes(), b"\n", &body].concat());
        rest = &rest[header_end + 1 + size + 1..];
    }
    out
}

/// The store's pack files (`.pack`).
fn packs(store: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(store.join("objects/pack"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .collect();
    found.sort();
    found
}

/// `git verify-pack -v` of the store's one pack: (objects, deltas among them).
fn verify_pack(sb: &Sandbox, store: &Path) -> (usize, usize) {
    let packs = packs(store);
    assert_eq!(packs.len(), 1, "one pack after a repack: {packs:?}");
    verify(sb, store, &packs[0])
}

/// `git verify-pack -v` of `pack`: (objects, deltas among them).
fn verify(sb: &Sandbox, store: &Path, pack: &Path) -> (usize, usize) {
    let listing = sb.git_in(store, ["verify-pack", "-v", pack.to_str().unwrap()]);
    // id type size size-in-pack offset [depth base-id]
    let rows: Vec<Vec<&str>> = listing
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() >= 5 && f[0].len() == 40)
        .collect();
    let deltas = rows.iter().filter(|f| f.len() == 7).count();
    (rows.len(), deltas)
}

/// The size of the objects of the store's one pack packed whole by git (no deltas).
fn whole_pack_size(sb: &Sandbox, store: &Path) -> u64 {
    let ids = sb.git_in(
        store,
        [
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname)",
        ],
    );
    let mut cmd = sb.git_command(None);
    cmd.arg("--git-dir").arg(store).args([
        "pack-objects",
        "--stdout",
        "--window=0",
        "--depth=0",
        "--no-reuse-delta",
        "-q",
    ]);
    let run = run_with_stdin(&mut cmd, ids.as_bytes());
    run.assert_success();
    run.stdout_bytes.len() as u64
}

/// After a repack, the store is sound for git and every object git reaches reads back as it
/// did `before`; returns how many git reaches.
fn assert_repack_kept_everything(
    sb: &Sandbox,
    store: &Path,
    before: &BTreeMap<String, Vec<u8>>,
) -> usize {
    assert_fsck_clean(sb, store);
    let after = reachable_objects(sb, store);
    for (id, content) in &after {
        assert!(
            before.get(id) == Some(content),
            "object {id} reads back changed"
        );
    }
    after.len()
}

/// Restore each of `snapshots` through the CLI: the project then holds that version's text.
fn assert_versions_restore(p: &TestProject, snapshots: &[(usize, &String)]) {
    for &(version, snapshot) in snapshots {
        p.rewind(["restore", snapshot]).assert_success();
        for file in [0, FILES / 2, FILES - 1] {
            assert_eq!(
                String::from_utf8(p.read(format!("d{}/f{file}.txt", file % 5))).unwrap(),
                file_text(file, version),
                "file {file} after restoring version {version}"
            );
        }
    }
}

/// Repack used to store every object whole: a store of 21 versions of 100 files was many times
/// git's size. Now versions are deltas against each other, and git and rewind read them all.
#[test]
fn repack_stores_similar_versions_as_deltas() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    // 100 new blobs per version, plus trees: past the 2,000 loose objects that call for a repack.
    let snapshots = track_versions(&p, 21);
    let store = p.store();
    let before = reachable_objects(&sb, &store);

    p.rewind(["prune"]).assert_success();
    let counts = sb.git_in(&store, ["count-objects", "-v"]);
    assert!(
        counts.lines().any(|l| l == "count: 0"),
        "all packed: {counts}"
    );
    let (objects, deltas) = verify_pack(&sb, &store);
    assert!(
        deltas * 10 >= objects * 8,
        "most objects are deltas: {deltas} of {objects}"
    );
    assert_eq!(
        assert_repack_kept_everything(&sb, &store, &before),
        before.len()
    );

    let ours = fs::metadata(&packs(&store)[0]).unwrap().len();
    let whole = whole_pack_size(&sb, &store);
    assert!(
        ours * 2 < whole,
        "the pack ({ours} bytes) is under half of the same objects whole ({whole} bytes)"
    );

    assert_versions_restore(
        &p,
        &[
            (0, &snapshots[0]),
            (10, &snapshots[10]),
            (20, &snapshots[20]),
        ],
    );
    p.assert_fsck_clean();
}

/// A store `git gc` packed (with git's own deltas), then pruned by rewind so that its pack holds
/// unreachable objects: the new pack holds deltas again, and stays valid for git and rewind.
#[test]
fn repack_of_a_store_git_gc_packed_writes_deltas() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let hour = |h: usize| format!("2026-11-01T{h:02}:00:00Z");
    let snapshots: Vec<String> = (0..8)
        .map(|version| {
            write_version(&p, version);
            at(&p, &hour(version), &["track"]).stdout.trim().to_owned()
        })
        .collect();
    let store = p.store();
    sb.git_in(&store, ["gc", "-q"]);
    let git_deltas: usize = packs(&store)
        .iter()
        .map(|pack| verify(&sb, &store, pack).1)
        .sum();
    assert!(git_deltas > 0, "git gc wrote deltas");
    let before = reachable_objects(&sb, &store);

    // Versions 0 to 3 expire: the pack holds unreachable objects; 4 to 7 stay.
    let run = at(
        &p,
        "2026-11-01T07:30:00Z",
        &["--json", "prune", "--retention", "4h"],
    );
    let pruned = one_json(&run);
    assert!(pruned["objects_removed"].as_u64().unwrap() > 0, "{pruned}");
    let (objects, deltas) = verify_pack(&sb, &store);
    assert_repack_kept_everything(&sb, &store, &before);
    assert!(objects < before.len(), "expired objects left the pack");
    assert!(
        deltas * 2 > objects,
        "the repacked store holds deltas: {deltas} of {objects}"
    );
    assert_versions_restore(&p, &[(4, &snapshots[4]), (7, &snapshots[7])]);
}

/// Prune repacked only at 2,000 loose objects: a small store kept up to 2,000 loose files of a
/// disk block each, several times the size of its pack. Past a quarter of the packs' space (and
/// 256 objects) they are packed now.
#[test]
fn loose_objects_past_a_quarter_of_the_packs_space_are_repacked() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    track_versions(&p, 4); // the first snapshot a pack, then ~320 loose objects
    let store = p.store();
    let loose = |sb: &Sandbox| {
        let counts = sb.git_in(&store, ["count-objects", "-v"]);
        let count = counts.lines().find_map(|l| l.strip_prefix("count: "));
        count.unwrap().parse::<usize>().unwrap()
    };
    assert!((256..2000).contains(&loose(&sb)), "{}", loose(&sb));
    let before = reachable_objects(&sb, &store);
    p.rewind(["prune"]).assert_success();
    assert_eq!(loose(&sb), 0, "all packed");
    assert_eq!(
        assert_repack_kept_everything(&sb, &store, &before),
        before.len()
    );
}

/// `len` bytes of noise (seeded xorshift) with an 8-byte marker every 64 bytes: zlib level 1
/// saves less than a tenth of it (the markers), the least that makes rewind compress an object.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|i| match i % 64 {
            56.. => b"-marker-"[i % 8],
            _ => {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 32) as u8
            }
        })
        .collect()
}

/// The blob id of `path` in snapshot `tree`.
fn blob_id(p: &TestProject, tree: &str, path: &str) -> String {
    p.store_git(["rev-parse", &format!("{tree}:{path}")])
        .trim()
        .to_owned()
}

/// Objects of 1 MiB or more whose start barely compresses are stored at level 0 (stored deflate
/// blocks) in the first snapshot's pack, as loose objects and when streamed (over 32 MiB);
/// smaller or compressible ones are still compressed. git reads every one back byte for byte,
/// `fsck --strict` is clean and each snapshot is the tree `git write-tree` makes.
#[test]
fn incompressible_objects_are_stored_without_compression_and_git_reads_them() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("small.txt", "s\n");
    p.store_git(["config", "rewind.maxFileSize", "100000000"]);
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("noise.bin", noise(2 << 20, 1)),
        ("small-noise.bin", noise(500 << 10, 2)),
        (
            "text.txt",
            file_text(7, 3).repeat(2 << 20 >> 11).into_bytes(),
        ),
    ];
    for (name, data) in &files {
        p.file(name, data);
    }
    let first = p.track_matches_git().hash;
    let pack = &packs(&p.store())[0];
    // id type size size-in-pack offset
    let listing = sb.git_in(&p.store(), ["verify-pack", "-v", pack.to_str().unwrap()]);
    let in_pack = |id: &str| -> (u64, u64) {
        let row = listing.lines().find(|l| l.starts_with(id)).unwrap();
        let fields: Vec<u64> = row
            .split_whitespace()
            .skip(2)
            .map(|f| f.parse().unwrap())
            .collect();
        (fields[0], fields[1])
    };
    let (size, stored) = in_pack(&blob_id(&p, &first, "noise.bin"));
    assert!(
        stored > size,
        "noise.bin: {stored} bytes in the pack for {size}"
    );
    let (size, stored) = in_pack(&blob_id(&p, &first, "small-noise.bin"));
    assert!(
        stored < size,
        "under 1 MiB, compressed: {stored} for {size}"
    );
    let (size, stored) = in_pack(&blob_id(&p, &first, "text.txt"));
    assert!(stored * 2 < size, "text is compressed: {stored} for {size}");

    // After the first snapshot, new objects are loose; over 32 MiB they are streamed.
    let loose = [
        ("more-noise.bin", noise(3 << 20, 3)),
        ("huge-noise.bin", noise(33 << 20, 4)),
    ];
    for (name, data) in &loose {
        p.file(name, data);
    }
    let second = p.track_matches_git().hash;
    for (name, data) in &loose {
        let id = blob_id(&p, &second, name);
        let file = p.store().join("objects").join(&id[..2]).join(&id[2..]);
        let on_disk = fs::metadata(&file).unwrap().len();
        assert!(
            on_disk > data.len() as u64,
            "{name}: {on_disk} bytes for {}",
            data.len()
        );
    }
    for (name, data) in files.iter().chain(&loose) {
        let mut cmd = sb.git_command(None);
        cmd.arg("--git-dir")
            .arg(p.store())
            .args(["cat-file", "blob", &format!("{second}:{name}")]);
        let run = run_with_stdin(&mut cmd, b"");
        run.assert_success();
        assert!(
            run.stdout_bytes == *data,
            "{name} reads back from git as written"
        );
    }
    p.assert_fsck_clean();
}
