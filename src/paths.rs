//! Paths are bytes, as the file system names them; this module says how they are shown: with
//! git's C-style quoting in text, and lossy UTF-8 (U+FFFD) only in JSON; and how they become
//! the platform's paths.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};

/// Path bytes as a path of the platform: the bytes themselves on Unix; elsewhere they must be
/// UTF-8 (gix's rule), else an `InvalidData` error.
pub(crate) fn os_path(bytes: &[u8]) -> std::io::Result<&Path> {
    gix::path::from_byte_slice(bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// [`os_path`] for messages: where the bytes must be UTF-8 and are not, the ill-formed
/// sequences are shown as U+FFFD.
pub(crate) fn os_path_lossy(bytes: &[u8]) -> Cow<'_, Path> {
    match gix::path::from_byte_slice(bytes) {
        Ok(path) => Cow::Borrowed(path),
        Err(_) => Cow::Owned(PathBuf::from(bytes.to_str_lossy().into_owned())),
    }
}

/// `path` as git prints a name in human output with `core.quotePath=true`: as it is, unless
/// it holds a control character, `"`, `\` or a byte >= 0x80; then in double quotes, with C
/// escapes (`\n`, `\t`, `\"`, ...) and the other such bytes as 3-digit octal. The result is
/// ASCII whenever it is quoted, and never spans lines.
///
/// ```
/// assert_eq!(rewind::quote_path(b"src/main.rs"), "src/main.rs");
/// assert_eq!(rewind::quote_path(b"evil\nkeep"), r#""evil\nkeep""#);
/// assert_eq!(rewind::quote_path("caf\u{e9}".as_bytes()), r#""caf\303\251""#);
/// ```
pub fn quote_path(path: &[u8]) -> String {
    String::from_utf8_lossy(&quote(b"", path, true)).into_owned()
}

/// `prefix` + `path`, C-quoted as git quotes names when `path` needs it: for control
/// characters, `"` and `\`, and with `high_bytes` (`core.quotePath=true`) bytes >= 0x80.
/// Costs one pass over `path`.
pub(crate) fn quote(prefix: &[u8], path: &[u8], high_bytes: bool) -> Vec<u8> {
    let needs_quote =
        |b: u8| b < 0x20 || b == b'"' || b == b'\\' || b == 0x7f || (high_bytes && b >= 0x80);
    let mut out = Vec::with_capacity(prefix.len() + path.len() + 2);
    if !path.iter().copied().any(needs_quote) {
        out.extend_from_slice(prefix);
        out.extend_from_slice(path);
        return out;
    }
    out.push(b'"');
    out.extend_from_slice(prefix);
    for &b in path {
        let escape = match b {
            0x07 => Some(b'a'),
            0x08 => Some(b'b'),
            b'\t' => Some(b't'),
            b'\n' => Some(b'n'),
            0x0b => Some(b'v'),
            0x0c => Some(b'f'),
            b'\r' => Some(b'r'),
            b'"' | b'\\' => Some(b),
            _ => None,
        };
        match escape {
            Some(e) => out.extend_from_slice(&[b'\\', e]),
            None if needs_quote(b) => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
            None => out.push(b),
        }
    }
    out.push(b'"');
    out
}

/// A path in JSON: lossy only there (a name that is not UTF-8 gets U+FFFD); the library and
/// human output keep its bytes.
pub(crate) fn serialize_path<S: serde::Serializer>(
    path: &BString,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_str_lossy())
}

/// An optional path in JSON, as [`serialize_path`] writes it (`null` when absent).
pub(crate) fn serialize_opt_path<S: serde::Serializer>(
    path: &Option<BString>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match path {
        Some(path) => serialize_path(path, s),
        None => s.serialize_none(),
    }
}

/// A list of paths in JSON, each as [`serialize_path`] writes it.
pub(crate) fn serialize_paths<S: serde::Serializer>(
    paths: &[BString],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(paths.iter().map(|p| p.to_str_lossy()))
}

