//! Packs: while pruning repacks, new objects are appended to one pack file; its version-2
//! index is written when it is complete, and both become visible by a rename.

use std::collections::HashSet;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use gix::ObjectId;

use crate::error::{Error, Result};

/// A pack entry's header: type and size as git's variable-length integer.
pub(super) fn push_pack_entry_header(kind: gix::objs::Kind, size: u64, out: &mut Vec<u8>) {
    let type_id: u8 = match kind {
        gix::objs::Kind::Commit => 1,
        gix::objs::Kind::Tree => 2,
        gix::objs::Kind::Blob => 3,
        gix::objs::Kind::Tag => 4,
    };
    let mut byte = (type_id << 4) | (size & 0x0f) as u8;
    let mut rest = size >> 4;
    while rest != 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
}

/// A pack being written: entries are appended after a 12-byte header filled in at the end.
pub(super) struct PackBuilder {
    pub(super) path: PathBuf,
    file: BufWriter<tempfile::NamedTempFile>,
    offset: u64,
    pub(super) entries: Vec<(ObjectId, u64, u32)>,
    pub(super) ids: HashSet<ObjectId>,
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
            ids: HashSet::new(),
        })
    }

    /// Append one entry (header + zlib data); a second copy of an id is dropped.
    pub(super) fn append(&mut self, id: ObjectId, entry: &[u8]) -> io::Result<()> {
        if !self.ids.insert(id) {
            return Ok(());
        }
        self.file.write_all(entry)?;
        self.entries.push((id, self.offset, crc32fast::hash(entry)));
        self.offset += entry.len() as u64;
        Ok(())
    }

    /// Fill in the header, append the checksum, write the `.idx`, and rename both into `dir`;
    /// returns the `.idx` path.
    pub(super) fn finish(mut self, dir: &Path) -> Result<PathBuf> {
        let io_error = |e| Error::io("writing pack", &self.path, e);
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
