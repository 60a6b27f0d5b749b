//! Writing git objects into the store, from several threads at once, exactly as git lays them out.
//!
//! * Loose objects: zlib level 1 (git's `core.looseCompression`), a `tmp_obj_*` temp file in the
//!   object's own fan-out directory, then a rename. Each thread reuses one zlib compressor.
//! * Pack mode, for a first snapshot: new objects are appended to packs of about 128 MiB
//!   instead of creating tens of thousands of files (most of a first snapshot's system time). A
//!   pack and its version-2 index become visible only when complete, renamed into
//!   `objects/pack/`, the pack first, as git does: each full one on a thread of its own while the
//!   next is written, the last by [`ObjectWriter::finish_pack`]. A repack writes one pack.
//!
//! * Effort: an object of 1 MiB or more whose first 64 KiB shrink by less than a tenth at level 1
//!   (random or already compressed data) is written at level 0, stored deflate blocks, as git
//!   stores files past `core.bigFileThreshold` without searching them: still a zlib stream any
//!   git reads, at the cost of copying instead of compressing.
//!
//! Either way a killed process leaves only `tmp_*` files, which git ignores and prune removes.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use gix::zlib::stream::deflate::{Compress, FlushCompress};
use gix::ObjectId;

use gix::bstr::BStr;
use std::time::SystemTime;

use crate::error::{object_error, Error, Result};
use crate::store::pack::{push_pack_entry_header, Entry, PackBuilder};
use crate::store::Store;

/// Writes objects into one store's `objects/` directory.
pub(crate) struct ObjectWriter {
    objects_dir: PathBuf,
    fanout_made: [AtomicBool; 256],
    /// The packs' indices, asked only about objects that are not loose; reopened by
    /// [`Self::refresh`] when `objects/pack` changed (another process's prune may have replaced them).
    packs: Mutex<Arc<Packs>>,
    pack: Mutex<Option<PackSession>>,
    /// Pack entries handed over while another thread held `pack`, which appends them before it
    /// lets go: a thread never waits for another's write into the pack.
    handed: Mutex<Handed>,
    /// How many times [`Self::refresh`] found `objects/pack` changed.
    generation: std::sync::atomic::AtomicU64,
    /// Trees written or read here, for the diffs of a long-lived process.
    trees: TreeCache,
}

/// Pack mode: the pack being written and, for a first snapshot, the earlier segments.
struct PackSession {
    current: PackBuilder,
    /// Start another pack once the current one holds this many bytes; `None` for one pack (a
    /// repack, whose deltas point back into it).
    segment_bytes: Option<u64>,
    /// The ids in earlier segments.
    earlier: HashSet<ObjectId>,
    /// Earlier segments being completed (checksum, index, rename) on threads of their own.
    finishing: Vec<std::thread::JoinHandle<Result<PathBuf>>>,
}

/// Compressed pack entries waiting for the thread that holds the pack.
#[derive(Default)]
struct Handed {
    entries: Vec<(ObjectId, Vec<u8>)>,
    bytes: usize,
}

/// Past this many bytes handed over, a thread waits for the pack instead: a bound on the memory
/// entries waiting can take.
const HANDED_BYTES: usize = 64 << 20;

/// The size at which a first snapshot's pack is completed on a thread of its own while the walk
/// goes on, so that the one re-read and hash of each pack at its end is not all left for after
/// the walk: a first snapshot of 1.2 GB of pack waited about a second for it on one core.
const SEGMENT_BYTES: u64 = 128 << 20;

/// Trees a process wrote (loose) or read, by id, so that a long-lived process (`serve`) diffs
/// the snapshots it took or read before without reading their trees again: an object's bytes
/// never change, so a hit is never stale. Emptied when objects may have gone (packs changed,
/// a prune removed loose objects) and when it would grow past [`TREE_CACHE_BYTES`].
#[derive(Default)]
pub(crate) struct TreeCache(Mutex<HeldTrees>);

/// The trees a [`TreeCache`] holds, and their cost in bytes.
#[derive(Default)]
struct HeldTrees {
    trees: HashMap<ObjectId, Arc<[u8]>>,
    bytes: usize,
}

/// The most a [`TreeCache`] holds, counting each tree's data and 64 bytes of overhead: the
/// trees of a 200,000-file project take about 10 MiB.
const TREE_CACHE_BYTES: usize = 64 << 20;

impl TreeCache {
    /// The data of tree `id`, if held. Costs a hash lookup under a mutex.
    pub(crate) fn get(&self, id: &gix::oid) -> Option<Arc<[u8]>> {
        lock(&self.0).trees.get(id).cloned()
    }

