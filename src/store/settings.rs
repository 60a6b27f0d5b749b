//! The store's settings: `rewind.*` keys in its git config, and the sizes and durations they
//! (and the CLI's flags) are written in. A value that cannot be read is an error naming the
//! key, never a default in its place.

use std::time::Duration;

use super::Store;
use gix::bstr::ByteSlice;

use crate::error::{Error, Result};

impl Store {
    /// The value of `key` in the store's git config read by `parse`; `None` when unset, and
    /// [`Error::BadSetting`] (saying it `must_be`) when `parse` cannot read it.
    pub(crate) fn setting<T>(
        &self,
        key: &'static str,
        must_be: &'static str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>> {
        let repo = self.repo();
        let config = repo.config_snapshot();
        let file = config.plumbing();
        let bad = |key, value: String, must_be| Error::BadSetting {
            key,
            value,
            must_be,
            config: self.git_dir().join("config"),
        };
        // git reads a store config's included files; rewind does not, so a key set there would
        // be read differently (a longer retention, say, taken for the default).
        for name in ["include", "includeIf"] {
            // (`[include "x"]` is no include for git: only `[include]` and `[includeIf "…"]`.)
            let sections = file.sections_by_name(name).into_iter().flatten();
            let includes =
                sections.filter(|s| (name == "include") == s.header().subsection_name().is_none());
            if let Some(path) = includes.filter_map(|s| s.value("path")).next() {
                let path = path.to_str_lossy().into_owned();
                return Err(bad(
                    "include.path",
                    path,
                    "absent: rewind reads no included file",
                ));
            }
        }
        let value = match config.string(key) {
            Some(value) => value.to_str_lossy().into_owned(),
            // A key with no value at all (git takes it for `true`).
            None if config.boolean(key).is_some() => return Err(bad(key, String::new(), must_be)),
            None => return Ok(None),
        };
        match parse(value.trim()) {
            Some(parsed) => Ok(Some(parsed)),
            None => Err(bad(key, value, must_be)),
        }
    }
}

/// `"12h"` → `(12, "h")`: leading digits and the rest.
fn number_and_unit(text: &str) -> Option<(u64, &str)> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    Some((number.parse().ok()?, unit))
}

/// Parse a size such as `500M`, `300MB`, `2G`, `64k` or a number of bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let (number, unit) = number_and_unit(text)?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(factor)
}

/// Parse a duration such as `7d`, `12h`, `30m`, `45s`, `2w` (a bare number is days).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let (number, unit) = number_and_unit(text)?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "" | "d" => 86400,
        "w" => 7 * 86400,
        _ => return None,
    };
    number.checked_mul(seconds).map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, parse_size};
    use std::time::Duration;

    #[test]
    fn durations_take_a_unit_and_a_bare_number_is_days() {
        let day = 86_400;
        for (text, seconds) in [
            ("45s", 45),
            ("30m", 30 * 60),
            ("12h", 12 * 3600),
            ("7d", 7 * day),
            ("7", 7 * day),
            ("2w", 14 * day),
            ("0s", 0),
            (" 3h ", 3 * 3600),
        ] {
            assert_eq!(
                parse_duration(text),
                Some(Duration::from_secs(seconds)),
                "{text:?}"
            );
        }
    }

    #[test]
    fn nonsense_and_overflowing_durations_are_none() {
        for text in [
            "",
            "d",
            "-1d",
            "1.5h",
            "7x",
            "7D",
            "7 d",
            "1d2h",
            "99999999999999999999s",
            "30600000000000w",
        ] {
            assert_eq!(parse_duration(text), None, "{text:?}");
        }
    }

    #[test]
    fn sizes_take_binary_units_in_any_case() {
        for (text, bytes) in [
            ("1024", 1024),
            ("10b", 10),
            ("64k", 64 << 10),
            ("64KiB", 64 << 10),
            ("500M", 500 << 20),
            ("300MB", 300 << 20),
            ("2G", 2 << 30),
            ("2 gib", 2 << 30),
            ("0", 0),
        ] {
            assert_eq!(parse_size(text), Some(bytes), "{text:?}");
        }
    }

    #[test]
    fn nonsense_and_overflowing_sizes_are_none() {
        for text in ["", "M", "-1M", "1.5G", "2T", "2 GB x", "17179869184G"] {
            assert_eq!(parse_size(text), None, "{text:?}");
        }
    }
}
