//! Packs: while a first snapshot or a prune's repack runs, new objects are appended to a pack
//! file (a repack writes one; a first snapshot starts another every 128 MiB); its version-2
//! index is written when it is complete, and both become visible by a rename.
//!
//! A repack ([`write_objects`]) stores blobs and trees as deltas (`OFS_DELTA` entries) against
//! an earlier entry of the same pack where that is less than half the object. Candidates are
//! ordered by kind, by the hash of the name they are reached under and by size, largest first;
//! each object is tried against the [`WINDOW`] objects of the same kind and name before it (the
//! versions of one file; an object with a name of its own costs no search), with chains at most
//! [`MAX_DEPTH`] deltas deep. The ordered list is cut into runs of about [`RUN_BYTES`], which
//! threads encode in parallel and the pack receives in order: memory holds a window of objects
//! per thread and the compressed entries of a few runs, never the whole store.

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use gix::ObjectId;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::store::delta;
use crate::store::objects::{deflate, ObjectWriter};

/// Objects each object is tried against as a delta base.
const WINDOW: usize = 10;
/// The longest chain of deltas a reader has to resolve.
const MAX_DEPTH: u32 = 50;
/// The raw bytes of one run of candidates encoded by one thread.
const RUN_BYTES: u64 = 8 << 20;
/// The raw bytes a window holds at most (beyond its newest object).
const WINDOW_BYTES: usize = 64 << 20;
/// Objects larger than this are stored whole, never read into a window.
const MAX_DELTA_OBJECT: u64 = 64 << 20;

/// A pack entry's header: type number and size as git's variable-length integer.
fn push_header(type_id: u8, size: u64, out: &mut Vec<u8>) {
    let mut byte = (type_id << 4) | (size & 0x0f) as u8;
    let mut rest = size >> 4;
    while rest != 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
}

/// A pack entry's header for a whole object of `kind`.
pub(super) fn push_pack_entry_header(kind: gix::objs::Kind, size: u64, out: &mut Vec<u8>) {
    let type_id: u8 = match kind {
        gix::objs::Kind::Commit => 1,
        gix::objs::Kind::Tree => 2,
        gix::objs::Kind::Blob => 3,
        gix::objs::Kind::Tag => 4,
    };
    push_header(type_id, size, out);
}