    /// Hold `data`, the data of tree `id`.
    pub(crate) fn insert(&self, id: ObjectId, data: Arc<[u8]>) {
        let cost = |data: &[u8]| data.len() + 64;
        let mut cache = lock(&self.0);
        let HeldTrees { trees, bytes } = &mut *cache;
        if *bytes + cost(&data) > TREE_CACHE_BYTES {
            trees.clear();
            *bytes = 0;
        }
        *bytes += cost(&data);
        if let Some(old) = trees.insert(id, data) {
            *bytes -= cost(&old);
        }
    }

    /// Forget every tree.
    pub(crate) fn clear(&self) {
        *lock(&self.0) = Default::default();
    }
}

/// `objects/pack` at one moment: every name in it, and each `.idx` opened (memory-mapped).
#[derive(Default)]
struct Packs {
    listing: Vec<String>,
    indices: Vec<gix::odb::pack::index::File>,
}

impl Packs {
    /// Costs a binary search of each pack index.
    fn contain(&self, id: &gix::oid) -> bool {
        self.indices.iter().any(|index| index.lookup(id).is_some())
    }
}

/// What [`ObjectWriter::verify_loose`] found.
#[derive(Default)]
pub(crate) struct LooseCheck {
    /// Sound loose objects.
    pub(crate) loose: Vec<ObjectId>,
    /// Objects neither loose nor packed, or loose files that no longer hold their object.
    pub(crate) lost: Vec<ObjectId>,
}

thread_local! {
    /// This thread's inflater (its state is a few tens of KiB: made once, reset per object).
    static INFLATE: RefCell<gix::zlib::Decompress> = RefCell::new(gix::zlib::Decompress::new());

    /// One compressor per thread, reset per object: creating one allocates and zeroes ~300 KB.
    static DEFLATE: RefCell<Compress> = RefCell::new(Compress::new(gix::zlib::Compression::BEST_SPEED));
    /// Level 0 (stored blocks, still a zlib stream), for data a probe found incompressible.
    static STORE_ONLY: RefCell<Compress> = RefCell::new(Compress::new(gix::zlib::Compression::NONE));
}

/// Objects from this size on are probed before they are compressed; smaller ones always get level 1.
const PROBE_FROM: u64 = 1 << 20;
/// How much of the start of an object's data a probe compresses.
const PROBE_BYTES: usize = 64 << 10;

impl ObjectWriter {
    pub(crate) fn new(objects_dir: PathBuf) -> Self {
        let writer = ObjectWriter {
            objects_dir,
            fanout_made: std::array::from_fn(|_| AtomicBool::new(false)),
            packs: Mutex::default(),
            pack: Mutex::new(None),
            handed: Mutex::default(),
            generation: Default::default(),
            trees: TreeCache::default(),
        };
        writer.refresh();
        writer
    }

