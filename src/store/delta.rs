//! Git pack deltas: an encoding of a target as instructions against a base.
//!
//! The format (a pack's "deltified representation"): the base's size and the target's size as
//! little-endian base-128 varints, then instructions. An instruction byte with the top bit set
//! copies from the base: its low four bits say which offset bytes follow (little-endian, up to
//! four), the next three which size bytes follow (up to three; a size of zero means 0x10000).
//! A byte of 1..=127 inserts that many literal bytes, which follow it.
//!
//! Matching: the base is cut into [`BLOCK`]-byte blocks, each indexed by a polynomial hash. The
//! target is scanned with the same hash rolled one byte at a time; a block whose bytes equal the
//! window starts a match, which is then grown forward as far as the bytes agree and backward
//! into the literal bytes not yet written. Any common run of `2 * BLOCK - 1` bytes or more
//! therefore becomes a copy.

/// The bytes of base a hashed block covers; matches shorter than this are not looked for.
const BLOCK: usize = 16;
/// Base positions tried per target position (bounds the work on repetitive bases).
const MAX_CANDIDATES: usize = 16;
/// The longest run one copy instruction carries (its size then encodes as zero bytes).
const MAX_COPY: usize = 0x10000;
/// The longest literal run one insert instruction carries.
const MAX_INSERT: usize = 127;
/// Multiplier of the block hash.
const PRIME: u32 = 0x0100_0193;

/// A base's blocks by hash, for encoding deltas against that base.
pub(crate) struct Index {
    /// The latest block with each hash bucket, as block number + 1 (0: none).
    heads: Vec<u32>,
    /// For each block, the previous block in its bucket, as block number + 1 (0: none).
    chain: Vec<u32>,
    mask: u32,
}

/// The hash of `window` (BLOCK bytes): sum of `b[i] * PRIME^(BLOCK-1-i)`, wrapping.
/// Costs BLOCK multiply-adds.
fn block_hash(window: &[u8]) -> u32 {
    window.iter().fold(0u32, |h, &b| {
        h.wrapping_mul(PRIME).wrapping_add(u32::from(b))
    })
}

/// `PRIME^(BLOCK-1)`, which takes a byte out of a rolling hash.
fn outgoing_factor() -> u32 {
    (1..BLOCK).fold(1u32, |f, _| f.wrapping_mul(PRIME))
}

impl Index {
    /// Index `base` (at most 4 GiB: copy offsets are 32 bits). Costs a hash of every byte and
    /// 4 bytes per block plus 4 per bucket: about half of the base's size.
    pub(crate) fn new(base: &[u8]) -> Index {
        let blocks = if base.len() <= u32::MAX as usize {
            base.len() / BLOCK
        } else {
            0 // never copied from: every delta against it is pure literals
        };
        let buckets = blocks.next_power_of_two().max(1);
        let mut heads = vec![0u32; buckets];
        let mut chain = vec![0u32; blocks];
        let mask = buckets as u32 - 1;
        // Last block first, so that each bucket lists its earliest block first: on a
        // repetitive base, the match that runs longest.
        for (block, link) in chain.iter_mut().enumerate().rev() {
            let hash = block_hash(&base[block * BLOCK..(block + 1) * BLOCK]);
            let head = &mut heads[(hash & mask) as usize];
            *link = *head;
            *head = block as u32 + 1;
        }
        Index { heads, chain, mask }
    }

    /// The longest match of `target[at..]` against a base block with hash `hash`: the base
    /// offset and length, if one of the candidates' BLOCK bytes are equal. Costs up to
    /// [`MAX_CANDIDATES`] comparisons, each as long as its match.
    fn longest_match(
        &self,
        base: &[u8],
        target: &[u8],
        at: usize,
        hash: u32,
    ) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        let mut link = self.heads[(hash & self.mask) as usize];
        for _ in 0..MAX_CANDIDATES {
            if link == 0 {
                break;
            }
            let offset = (link as usize - 1) * BLOCK;
            link = self.chain[link as usize - 1];
            let len = common_prefix(&base[offset..], &target[at..]);
            if len >= BLOCK && best.is_none_or(|(_, best_len)| len > best_len) {
                best = Some((offset, len));
            }
        }
        best
    }
}