/// An `OFS_DELTA` entry's header: type 6, the delta's size, then the distance back to the base
/// entry (big-endian base-128, each continued byte counting one more than its bits say).
fn push_delta_header(delta_size: u64, distance: u64, out: &mut Vec<u8>) {
    push_header(6, delta_size, out);
    let mut bytes = vec![(distance & 0x7f) as u8];
    let mut rest = distance >> 7;
    while rest != 0 {
        rest -= 1;
        bytes.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.extend(bytes.iter().rev());
}

/// One object's entry, as a repack thread made it.
pub(super) enum Entry {
    /// Header and zlib data of the whole object.
    Whole(Vec<u8>),
    /// A delta of `size` bytes (zlib-compressed) against object `base`, written earlier.
    Delta {
        base: ObjectId,
        size: u64,
        compressed: Vec<u8>,
    },
}

/// A pack being written: entries are appended after a 12-byte header filled in at the end.
pub(super) struct PackBuilder {
    pub(super) path: PathBuf,
    file: BufWriter<tempfile::NamedTempFile>,
    offset: u64,
    pub(super) entries: Vec<(ObjectId, u64, u32)>,
    /// Where each entry starts.
    pub(super) offsets: HashMap<ObjectId, u64>,
    /// How a write failed (perhaps part-way), if one did: the pack is never completed, and every
    /// later append fails the same way (a full disk says so to whichever thread reports it).
    broken: Option<io::ErrorKind>,
}

const PACK_HEADER_LEN: u64 = 12;

impl PackBuilder {
    pub(super) fn new(temp: tempfile::NamedTempFile) -> Result<PackBuilder> {
        let path = temp.path().to_owned();
        let mut file = BufWriter::with_capacity(1 << 20, temp);
        file.write_all(&[0; PACK_HEADER_LEN as usize])
            .map_err(|e| Error::io("writing pack", &path, e))?;
        Ok(PackBuilder {
            path,
            file,
            offset: PACK_HEADER_LEN,
            entries: Vec::new(),
            offsets: HashMap::new(),
            broken: None,
        })
    }

    /// The bytes written so far.
    pub(super) fn len(&self) -> u64 {
        self.offset
    }

    /// Append one entry (header + zlib data); a second copy of an id is dropped.
    pub(super) fn append(&mut self, id: ObjectId, entry: &[u8]) -> io::Result<()> {
        if let Some(kind) = self.broken {
            return Err(io::Error::new(kind, "an earlier write to this pack failed"));
        }
        if self.offsets.contains_key(&id) {
            return Ok(());
        }
        if let Err(e) = self.file.write_all(entry) {
            self.broken = Some(e.kind());
            return Err(e);
        }
        self.entries.push((id, self.offset, crc32fast::hash(entry)));
        self.offsets.insert(id, self.offset);
        self.offset += entry.len() as u64;
        Ok(())
    }

    /// Append `entry` for object `id`; a delta's base must be in the pack already.
    pub(super) fn append_entry(&mut self, id: ObjectId, entry: Entry) -> io::Result<()> {
        match entry {
            Entry::Whole(bytes) => self.append(id, &bytes),
            Entry::Delta {
                base,
                size,
                compressed,
            } => {
                let base_offset = *self.offsets.get(&base).ok_or_else(|| {
                    io::Error::other(format!("delta base {base} of {id} is not in the pack"))
                })?;
                let mut bytes = Vec::with_capacity(compressed.len() + 16);
                push_delta_header(size, self.offset - base_offset, &mut bytes);
                bytes.extend_from_slice(&compressed);
                self.append(id, &bytes)
            }
        }
    }

    /// Fill in the header, append the checksum, write the `.idx`, and rename both into `dir`;
    /// returns the `.idx` path.
    pub(super) fn finish(mut self, dir: &Path) -> Result<PathBuf> {
        let io_error = |e| Error::io("writing pack", &self.path, e);
        if let Some(kind) = self.broken {
            return Err(io_error(io::Error::new(kind, "a write to it failed")));
        }
        self.file.flush().map_err(io_error)?;
        let temp = self
            .file
            .into_inner()
            .map_err(|e| io_error(e.into_error()))?;
        let mut header = Vec::with_capacity(PACK_HEADER_LEN as usize);
        header.extend_from_slice(b"PACK");
        header.extend_from_slice(&2u32.to_be_bytes());
        header.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        crate::fs::write_all_at(temp.as_file(), &header, 0).map_err(io_error)?;
        let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
        let mut buf = vec![0; 1 << 20];
        let mut position = 0;
        while position < self.offset {
            let n = crate::fs::read_at(temp.as_file(), &mut buf, position).map_err(io_error)?;
            if n == 0 {
                return Err(io_error(io::ErrorKind::UnexpectedEof.into()));
            }
            hasher.update(&buf[..n]);
            position += n as u64;
        }
        let checksum = hasher.try_finalize().map_err(|e| Error::store(dir, e))?;
        crate::fs::write_all_at(temp.as_file(), checksum.as_bytes(), self.offset)
            .map_err(io_error)?;

        self.entries.sort_unstable_by_key(|entry| entry.0);
        let index = pack_index(&self.entries, &checksum);
        let mut index_temp = crate::fs::temp_file(dir, "tmp_idx_", 0o444)?;
        index_temp
            .write_all(&index)
            .map_err(|e| Error::io("writing pack index", index_temp.path(), e))?;
        let name = format!("pack-{checksum}");
        let pack_path = dir.join(format!("{name}.pack"));
        crate::fs::persist(temp, &pack_path)?;
        let index_path = dir.join(format!("{name}.idx"));
        crate::fs::persist(index_temp, &index_path)?;
        Ok(index_path)
    }
}

/// An object as the delta search sees it.
struct Candidate {
    id: ObjectId,
    kind: gix::objs::Kind,
    size: u64,
    /// The hash of the entry name it is reached under (0: none, a root tree).
    name: u32,
}

/// A hash of an entry name, so that the versions of one file sort together. Costs a
/// multiply-add per byte.
fn name_hash(name: &[u8]) -> u32 {
    name.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// Append every object of `keep` (distinct ids) to the pack `writer` is writing: commits and
/// tags whole, blobs and trees as deltas where that pays (see the module's description).
/// `open` gives each thread its handle on the store. Costs reading every object twice (its
/// header and names of trees, then its data), indexing and trying the window for each blob
/// and tree, and zlib of what is written.
pub(crate) fn write_objects(
    writer: &ObjectWriter,
    git_dir: &Path,
    keep: &[ObjectId],
    open: &(dyn Fn() -> gix::Repository + Sync),
) -> Result<()> {
    let find_error = |id: &ObjectId, e: &dyn std::fmt::Display| {
        Error::store(git_dir, format!("object {id}: {e}"))
    };
    // Kind and size of each object; the names trees give their entries.
    let listed: Vec<(Candidate, Vec<(ObjectId, u32)>)> = keep
        .par_iter()
        .map_init(open, |repo, &id| -> Result<_> {
            let header = repo.find_header(id).map_err(|e| find_error(&id, &e))?;
            let mut names = Vec::new();
            if header.kind() == gix::objs::Kind::Tree {
                let tree = repo.find_tree(id).map_err(|e| find_error(&id, &e))?;
                let decoded = tree.decode().map_err(|e| find_error(&id, &e))?;
                let entries = decoded.entries.iter().filter(|e| !e.mode.is_commit());
                names.extend(entries.map(|e| (e.oid.to_owned(), name_hash(e.filename))));
            }
            let candidate = Candidate {
                id,
                kind: header.kind(),
                size: header.size(),
                name: 0,
            };
            Ok((candidate, names))
        })
        .collect::<Result<_>>()?;
    let mut names: HashMap<ObjectId, u32> = HashMap::new();
    for (child, name) in listed.iter().flat_map(|(_, names)| names) {
        names.entry(*child).or_insert(*name);
    }
    let (mut deltifiable, whole): (Vec<Candidate>, Vec<Candidate>) = listed
        .into_iter()
        .map(|(mut candidate, _)| {
            candidate.name = names.get(&candidate.id).copied().unwrap_or(0);
            candidate
        })
        .partition(|c| {
            matches!(c.kind, gix::objs::Kind::Blob | gix::objs::Kind::Tree)
                && c.size <= MAX_DELTA_OBJECT
        });
    drop(names);
    deltifiable.sort_unstable_by(|a, b| {
        (a.kind as u8, a.name, b.size, a.id).cmp(&(b.kind as u8, b.name, a.size, b.id))
    });

    whole
        .par_iter()
        .map_init(open, |repo, candidate| -> Result<()> {
            let object = repo
                .find_object(candidate.id)
                .map_err(|e| find_error(&candidate.id, &e))?;
            writer.pack_object(candidate.id, object.kind, &object.data)
        })
        .collect::<Result<()>>()?;

    let mut runs = Vec::new();
    let mut rest = deltifiable.as_slice();
    while !rest.is_empty() {
        let mut bytes = 0;
        let len = rest
            .iter()
            .take_while(|c| {
                bytes += c.size;
                bytes <= RUN_BYTES
            })
            .count()
            .max(1);
        runs.push(&rest[..len]);
        rest = &rest[len..];
    }
    let parallel = 2 * rayon::current_num_threads();
    for batch in runs.chunks(parallel) {
        let encoded: Vec<Vec<(ObjectId, Entry)>> = batch
            .par_iter()
            .map_init(open, |repo, run| encode_run(repo, run, &find_error))
            .collect::<Result<_>>()?;
        for entries in encoded {
            writer.append_entries(entries)?;
        }
    }
    Ok(())
}

/// An object in a run's window: a possible delta base.
struct Slot {
    data: Vec<u8>,
    /// Built when the object is first tried as a base.
    index: std::cell::OnceCell<delta::Index>,
    /// Deltas between it and a whole object.
    depth: u32,
    id: ObjectId,
}

/// The entries of `run` (sorted candidates), in order, each a delta against one of the
/// [`WINDOW`] objects of the same kind and name before it where that is less than half the
/// object. Costs reading each object, an index of each object tried as a base, up to
/// [`WINDOW`] delta encodings per object, and zlib of each entry.
fn encode_run(
    repo: &mut gix::Repository,
    run: &[Candidate],
    find_error: &(dyn Fn(&ObjectId, &dyn std::fmt::Display) -> Error + Sync),
) -> Result<Vec<(ObjectId, Entry)>> {
    let mut window: VecDeque<Slot> = VecDeque::new();
    let mut window_bytes = 0;
    let mut out = Vec::with_capacity(run.len());
    for (n, candidate) in run.iter().enumerate() {
        let id = candidate.id;
        if n > 0 && (run[n - 1].kind, run[n - 1].name) != (candidate.kind, candidate.name) {
            window.clear();
            window_bytes = 0;
        }
        let object = repo.find_object(id).map_err(|e| find_error(&id, &e))?;
        let data = object.detach().data;
        let mut best: Option<(&Slot, Vec<u8>)> = None;
        for slot in window.iter().rev().filter(|slot| slot.depth < MAX_DEPTH) {
            let limit = best.as_ref().map_or(data.len() / 2, |(_, d)| d.len() - 1);
            // A delta inserts at least the bytes the target has beyond its base.
            if data.len().saturating_sub(slot.data.len()) > limit {
                continue;
            }
            let index = slot.index.get_or_init(|| delta::Index::new(&slot.data));
            if let Some(delta) = delta::encode(&slot.data, index, &data, limit) {
                best = Some((slot, delta));
            }
        }
        // (zlib's output buffer grows in steps of 32 KB or more: kept until the run is written,
        // each entry is cut to its size.)
        let mut compressed = Vec::new();
        let (entry, depth) = match best {
            Some((base, delta)) => {
                deflate(&[&delta], &mut compressed).map_err(|e| find_error(&id, &e))?;
                compressed.shrink_to_fit();
                let entry = Entry::Delta {
                    base: base.id,
                    size: delta.len() as u64,
                    compressed,
                };
                (entry, base.depth + 1)
            }
            None => {
                push_pack_entry_header(candidate.kind, data.len() as u64, &mut compressed);
                deflate(&[&data], &mut compressed).map_err(|e| find_error(&id, &e))?;
                compressed.shrink_to_fit();
                (Entry::Whole(compressed), 0)
            }
        };
        out.push((id, entry));
        window_bytes += data.len();
        window.push_back(Slot {
            data,
            index: Default::default(),
            depth,
            id,
        });
        while window.len() > WINDOW || (window.len() > 1 && window_bytes > WINDOW_BYTES) {
            let gone = window.pop_front().expect("a slot");
            window_bytes -= gone.data.len();
        }
    }
    Ok(out)
}

/// A version-2 pack index for `entries` (sorted by id): fan-out, ids, CRCs, offsets, checksums.
fn pack_index(entries: &[(ObjectId, u64, u32)], pack_checksum: &ObjectId) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 1024 + entries.len() * 28 + 40);
    out.extend_from_slice(b"\xfftOc");
    out.extend_from_slice(&2u32.to_be_bytes());
    let mut fanout = [0u32; 256];
    for (id, ..) in entries {
        fanout[id.as_bytes()[0] as usize] += 1;
    }
    let mut total = 0;
    for count in fanout {
        total += count;
        out.extend_from_slice(&total.to_be_bytes());
    }
    for (id, ..) in entries {
        out.extend_from_slice(id.as_bytes());
    }
    for (_, _, crc) in entries {
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let mut large = Vec::new();
    for &(_, offset, _) in entries {
        let small = if offset < 0x8000_0000 {
            offset as u32
        } else {
            large.push(offset);
            0x8000_0000 | (large.len() as u32 - 1)
        };
        out.extend_from_slice(&small.to_be_bytes());
    }
    for offset in large {
        out.extend_from_slice(&offset.to_be_bytes());
    }
    out.extend_from_slice(pack_checksum.as_bytes());
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(&out);
    let checksum = hasher.try_finalize().expect("sha1 of an index");
    out.extend_from_slice(checksum.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use std::fs;

    use gix::ObjectId;

    use super::pack_index;

    /// r84 (1): after a write into the pack fails on a full disk, every later append (entries
    /// other threads handed over) and the completion fail as a full disk too, not as a generic
    /// error that whichever thread reports first would pass on. (`/dev/full`: Linux.)
    #[cfg(target_os = "linux")]
    #[test]
    fn a_pack_broken_by_a_full_disk_says_so_to_every_later_caller() {
        let dir = tempfile::tempdir().unwrap();
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let path = tempfile::NamedTempFile::new_in(dir.path())
            .unwrap()
            .into_temp_path();
        let mut pack =
            super::PackBuilder::new(tempfile::NamedTempFile::from_parts(full, path)).unwrap();
        let id = |n: u8| ObjectId::from_bytes_or_panic(&[n; 20]);
        // (Larger than the write buffer, so that it reaches the file at once.)
        let first = pack.append(id(1), &vec![7; 2 << 20]).unwrap_err();
        assert_eq!(first.kind(), std::io::ErrorKind::StorageFull);
        let later = pack.append(id(2), b"small").unwrap_err();
        assert_eq!(later.kind(), std::io::ErrorKind::StorageFull, "{later}");
        let finished = pack.finish(dir.path()).unwrap_err();
        assert_eq!(finished.code(), "disk_full", "{finished}");
    }

    /// The index of a pack git wrote (blobs and deltas) equals the one `git index-pack` writes
    /// for it, byte for byte, given the (id, offset, CRC) rows `git verify-pack -v` lists.
    #[test]
    fn pack_index_equals_git_index_pack() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        let git = |args: &[&str], input: Option<&[u8]>| {
            crate::testing::git_ok(repo, args, input.unwrap_or_default())
        };
        git(&["init", "-q", "--bare"], None);
        let mut ids = String::new();
        for i in 0..300u32 {
            // Similar blobs, so that the pack holds deltas as well as whole objects.
            let text: String = std::iter::once(format!("blob {i}\n"))
                .chain((0..50).map(|line| format!("line {line}\n")))
                .collect();
            let id = git(&["hash-object", "-w", "--stdin"], Some(text.as_bytes()));
            ids.push_str(std::str::from_utf8(&id).unwrap());
        }
        let pack = git(&["pack-objects", "--stdout"], Some(ids.as_bytes()));
        fs::write(repo.join("p.pack"), &pack).unwrap();
        git(&["index-pack", "-o", "p.idx", "p.pack"], None);
        let listing = git(&["verify-pack", "-v", "p.idx"], None);
        let mut entries: Vec<(ObjectId, u64, u32)> = std::str::from_utf8(&listing)
            .unwrap()
            .lines()
            .filter_map(|line| {
                // id type size size-in-pack offset [depth base]
                let fields: Vec<&str> = line.split_whitespace().collect();
                let id = ObjectId::from_hex(fields.first()?.as_bytes()).ok()?;
                let len: usize = fields.get(3)?.parse().ok()?;
                let offset: u64 = fields.get(4)?.parse().ok()?;
                let raw = &pack[offset as usize..offset as usize + len];
                Some((id, offset, crc32fast::hash(raw)))
            })
            .collect();
        assert_eq!(entries.len(), 300);
        assert!(
            listing.windows(5).any(|w| w == b"delta"),
            "the pack holds deltas"
        );
        entries.sort_unstable_by_key(|entry| entry.0);
        let checksum = ObjectId::from_bytes_or_panic(&pack[pack.len() - 20..]);
        let ours = pack_index(&entries, &checksum);
        assert!(
            ours == fs::read(repo.join("p.idx")).unwrap(),
            "the index differs from git's"
        );
    }

    /// Offsets past 2 GiB go to the large-offset table, in order, their small entry naming it.
    #[test]
    fn pack_index_puts_offsets_past_2_gib_in_the_large_table() {
        let id = |b: u8| ObjectId::from_bytes_or_panic(&[b; 20]);
        let entries = [
            (id(1), 12, 7),
            (id(2), 0x8000_0000, 8),
            (id(3), 0x1_0000_0000, 9),
        ];
        let index = pack_index(&entries, &id(9));
        let offsets = 8 + 256 * 4 + 3 * 20 + 3 * 4;
        let word = |at: usize| u32::from_be_bytes(index[at..at + 4].try_into().unwrap());
        assert_eq!(
            [word(offsets), word(offsets + 4), word(offsets + 8)],
            [12, 0x8000_0000, 0x8000_0001]
        );
        let large = offsets + 12;
        assert_eq!(
            index[large..large + 16],
            [0x8000_0000u64.to_be_bytes(), 0x1_0000_0000u64.to_be_bytes()].concat()
        );
        assert_eq!(index.len(), large + 16 + 40);
    }
}