    /// Look at the packs again; whether they changed since the last look. Called under the store
    /// lock before writing, so that an object another process pruned is written again.
    /// Costs one `readdir` of `objects/pack` when nothing changed. An index that cannot be
    /// opened is left out (its objects count as missing and are written again).
    pub(crate) fn refresh(&self) -> bool {
        let dir = self.objects_dir.join("pack");
        let mut listing: Vec<String> = fs::read_dir(&dir)
            .map(|entries| {
                let names = entries.flatten().map(|e| e.file_name());
                names
                    .map(|name| name.to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        listing.sort();
        let mut packs = lock(&self.packs);
        if packs.listing == listing {
            return false;
        }
        let indices = listing
            .iter()
            .filter(|name| name.ends_with(".idx"))
            .filter_map(|name| {
                gix::odb::pack::index::File::at(dir.join(name), gix::hash::Kind::Sha1).ok()
            })
            .collect();
        *packs = Arc::new(Packs { listing, indices });
        self.trees.clear();
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        true
    }

    /// The trees this process wrote or read.
    pub(crate) fn trees(&self) -> &TreeCache {
        &self.trees
    }

    /// Changes each time [`Self::refresh`] finds the packs changed (objects may be gone).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The names in `objects/pack` at the last [`refresh`](Self::refresh), sorted. Packs are
    /// never changed in place, so while this stays the same, so do the packed objects.
    pub(crate) fn pack_listing(&self) -> Vec<String> {
        lock(&self.packs).listing.clone()
    }

    /// Whether a pack holds `id`. Costs a binary search of each pack index.
    pub(crate) fn in_packs(&self, id: &gix::oid) -> bool {
        let packs = Arc::clone(&lock(&self.packs));
        packs.contain(id)
    }

    fn loose_path(&self, id: &gix::oid) -> PathBuf {
        loose_path(&self.objects_dir, id)
    }

    /// Whether the store has object `id`: one `stat`, plus a pack lookup when packs exist.
    pub(crate) fn contains(&self, id: &gix::oid) -> bool {
        if self.loose_path(id).exists() {
            return true;
        }
        if let Some(session) = lock(&self.pack).as_ref() {
            if session.current.offsets.contains_key(id) || session.earlier.contains(id) {
                return true;
            }
        }
        self.in_packs(id)
    }

    /// Sort `ids`, which were all in the store at `since`, into sound loose objects and lost ones:
    /// in no pack and not a loose file, or a loose file changed after `since` (rewind never
    /// changes one) that no longer inflates to its object. A file that cannot be read proves
    /// nothing and counts as sound. Costs a `stat` per id, and inflating and hashing the files
    /// changed after `since` (normally none).
    pub(crate) fn verify_loose(
        &self,
        ids: &[ObjectId],
        since: gix::index::entry::stat::Time,
    ) -> LooseCheck {
        let since = (i64::from(since.secs), i64::from(since.nsecs));
        let mut check = LooseCheck::default();
        for &id in ids {
            let path = self.loose_path(&id);
            let sound = match crate::fs::changed_at(&path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound && self.in_packs(&id) => continue, // packed since
                Err(e) if e.kind() == io::ErrorKind::NotFound => false,
                Err(_) => true,
                Ok(changed) if changed <= since => true,
                Ok(_) => crate::fs::read_store_file(&path)
                    .map_or(true, |bytes| holds_object(&bytes, &id)),
            };
            match sound {
                true => check.loose.push(id),
                false => check.lost.push(id),
            }
        }
        check
    }

    /// Delete the loose file of object `id`, if there is one (a damaged copy, so that the next
    /// write puts the object back).
    pub(crate) fn remove_loose(&self, id: &gix::oid) -> Result<()> {
        let path = self.loose_path(id);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(Error::io("removing damaged object", &path, e))
            }
            _ => Ok(()),
        }
    }

    /// Hash `data` as an object of `kind` and store it unless present. Costs a hash of `data`,
    /// plus zlib and a file write (or a pack append) when the object is new.
    pub(crate) fn write(&self, kind: gix::objs::Kind, data: &[u8]) -> Result<ObjectId> {
        let header = gix::objs::encode::loose_header(kind, data.len() as u64);
        let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
        hasher.update(&header);
        hasher.update(data);
        let id = hasher
            .try_finalize()
            .map_err(|e| Error::store(&self.objects_dir, e))?;
        if lock(&self.pack).is_some() {
            if !self.contains(&id) {
                self.pack_object(id, kind, data)?;
            }
            return Ok(id);
        }
        if kind == gix::objs::Kind::Tree {
            self.trees.insert(id, data.into());
        }
        if self.contains(&id) {
            return Ok(id);
        }
        let mut compressed = Vec::with_capacity(data.len() / 2 + 64);
        deflate(&[&header, data], &mut compressed).map_err(|e| self.write_error(e))?;
        let target = self.loose_path(&id);
        let dir = target.parent().expect("fan-out directory");
        let mut temp = self.in_fanout(id.as_bytes()[0], dir, || temp_file(dir, "tmp_obj_"))?;
        temp.write_all(&compressed)
            .map_err(|e| Error::io("writing object", temp.path(), e))?;
        crate::fs::persist(temp, &target)?;
        Ok(id)
    }

    /// Append object `id` to the pack being written, whether or not the store has it elsewhere
    /// (repacking). Costs zlib of `data`, then an append: here, or by the thread that holds the
    /// pack (see [`Handed`]).
    pub(crate) fn pack_object(
        &self,
        id: ObjectId,
        kind: gix::objs::Kind,
        data: &[u8],
    ) -> Result<()> {
        let mut compressed = Vec::with_capacity(data.len() / 2 + 64);
        push_pack_entry_header(kind, data.len() as u64, &mut compressed);
        deflate(&[data], &mut compressed).map_err(|e| self.write_error(e))?;
        let mut handed = lock(&self.handed);
        handed.bytes += compressed.len();
        handed.entries.push((id, compressed));
        let wait = handed.bytes > HANDED_BYTES;
        drop(handed);
        loop {
            let mut session = match self.pack.try_lock() {
                Ok(session) => session,
                Err(std::sync::TryLockError::WouldBlock) if !wait => return Ok(()),
                Err(std::sync::TryLockError::WouldBlock) => lock(&self.pack),
                Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            };
            if !self.append_handed(&mut session)? {
                return Ok(());
            }
        }
    }

    /// Append the entries handed over so far to the pack `session` holds (starting another
    /// segment where one is full); whether there were any. Costs the writes.
    fn append_handed(&self, session: &mut Option<PackSession>) -> Result<bool> {
        let handed = std::mem::take(&mut *lock(&self.handed));
        if handed.entries.is_empty() {
            return Ok(false);
        }
        let session = session
            .as_mut()
            .ok_or_else(|| Error::store(&self.objects_dir, "no pack is being written"))?;
        for (id, entry) in handed.entries {
            let pack = &mut session.current;
            pack.append(id, &entry)
                .map_err(|e| Error::io("writing pack", &pack.path, e))?;
            if session
                .segment_bytes
                .is_some_and(|limit| pack.len() >= limit)
            {
                self.next_segment(session)?;
            }
        }
        Ok(true)
    }

    /// Append `entries` in order to the pack being written (a delta after its base). Costs the
    /// writes, under the pack's lock.
    pub(super) fn append_entries(&self, entries: Vec<(ObjectId, Entry)>) -> Result<()> {
        let mut session = lock(&self.pack);
        self.append_handed(&mut session)?;
        let pack = &mut session
            .as_mut()
            .ok_or_else(|| Error::store(&self.objects_dir, "no pack is being written"))?
            .current;
        for (id, entry) in entries {
            pack.append_entry(id, entry)
                .map_err(|e| Error::io("writing pack", &pack.path, e))?;
        }
        Ok(())
    }

    /// Stream `size` bytes of `file` into a loose blob (for files too large to read whole): hash
    /// and compress in one pass into a temp file, then move it into place unless present. The
    /// first chunk read picks the effort (see [`compressor_for`]).
    /// The outer error is about the store; the inner one about reading `file`, including a
    /// file whose length changed while it was read.
    pub(crate) fn write_blob_stream(
        &self,
        mut file: fs::File,
        size: u64,
    ) -> Result<io::Result<ObjectId>> {
        let header = gix::objs::encode::loose_header(gix::objs::Kind::Blob, size);
        let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
        hasher.update(&header);
        let temp = temp_file(&self.objects_dir, "tmp_obj_")?;
        let mut out = BufWriter::new(temp);
        let mut buf = vec![0; 1 << 20];
        let mut compressed = Vec::new();
        let mut n = match read_some(&mut file, &mut buf) {
            Ok(n) => n,
            Err(e) => return Ok(Err(e)),
        };
        let compressor = compressor_for(size, &buf[..n]);
        let read = compressor.with_borrow_mut(|compress| -> Result<io::Result<()>> {
            compress.reset();
            deflate_step(compress, &header, FlushCompress::None, &mut compressed)
                .map_err(|e| self.write_error(e))?;
            let mut total = 0u64;
            while n > 0 {
                total += n as u64;
                if total > size {
                    break;
                }
                hasher.update(&buf[..n]);
                deflate_step(compress, &buf[..n], FlushCompress::None, &mut compressed)
                    .and_then(|()| out.write_all(&compressed))
                    .map_err(|e| self.write_error(e))?;
                compressed.clear();
                n = match read_some(&mut file, &mut buf) {
                    Ok(n) => n,
                    Err(e) => return Ok(Err(e)),
                };
            }
            if total != size {
                return Ok(Err(io::Error::other("the file changed while it was read")));
            }
            deflate_step(compress, &[], FlushCompress::Finish, &mut compressed)
                .and_then(|()| out.write_all(&compressed))
                .map_err(|e| self.write_error(e))?;
            Ok(Ok(()))
        })?;
        if let Err(e) = read {
            return Ok(Err(e));
        }
        let id = hasher
            .try_finalize()
            .map_err(|e| Error::store(&self.objects_dir, e))?;
        if !self.contains(&id) {
            let temp = out
                .into_inner()
                .map_err(|e| self.write_error(e.into_error()))?;
            let target = self.loose_path(&id);
            // (One `mkdir` for a streamed file: another process may have removed the directory.)
            self.fanout_made[id.as_bytes()[0] as usize].store(false, Ordering::Relaxed);
            self.ensure_fanout(id.as_bytes()[0], target.parent().expect("fan-out dir"))?;
            crate::fs::persist(temp, &target)?;
        }
        Ok(Ok(id))
    }

    /// From now on, append new objects (except streamed blobs) to one new pack.
    pub(crate) fn start_pack(&self) -> Result<()> {
        self.start_pack_session(None)
    }

    /// From now on, append new objects (except streamed blobs) to new packs of about
    /// [`SEGMENT_BYTES`] each, each completed while the next is written (a first snapshot).
    pub(crate) fn start_segmented_pack(&self) -> Result<()> {
        self.start_pack_session(Some(SEGMENT_BYTES))
    }

    fn start_pack_session(&self, segment_bytes: Option<u64>) -> Result<()> {
        let current = self.new_pack()?;
        *lock(&self.pack) = Some(PackSession {
            current,
            segment_bytes,
            earlier: HashSet::new(),
            finishing: Vec::new(),
        });
        Ok(())
    }

    fn new_pack(&self) -> Result<PackBuilder> {
        let dir = self.objects_dir.join("pack");
        fs::create_dir_all(&dir).map_err(|e| Error::io("creating pack directory", &dir, e))?;
        PackBuilder::new(temp_file(&dir, "tmp_pack_")?)
    }

    /// Hand `session`'s current pack to a thread that completes it and puts it in place, and
    /// go on in a new one. Its objects are then visible to other processes before the snapshot
    /// that needs them is recorded, like any object written before its snapshot.
    fn next_segment(&self, session: &mut PackSession) -> Result<()> {
        let full = std::mem::replace(&mut session.current, self.new_pack()?);
        session.earlier.extend(full.offsets.keys().copied());
        let dir = self.objects_dir.join("pack");
        let finishing = std::thread::Builder::new()
            .name("rewind-pack".into())
            .spawn(move || full.finish(&dir))
            .map_err(|e| Error::io("starting a thread for", &self.objects_dir, e))?;
        session.finishing.push(finishing);
        Ok(())
    }

    /// Leave pack mode. With `keep`, complete the pack: header, checksum, index, then rename
    /// both into place (costs one re-read of the pack), after the earlier segments are in
    /// place. Without, delete it (earlier segments stay: other processes may use their objects
    /// already; prune removes them once nothing needs them).
    /// Returns the `.idx` path of the last pack put in place.
    pub(crate) fn finish_pack(&self, keep: bool) -> Result<Option<PathBuf>> {
        let mut session = lock(&self.pack);
        let handed = self.append_handed(&mut session);
        let Some(session) = session.take() else {
            return Ok(None);
        };
        let mut last = None;
        let mut failed = handed.err();
        for finishing in session.finishing {
            match finishing.join() {
                Ok(Ok(index)) => last = Some(index),
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(_) => {
                    let e = Error::store(&self.objects_dir, "completing a pack failed");
                    failed = failed.or(Some(e));
                }
            }
        }
        if let Some(e) = failed.filter(|_| keep) {
            return Err(e);
        }
        if keep && !session.current.entries.is_empty() {
            last = Some(session.current.finish(&self.objects_dir.join("pack"))?);
        } // otherwise the temp file is removed on drop
        if last.is_some() {
            self.refresh();
        }
        Ok(last.filter(|_| keep))
    }

    fn write_error(&self, e: io::Error) -> Error {
        Error::io("writing object", &self.objects_dir, e)
    }

    /// Run `create` (a file) in fan-out directory `dir` (number `fanout`), made first unless
    /// this process made it already; once more after making it again when it is gone (a prune
    /// in another process, or a person's `git prune`, removes empty fan-out directories).
    fn in_fanout<T>(&self, fanout: u8, dir: &Path, create: impl Fn() -> Result<T>) -> Result<T> {
        self.ensure_fanout(fanout, dir)?;
        match create() {
            Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                self.fanout_made[fanout as usize].store(false, Ordering::Relaxed);
                self.ensure_fanout(fanout, dir)?;
                create()
            }
            other => other,
        }
    }