/// How many leading bytes `a` and `b` share. Costs one comparison per shared byte, 8 at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let limit = a.len().min(b.len());
    let mut n = 0;
    while n + 8 <= limit {
        let x = u64::from_le_bytes(a[n..n + 8].try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(b[n..n + 8].try_into().expect("8 bytes"));
        if x != y {
            return n + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + a[n..limit]
        .iter()
        .zip(&b[n..limit])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Append `value` as a delta header varint (7 bits at a time, low first).
fn push_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Append insert instructions for `literal`.
fn push_insert(literal: &[u8], out: &mut Vec<u8>) {
    for run in literal.chunks(MAX_INSERT) {
        out.push(run.len() as u8);
        out.extend_from_slice(run);
    }
}

/// Append copy instructions for `len` bytes of the base at `offset`.
fn push_copy(mut offset: usize, mut len: usize, out: &mut Vec<u8>) {
    while len > 0 {
        let size = len.min(MAX_COPY);
        let at = out.len();
        out.push(0x80);
        let mut flags = 0x80u8;
        for (bit, byte) in (offset as u32).to_le_bytes().into_iter().enumerate() {
            if byte != 0 {
                flags |= 1 << bit;
                out.push(byte);
            }
        }
        // 0x10000 is written as size zero: no size bytes at all.
        let encoded = if size == MAX_COPY { 0 } else { size as u32 };
        for (bit, byte) in encoded.to_le_bytes()[..3].iter().enumerate() {
            if *byte != 0 {
                flags |= 0x10 << bit;
                out.push(*byte);
            }
        }
        out[at] = flags;
        offset += size;
        len -= size;
    }
}

/// The delta that turns `base` (which `index` indexes) into `target`, unless it would exceed
/// `max_size` bytes. Costs a rolling hash of every target byte not covered by a copy, the
/// candidates' byte comparisons, and the output; a hopeless target stops after `max_size` bytes.
pub(crate) fn encode(
    base: &[u8],
    index: &Index,
    target: &[u8],
    max_size: usize,
) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(max_size.min(target.len() / 4 + 64));
    push_varint(base.len() as u64, &mut out);
    push_varint(target.len() as u64, &mut out);
    let outgoing = outgoing_factor();
    // target[written..at] is pending literal; `hash` covers target[at..at + BLOCK] when `fresh`.
    let (mut written, mut at) = (0, 0);
    let mut hash = 0u32;
    let mut fresh = false;
    let searchable = !index.chain.is_empty();
    while searchable && at + BLOCK <= target.len() {
        if !fresh {
            hash = block_hash(&target[at..at + BLOCK]);
            fresh = true;
        }
        if let Some((offset, len)) = index.longest_match(base, target, at, hash) {
            let back = target[written..at]
                .iter()
                .rev()
                .zip(base[..offset].iter().rev())
                .take_while(|(t, b)| t == b)
                .count();
            push_insert(&target[written..at - back], &mut out);
            push_copy(offset - back, len + back, &mut out);
            at += len;
            written = at;
            fresh = false;
        } else {
            if at + BLOCK < target.len() {
                hash = hash
                    .wrapping_sub(u32::from(target[at]).wrapping_mul(outgoing))
                    .wrapping_mul(PRIME)
                    .wrapping_add(u32::from(target[at + BLOCK]));
            }
            at += 1;
        }
        // Pending literal bytes cost at least themselves.
        if out.len() + (at - written) > max_size {
            return None;
        }
    }
    push_insert(&target[written..], &mut out);
    (out.len() <= max_size).then_some(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The target `delta` describes against `base`, or why it is malformed. Written from the
    /// format's description, independently of the encoder.
    pub(crate) fn apply(base: &[u8], delta: &[u8]) -> Result<Vec<u8>, String> {
        let mut pos = 0;
        let mut varint = || -> Result<u64, String> {
            let (mut value, mut shift) = (0u64, 0);
            loop {
                let byte = *delta.get(pos).ok_or("truncated header")?;
                pos += 1;
                value |= u64::from(byte & 0x7f) << shift;
                shift += 7;
                if byte & 0x80 == 0 {
                    return Ok(value);
                }
            }
        };
        let (base_size, target_size) = (varint()?, varint()?);
        if base_size != base.len() as u64 {
            return Err(format!("base size {base_size}, base is {}", base.len()));
        }
        let mut out = Vec::new();
        while pos < delta.len() {
            let op = delta[pos];
            pos += 1;
            if op & 0x80 != 0 {
                let mut field = |bits: std::ops::Range<u8>| -> Result<usize, String> {
                    let mut value = 0usize;
                    for (i, bit) in bits.enumerate() {
                        if op & (1 << bit) != 0 {
                            value |=
                                usize::from(*delta.get(pos).ok_or("truncated copy")?) << (8 * i);
                            pos += 1;
                        }
                    }
                    Ok(value)
                };
                let offset = field(0..4)?;
                let size = match field(4..7)? {
                    0 => 0x10000,
                    size => size,
                };
                let run = base
                    .get(offset..offset + size)
                    .ok_or("copy past the base")?;
                out.extend_from_slice(run);
            } else if op == 0 {
                return Err("reserved instruction 0".into());
            } else {
                let run = delta
                    .get(pos..pos + op as usize)
                    .ok_or("truncated insert")?;
                out.extend_from_slice(run);
                pos += op as usize;
            }
        }
        if out.len() as u64 != target_size {
            return Err(format!("target size {target_size}, made {}", out.len()));
        }
        Ok(out)
    }

    /// A deterministic byte stream (xorshift) for tests.
    pub(crate) struct Random(u64);

    impl Random {
        pub(crate) fn new(seed: u64) -> Random {
            Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
        }
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
        pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    /// Encode `target` against `base` without a size limit and check that it applies exactly;
    /// returns the delta.
    fn round_trip(base: &[u8], target: &[u8]) -> Vec<u8> {
        let delta = encode(base, &Index::new(base), target, usize::MAX).expect("no limit");
        assert_eq!(
            apply(base, &delta).as_deref(),
            Ok(target),
            "delta misapplied"
        );
        delta
    }

    /// The instructions of `delta` (after its header): (copies, copy sizes, inserted bytes).
    fn census(delta: &[u8]) -> (usize, Vec<usize>, usize) {
        let mut pos = 0;
        for _ in 0..2 {
            while delta[pos] & 0x80 != 0 {
                pos += 1;
            }
            pos += 1;
        }
        let (mut copies, mut sizes, mut inserted) = (0, Vec::new(), 0);
        while pos < delta.len() {
            let op = delta[pos];
            pos += 1;
            if op & 0x80 != 0 {
                copies += 1;
                let mut size = 0;
                for bit in 0..7 {
                    if op & (1 << bit) != 0 {
                        if bit >= 4 {
                            size |= usize::from(delta[pos]) << (8 * (bit - 4));
                        }
                        pos += 1;
                    }
                }
                sizes.push(if size == 0 { 0x10000 } else { size });
            } else {
                inserted += op as usize;
                pos += op as usize;
            }
        }
        (copies, sizes, inserted)
    }

    #[test]
    fn empty_base_target_or_both() {
        let text = b"some text that is longer than one block of sixteen bytes\n".repeat(3);
        let delta = round_trip(b"", &text);
        assert_eq!(census(&delta).0, 0, "nothing to copy from an empty base");
        assert_eq!(round_trip(&text, b""), [text.len() as u8 | 0x80, 1, 0]);
        assert_eq!(round_trip(b"", b""), [0, 0]);
        // Shorter than a block on either side.
        round_trip(b"short", b"shorter");
        round_trip(&text, b"tiny");
        round_trip(b"tiny", &text);
    }

    #[test]
    fn equal_target_is_copies_only() {
        let mut random = Random::new(1);
        for len in [
            16, 17, 31, 32, 1000, 0xffff, 0x10000, 0x10001, 0x20000, 200_000,
        ] {
            let data = random.bytes(len);
            let delta = round_trip(&data, &data);
            let (copies, sizes, inserted) = census(&delta);
            assert_eq!(inserted, 0, "len {len}: no literal bytes");
            assert_eq!(copies, len.div_ceil(0x10000), "len {len}: {sizes:?}");
            assert!(sizes.iter().all(|&s| s <= 0x10000));
        }
    }

    /// Copies of exactly 0x10000 bytes carry no size bytes; longer runs are split at 0x10000.
    #[test]
    fn copies_around_the_64_kib_limit() {
        let mut random = Random::new(2);
        let base = random.bytes(0x30000);
        for len in [0xfff0, 0xffff, 0x10000, 0x10001, 0x1ffff, 0x20000, 0x20001] {
            let start = 0x1234;
            let target = [b"prefix!".as_slice(), &base[start..start + len], b"!suffix"].concat();
            let delta = round_trip(&base, &target);
            let (_, sizes, inserted) = census(&delta);
            assert_eq!(inserted, 14, "len {len:#x}: only the ends are literal");
            assert_eq!(sizes.iter().sum::<usize>(), len);
        }
        let mut exact = Vec::new();
        push_copy(0, 0x10000, &mut exact);
        assert_eq!(exact, [0x80], "offset 0, size 0x10000: no operand bytes");
        let mut big = Vec::new();
        push_copy(0x0102_0304, 0x0001_0001, &mut big);
        assert_eq!(big, [0x8f, 4, 3, 2, 1, 0x9f, 4, 3, 3, 1, 1]);
    }

    #[test]
    fn varint_headers_at_size_boundaries() {
        for size in [0x7f, 0x80, 0x3fff, 0x4000, 0x10000, 0x1f_ffff, 0x20_0000] {
            let data = vec![7u8; size];
            let delta = round_trip(&data, &data[1..]);
            let mut expected = Vec::new();
            push_varint(size as u64, &mut expected);
            push_varint(size as u64 - 1, &mut expected);
            assert!(delta.starts_with(&expected), "size {size:#x}");
        }
    }

    /// Random edits (insertions, deletions, replacements, moved blocks) of random and of
    /// text-like bases: every delta applies exactly, and a small edit gives a small delta.
    #[test]
    fn random_edits_round_trip() {
        let mut random = Random::new(3);
        for case in 0..300 {
            let len = random.below(if case % 10 == 0 { 300_000 } else { 5_000 });
            let base = if case % 2 == 0 {
                random.bytes(len)
            } else {
                let words = [
                    "fn ", "let ", "x", " = ", "1;", "\n", "    ", "{", "}", "self",
                ];
                (0..len / 3)
                    .flat_map(|_| words[random.below(words.len())].bytes())
                    .collect()
            };
            let mut target = base.clone();
            let edits = random.below(8);
            for _ in 0..edits {
                let at = random.below(target.len() + 1);
                match random.below(4) {
                    0 => {
                        let n = random.below(200);
                        let insert = random.bytes(n);
                        target.splice(at..at, insert);
                    }
                    1 => {
                        let end = (at + random.below(300)).min(target.len());
                        target.drain(at..end);
                    }
                    2 => {
                        let end = (at + random.below(50)).min(target.len());
                        let replacement = random.bytes(end - at);
                        target.splice(at..end, replacement);
                    }
                    _ => {
                        let from = random.below(base.len() + 1);
                        let end = (from + random.below(2000)).min(base.len());
                        target.splice(at..at, base[from..end].iter().copied());
                    }
                }
            }
            let delta = round_trip(&base, &target);
            if base.len() > 100_000 && edits < 4 && case % 2 == 0 {
                assert!(
                    delta.len() < target.len() / 10,
                    "case {case}: {}",
                    delta.len()
                );
            }
            // Unrelated data still encodes correctly (as literals).
            let n = random.below(3000);
            round_trip(&base, &random.bytes(n));
        }
    }

    /// A run repeated many times in the base (every block the same hash) still encodes quickly
    /// and exactly.
    #[test]
    fn repetitive_base_and_target() {
        let base = vec![0u8; 1 << 20];
        let mut target = vec![0u8; (1 << 20) + 5];
        target[1000] = 1;
        let delta = round_trip(&base, &target);
        assert!(delta.len() < 200, "{}", delta.len());
        let pattern = b"abcdefghijklmnopq".repeat(10_000);
        round_trip(&pattern, &pattern[3..]);
    }

    /// With a limit, an encoding that would exceed it is abandoned.
    #[test]
    fn limit_abandons_large_deltas() {
        let mut random = Random::new(4);
        let base = random.bytes(10_000);
        let other = random.bytes(10_000);
        let index = Index::new(&base);
        assert_eq!(encode(&base, &index, &other, 5_000), None);
        let delta = encode(&base, &index, &base, 5_000).expect("a copy fits");
        assert_eq!(apply(&base, &delta).unwrap(), base);
        let exact = encode(&base, &index, &base, usize::MAX).unwrap();
        assert_eq!(
            encode(&base, &index, &base, exact.len()),
            Some(exact.clone())
        );
        assert_eq!(encode(&base, &index, &base, exact.len() - 1), None);
    }
}
