//! [`SnapshotId`]: the one id type of the API.

use std::fmt;
use std::str::FromStr;

use gix::ObjectId;

/// A snapshot: the id of a git tree in the store (40 hex digits, as `git write-tree` prints
/// it). Every id the library returns is one, and every id it takes; text from a user (an
/// abbreviation, say) becomes one through `Store::resolve`.
///
/// ```
/// let empty: rewind::SnapshotId = "4b825dc642cb6eb9a060e54bf8d69288fbee4904".parse()?;
/// assert_eq!(empty, rewind::SnapshotId::EMPTY);
/// assert!("4b825dc6".parse::<rewind::SnapshotId>().is_err()); // abbreviations: Store::resolve
/// # Ok::<(), rewind::ParseIdError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SnapshotId(pub(crate) ObjectId);

impl SnapshotId {
    /// The empty tree, git's `4b825dc642cb6eb9a060e54bf8d69288fbee4904` (an empty project).
    pub const EMPTY: SnapshotId = SnapshotId(ObjectId::empty_tree(gix::hash::Kind::Sha1));

    /// The git object id.
    pub fn object_id(&self) -> ObjectId {
        self.0
    }
}

impl From<ObjectId> for SnapshotId {
    fn from(id: ObjectId) -> Self {
        SnapshotId(id)
    }
}

impl fmt::Display for SnapshotId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for SnapshotId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SnapshotId({})", self.0)
    }
}

/// A full id: exactly 40 hex digits. (Whether the store holds it is checked where it is used.)
impl FromStr for SnapshotId {
    type Err = ParseIdError;

    fn from_str(text: &str) -> Result<Self, ParseIdError> {
        let hex = text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit());
        match hex {
            true => ObjectId::from_hex(text.as_bytes())
                .map(SnapshotId)
                .map_err(|_| ParseIdError(text.to_owned())),
            false => Err(ParseIdError(text.to_owned())),
        }
    }
}

/// Text that is not a full snapshot id; `?` makes it the error `invalid_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseIdError(pub String);

impl fmt::Display for ParseIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid id {:?}: expected 40 hexadecimal digits", self.0)
    }
}

impl std::error::Error for ParseIdError {}

impl serde::Serialize for SnapshotId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::SnapshotId;

    #[test]
    fn an_id_is_forty_hex_digits_and_prints_as_it_was_parsed() {
        let hex = "ce013625030ba8dba906f756967f9e9ca394464a";
        let id: SnapshotId = hex.parse().unwrap();
        assert_eq!(id.to_string(), hex);
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{hex}\""));
        for bad in [
            "",
            "ce01",
            &hex[..39],
            &format!("{hex}0"),
            &hex.replace('c', "g"),
        ] {
            assert!(bad.parse::<SnapshotId>().is_err(), "{bad:?} parsed");
        }
        assert_eq!(
            SnapshotId::EMPTY.to_string(),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        );
    }
}