    /// Create fan-out directory `dir` (number `fanout`) unless this process did already.
    fn ensure_fanout(&self, fanout: u8, dir: &Path) -> Result<()> {
        let made = &self.fanout_made[fanout as usize];
        if !made.load(Ordering::Relaxed) {
            match fs::create_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io("creating object directory", dir, e)),
            }
            made.store(true, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Whether `compressed`, the bytes of a loose file, are exactly one complete zlib stream that
/// inflates to object `id` (header included). Costs zlib and SHA-1 over the object.
fn holds_object(compressed: &[u8], id: &gix::oid) -> bool {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    inflate_each(compressed, |chunk| hasher.update(chunk))
        && hasher.try_finalize().is_ok_and(|actual| actual == id)
}

/// Inflate `compressed`, which must be exactly one complete zlib stream, handing each piece
/// of the output to `each`; `false` when it is not such a stream. Costs zlib over it.
fn inflate_each(mut input: &[u8], mut each: impl FnMut(&[u8])) -> bool {
    use gix::zlib::{FlushDecompress, Status};
    let mut buf = vec![0; (input.len() * 4).clamp(4 << 10, 64 << 10)];
    INFLATE.with_borrow_mut(|state| {
        state.reset();
        loop {
            let (before_in, before_out) = (state.total_in(), state.total_out());
            let Ok(status) = state.decompress(input, &mut buf, FlushDecompress::None) else {
                return false;
            };
            let consumed = (state.total_in() - before_in) as usize;
            let written = (state.total_out() - before_out) as usize;
            each(&buf[..written]);
            input = &input[consumed..];
            match status {
                Status::StreamEnd => return input.is_empty(),
                _ if consumed == 0 && written == 0 => return false, // the stream is cut short
                _ => {}
            }
        }
    })
}

/// Where the loose file of object `id` is in `objects_dir`.
fn loose_path(objects_dir: &Path, id: &gix::oid) -> PathBuf {
    let hex = id.to_hex().to_string();
    objects_dir.join(&hex[..2]).join(&hex[2..])
}

/// Object `id` (reached at `path`, for messages): its kind and data. A loose object is read
/// whole from its file (an open, a read and an inflate: gix maps each loose file into memory,
/// and unmapping it costs every thread of the process a TLB flush, which made reading a few
/// thousand trees in parallel no faster than on one thread); anything else comes from the
/// packs through `repo`. Costs zlib over the object (and, for a packed one, its deltas).
pub(crate) fn read_object(
    repo: &gix::Repository,
    id: ObjectId,
    path: &BStr,
) -> Result<(gix::objs::Kind, Vec<u8>)> {
    let file = loose_path(&repo.git_dir().join("objects"), &id);
    let compressed = match crate::fs::read_store_file(&file) {
        Ok(compressed) => compressed,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let object = repo
                .find_object(id)
                .map_err(|e| object_error(&id, path, e))?;
            return Ok((object.kind, object.detach().data));
        }
        Err(e) => return Err(object_error(&id, path, e)),
    };
    let mut data = Vec::new();
    if !inflate_each(&compressed, |chunk| data.extend_from_slice(chunk)) {
        return Err(object_error(
            &id,
            path,
            "its loose file is not one zlib stream",
        ));
    }
    let (kind, size, header) =
        gix::objs::decode::loose_header(&data).map_err(|e| object_error(&id, path, e))?;
    if data.len() - header != size as usize {
        return Err(object_error(&id, path, "its loose file's size is wrong"));
    }
    data.drain(..header);
    Ok((kind, data))
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A read-only temp file named `{prefix}*` (names git tolerates in its object directories).
fn temp_file(dir: &Path, prefix: &str) -> Result<tempfile::NamedTempFile> {
    crate::fs::temp_file(dir, prefix, 0o444)
}

/// The compressor for an object of `size` bytes whose data starts with `start`: level 1, or level
/// 0 when `size` is at least [`PROBE_FROM`] and the first [`PROBE_BYTES`] of `start` shrink by
/// less than a tenth at level 1 (random or already compressed data: images, archives, models).
/// Costs zlib over those bytes, about 6% of compressing a 1 MiB object, for objects that large.
fn compressor_for(size: u64, start: &[u8]) -> &'static std::thread::LocalKey<RefCell<Compress>> {
    if size < PROBE_FROM {
        return &DEFLATE;
    }
    let sample = &start[..start.len().min(PROBE_BYTES)];
    let mut out = Vec::with_capacity(sample.len() + 1024);
    let probed = DEFLATE.with_borrow_mut(|compress| {
        compress.reset();
        deflate_step(compress, sample, FlushCompress::Finish, &mut out)
    });
    match probed {
        Ok(()) if out.len() * 10 >= sample.len() * 9 => &STORE_ONLY,
        _ => &DEFLATE,
    }
}

/// zlib-compress `parts` as one stream onto `out`, with this thread's compressor for the effort
/// the last part (the object's data) calls for (see [`compressor_for`]).
pub(super) fn deflate(parts: &[&[u8]], out: &mut Vec<u8>) -> io::Result<()> {
    let data = parts.last().copied().unwrap_or_default();
    compressor_for(data.len() as u64, data).with_borrow_mut(|compress| {
        compress.reset();
        for part in parts {
            deflate_step(compress, part, FlushCompress::None, out)?;
        }
        deflate_step(compress, &[], FlushCompress::Finish, out)
    })
}

/// `read` into `buf`, again when interrupted; 0 at the end of the file.
fn read_some(file: &mut fs::File, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Feed `input` to `compress` and append what it produces to `out`; with `Finish`, end the stream.
fn deflate_step(
    compress: &mut Compress,
    mut input: &[u8],
    flush: FlushCompress,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    loop {
        let start = out.len();
        let space = (input.len() / 2).max(1 << 15);
        out.resize(start + space, 0);
        let (in_before, out_before) = (compress.total_in(), compress.total_out());
        let status = compress
            .compress(input, &mut out[start..], flush)
            .map_err(io::Error::other)?;
        let produced = (compress.total_out() - out_before) as usize;
        input = &input[(compress.total_in() - in_before) as usize..];
        out.truncate(start + produced);
        let done = match status {
            gix::zlib::Status::StreamEnd => true,
            _ => flush != FlushCompress::Finish && input.is_empty() && produced < space,
        };
        if done {
            return Ok(());
        }
    }
}

/// The store's index at `path`, read by gix (its checksum not checked); `None` when it cannot
/// be read, or is not a regular file (a look first, never waiting on a FIFO: gix opens it
/// again by its name).
pub(crate) fn read_index(path: &std::path::Path) -> Option<gix::index::File> {
    crate::fs::open_store_file(path, fs::OpenOptions::new().read(true)).ok()?;
    gix::index::File::at(path, gix::hash::Kind::Sha1, true, Default::default()).ok()
}

impl Store {
    /// The ids the stat cache names: its entries and its cache-tree.
    pub(crate) fn index_roots(&self) -> Vec<ObjectId> {
        let Some(index) = read_index(&self.git_dir().join("index")) else {
            return Vec::new();
        };
        let mut roots: Vec<ObjectId> = index.entries().iter().map(|e| e.id).collect();
        let mut trees: Vec<&gix::index::extension::Tree> = index.tree().into_iter().collect();
        while let Some(tree) = trees.pop() {
            if tree.num_entries.is_some() {
                roots.push(tree.id);
            }
            trees.extend(&tree.children);
        }
        roots
    }

    /// Every object reachable from `roots`. Blobs are named by their trees, never read;
    /// each tree and commit is read once. A missing object ends its branch of the walk.
    pub(crate) fn reachable(&self, roots: Vec<ObjectId>) -> HashSet<ObjectId> {
        self.reachable_around(roots, &HashSet::new())
    }

    /// [`Self::reachable`], as if the commits in `hollow` were cut out of every chain: their
    /// parents stay reachable, they do not, nor their trees (unless reached otherwise).
    pub(crate) fn reachable_around(
        &self,
        roots: Vec<ObjectId>,
        hollow: &HashSet<ObjectId>,
    ) -> HashSet<ObjectId> {
        let repo = self.repo();
        let mut seen = HashSet::new();
        let mut stack = roots;
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let Ok(object) = repo.find_object(id) else {
                continue;
            };
            match object.kind {
                gix::objs::Kind::Commit => {
                    if let Ok(commit) = object.try_into_commit() {
                        if hollow.contains(&id) {
                            seen.remove(&id);
                        } else {
                            stack.extend(commit.tree_id().ok().map(|t| t.detach()));
                        }
                        stack.extend(commit.parent_ids().map(|p| p.detach()));
                    }
                }
                gix::objs::Kind::Tree => {
                    let tree = object.into_tree();
                    let Ok(decoded) = tree.decode() else { continue };
                    for entry in &decoded.entries {
                        if entry.mode.is_tree() {
                            stack.push(entry.oid.to_owned());
                        } else if !entry.mode.is_commit() {
                            seen.insert(entry.oid.to_owned());
                        }
                    }
                }
                gix::objs::Kind::Tag => {
                    if let Ok(tag) = object.try_into_tag() {
                        stack.extend(tag.target_id().ok().map(|t| t.detach()));
                    }
                }
                gix::objs::Kind::Blob => {}
            }
        }
        seen
    }

    /// Every loose object file, with its id and modification time.
    pub(crate) fn loose_objects(&self) -> Vec<LooseObject> {
        let objects = self.git_dir().join("objects");
        let mut found = Vec::new();
        for fanout in 0..=255u8 {
            let dir = objects.join(format!("{fanout:02x}"));
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let hex = format!("{fanout:02x}{}", name.to_string_lossy());
                // Anything else in a fan-out directory (temp files, strays) is not an object.
                let Ok(id) = ObjectId::from_hex(hex.as_bytes()) else {
                    continue;
                };
                let Ok(meta) = entry.metadata() else { continue };
                found.push(LooseObject {
                    id,
                    path: entry.path(),
                    modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                });
            }
        }
        found
    }
}