/// A file system path in JSON: lossy only there (a name that is not UTF-8 gets U+FFFD).
pub(crate) fn serialize_os_path<S: serde::Serializer>(
    path: &std::path::Path,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// A list of file system paths in JSON, each as [`serialize_os_path`] writes it.
pub(crate) fn serialize_os_paths<S: serde::Serializer>(
    paths: &[std::path::PathBuf],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(paths.iter().map(|p| p.to_string_lossy()))
}

/// A project path a user selected (`Store::select`): everything at or
/// below `path`, or only below it (`below_only`: the user wrote a trailing `/`).
pub(crate) struct Selection {
    pub(crate) path: BString,
    pub(crate) below_only: bool,
}

impl Selection {
    /// Whether the selection holds project path `path`.
    pub(crate) fn selects(&self, path: &BStr) -> bool {
        is_within(path, self.path.as_ref()) && !(self.below_only && path == self.path)
    }
}

/// Whether `path` is `dir` or below it (`dir` empty: the whole project).
pub(crate) fn is_within(path: &BStr, dir: &BStr) -> bool {
    dir.is_empty()
        || path == dir
        || (path.starts_with(dir.as_bytes()) && path.get(dir.len()) == Some(&b'/'))
}

/// Append `path` with every byte outside `!`..`~` (and `%`) written `%XX`: one word that
/// [`decode_path`] turns back into the exact bytes.
pub(crate) fn encode_path(out: &mut String, path: &[u8]) {
    for &b in path {
        match b {
            b'%' => out.push_str("%25"),
            b'!'..=b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
}

/// The inverse of [`encode_path`]; `None` for a malformed `%XX`.
pub(crate) fn decode_path(encoded: &[u8]) -> Option<BString> {
    let mut out = Vec::with_capacity(encoded.len());
    let mut i = 0;
    while i < encoded.len() {
        if encoded[i] == b'%' {
            let hex = std::str::from_utf8(encoded.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(encoded[i]);
            i += 1;
        }
    }
    Some(out.into())
}

#[cfg(test)]
mod tests {
    use super::{quote, quote_path};

    #[test]
    fn quote_path_leaves_plain_names_alone() {
        assert_eq!(quote_path(b"src/a b/c-d_e.rs"), "src/a b/c-d_e.rs");
        assert_eq!(quote_path(b""), "");
    }

    #[test]
    fn quote_path_escapes_like_git_quote_path_true() {
        assert_eq!(quote_path(b"evil\nkeep"), "\"evil\\nkeep\"");
        assert_eq!(
            quote_path(b"\x07\x08\t\x0b\x0c\r"),
            "\"\\a\\b\\t\\v\\f\\r\""
        );
        assert_eq!(quote_path(b"say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
        assert_eq!(quote_path(b"\x01\x1b\x7f"), "\"\\001\\033\\177\"");
        assert_eq!(quote_path("é".as_bytes()), "\"\\303\\251\"");
        assert_eq!(quote_path(b"bad\xff"), "\"bad\\377\"");
    }

    #[test]
    fn quote_without_high_bytes_is_git_diff_header_quoting() {
        assert_eq!(quote(b"a/", "é".as_bytes(), false), "a/é".as_bytes());
        assert_eq!(quote(b"a/", b"x\ny", false), b"\"a/x\\ny\"");
    }

    /// A file for every byte but NUL and `/`, listed by `git ls-files` (which quotes names as
    /// `git diff` does): with `core.quotePath=true` each line is [`quote_path`] of the name,
    /// with `false` it is `quote` without high bytes.
    #[test]
    #[cfg(unix)] // names that are not UTF-8
    fn quoting_equals_git_ls_files_for_every_byte() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        let git = |args: &[&str]| crate::testing::git_ok(repo, args, b"");
        git(&["init", "-q"]);
        let mut names: Vec<Vec<u8>> = (1..=255u8)
            .filter(|&b| b != b'/')
            .map(|b| vec![b'n', b])
            .collect();
        names.push("caf\u{e9} x".into());
        names.sort();
        for name in &names {
            std::fs::write(repo.join(std::ffi::OsStr::from_bytes(name)), "x").unwrap();
        }
        git(&["add", "-A"]);
        for (quote_path_config, high_bytes) in [("true", true), ("false", false)] {
            let listed = git(&[
                "-c",
                &format!("core.quotePath={quote_path_config}"),
                "ls-files",
            ]);
            let ours: Vec<u8> = names
                .iter()
                .flat_map(|name| {
                    let mut line = quote(b"", name, high_bytes);
                    line.push(b'\n');
                    line
                })
                .collect();
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&listed),
                "core.quotePath={quote_path_config}"
            );
        }
        for name in &names {
            assert_eq!(quote_path(name).into_bytes(), quote(b"", name, true));
        }
    }
}