/// A loose object file, as [`Store::loose_objects`] found it.
pub(crate) struct LooseObject {
    pub(crate) id: ObjectId,
    pub(crate) path: PathBuf,
    pub(crate) modified: SystemTime,
}

/// What may be asked of a store's objects without its lock (writing takes the lock's
/// [`ObjectWriter`]): the trees this process holds, and objects read knowing which are packed.
#[derive(Clone, Copy)]
pub(crate) struct Reads<'a>(pub(crate) &'a ObjectWriter);

impl Reads<'_> {
    /// The trees this process wrote or read.
    pub(crate) fn trees(&self) -> &TreeCache {
        self.0.trees()
    }

    /// [`read_object`], from the packs without looking for a loose file first when a pack
    /// the store knows of holds `id` (a failed `open` is most of reading a packed tree): for
    /// the many reads of a diff or a restore. Costs a binary search of each pack index more.
    pub(crate) fn object(
        &self,
        repo: &gix::Repository,
        id: ObjectId,
        path: &BStr,
    ) -> Result<(gix::objs::Kind, Vec<u8>)> {
        if self.0.in_packs(&id) {
            if let Ok(object) = repo.find_object(id) {
                return Ok((object.kind, object.detach().data));
            }
        }
        read_object(repo, id, path)
    }
}

/// The bytes of blob `id` at `path`.
pub(crate) fn read_blob(repo: &gix::Repository, id: ObjectId, path: &BStr) -> Result<Vec<u8>> {
    blob_of(read_object(repo, id, path)?, id, path)
}

/// The data of `object`, which must be blob `id` (at `path`, for messages).
pub(crate) fn blob_of(
    (kind, data): (gix::objs::Kind, Vec<u8>),
    id: ObjectId,
    path: &BStr,
) -> Result<Vec<u8>> {
    match kind {
        gix::objs::Kind::Blob => Ok(data),
        kind => Err(object_error(
            &id,
            path,
            format!("a {kind} where a blob belongs"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use rayon::prelude::*;

    use super::*;

    /// A loose file for a blob of `data`, and the blob's id (as git computes it).
    fn loose_blob(data: &[u8]) -> (Vec<u8>, ObjectId) {
        let header = gix::objs::encode::loose_header(gix::objs::Kind::Blob, data.len() as u64);
        let mut compressed = Vec::new();
        deflate(&[&header, data], &mut compressed).unwrap();
        let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, data);
        (compressed, id.unwrap())
    }

    /// A pack session in segments, fed from several threads at once (so that entries are
    /// handed over while another thread appends, and segments are completed while the next is
    /// written), leaves packs that git verifies, holding every object under git's id.
    #[test]
    fn segmented_pack_written_from_threads_is_what_git_reads() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        crate::testing::git_ok(repo, &["init", "-q", "--bare"], b"");
        let writer = ObjectWriter::new(repo.join("objects"));
        writer.start_pack_session(Some(64 << 10)).unwrap();
        let blob = |i: u32| -> Vec<u8> {
            let size = 1 + (i * 7919) % 20_000;
            (0..size)
                .map(|j| (j.wrapping_mul(i + 3) >> 3) as u8)
                .collect()
        };
        let ids: Vec<ObjectId> = (0..2_000u32)
            .into_par_iter()
            .map(|i| {
                writer
                    .write(gix::objs::Kind::Blob, &blob(i % 1_500))
                    .unwrap()
            })
            .collect();
        writer.finish_pack(true).unwrap();

        let packs: Vec<_> = fs::read_dir(repo.join("objects/pack"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".idx"))
            .collect();
        assert!(packs.len() > 5, "segments: {packs:?}");
        let mut listed = HashSet::new();
        for idx in &packs {
            let path = format!("objects/pack/{idx}");
            let verified = crate::testing::git_ok(repo, &["verify-pack", "-v", &path], b"");
            let verified = String::from_utf8(verified).unwrap();
            let blobs = verified.lines().filter(|line| line.contains(" blob "));
            listed.extend(blobs.map(|line| ObjectId::from_hex(&line.as_bytes()[..40]).unwrap()));
        }
        assert_eq!(listed, ids.iter().copied().collect::<HashSet<_>>());
        crate::testing::git_ok(repo, &["fsck", "--strict"], b"");
        for (i, id) in ids.iter().enumerate().step_by(97) {
            let data = crate::testing::git_ok(repo, &["cat-file", "blob", &id.to_string()], b"");
            assert_eq!(data, blob(i as u32 % 1_500));
        }
    }

    #[test]
    fn holds_object_accepts_only_the_exact_object() {
        let data: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let (good, id) = loose_blob(&data);
        assert!(holds_object(&good, &id));
        let (other, other_id) = loose_blob(b"other\n");
        assert!(!holds_object(&other, &id), "another object");
        assert!(holds_object(&other, &other_id));
        assert!(!holds_object(&good[..good.len() / 2], &id), "truncated");
        assert!(
            !holds_object(&good[..good.len() - 1], &id),
            "last byte missing"
        );
        assert!(!holds_object(b"", &id), "empty");
        assert!(!holds_object(b"garbage", &id), "garbage");
        let mut trailing = good.clone();
        trailing.extend_from_slice(b"junk");
        assert!(
            !holds_object(&trailing, &id),
            "garbage after the stream (git fsck rejects it)"
        );
        let mut flipped = good;
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0x40;
        assert!(!holds_object(&flipped, &id), "a flipped bit");
    }

    #[test]
    fn tree_cache_holds_what_it_was_given_and_empties_when_full() {
        let cache = TreeCache::default();
        let id = |n: u8| ObjectId::from_bytes_or_panic(&[n; 20]);
        cache.insert(id(1), Arc::from(&b"one"[..]));
        assert_eq!(cache.get(&id(1)).as_deref(), Some(&b"one"[..]));
        assert!(cache.get(&id(2)).is_none());
        // Trees up to the limit stay; the one that would pass it starts the cache afresh.
        let big: Arc<[u8]> = vec![0; TREE_CACHE_BYTES / 4].into();
        for n in 2..5 {
            cache.insert(id(n), big.clone());
        }
        assert!(cache.get(&id(1)).is_some() && cache.get(&id(4)).is_some());
        cache.insert(id(5), big);
        assert!(cache.get(&id(1)).is_none() && cache.get(&id(4)).is_none());
        assert!(cache.get(&id(5)).is_some());
        cache.clear();
        assert!(cache.get(&id(5)).is_none());
    }
}
