//! What prune removed, and when and why: so that an error about a session or turn that is gone
//! says it was pruned, rather than that it never existed.
//!
//! One line per removed session or trimmed turn in `rewind-pruned`:
//! `<unix seconds> <reason> <ref>[ <unix seconds>]`, where `<ref>` is the session's ref prefix
//! or the turn's ref (already encoded: no whitespace), and the last field, for a session that
//! went, its last activity (what a redo of an undo that named it needs: whether it did
//! anything after that undo). Lines go after [`REMEMBERED_FOR`].

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::store::{Locked, Store};

/// The store file of the record.
const PRUNED: &str = "rewind-pruned";

/// How long a removal is remembered (well past the longest default limit, 30 days for an
/// abandoned turn).
const REMEMBERED_FOR: Duration = Duration::from_secs(90 * 86400);

/// Why prune removed a session or a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// The session was idle for longer than the retention.
    Expired,
    /// The session's open turn was left open longer than `rewind.abandonedTurnAfter`.
    Abandoned,
    /// The session held more turns than `rewind.maxTurnsPerSession`.
    Trimmed,
    /// The store was over its size quota.
    Quota,
}

impl Why {
    const ALL: [Why; 4] = [Why::Expired, Why::Abandoned, Why::Trimmed, Why::Quota];

    fn word(self) -> &'static str {
        match self {
            Why::Expired => "expired",
            Why::Abandoned => "abandoned",
            Why::Trimmed => "trimmed",
            Why::Quota => "quota",
        }
    }

    /// The reason, as an error message ends with it.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Why::Expired => "its session was idle for longer than the retention (rewind.retention)",
            Why::Abandoned => {
                "its session had a turn open for longer than rewind.abandonedTurnAfter"
            }
            Why::Trimmed => "its session held more turns than rewind.maxTurnsPerSession",
            Why::Quota => "the store was over its size quota (rewind.maxSize)",
        }
    }
}

impl Locked<'_> {
    /// Add `removed` (refs, each with its reason, and for a session that goes its last
    /// activity) to the record at time `now`, dropping lines older than [`REMEMBERED_FOR`].
    /// Costs reading and rewriting the record (a line per removal of the last 90 days).
    pub(crate) fn remember_pruned(
        &self,
        now: DateTime<Utc>,
        removed: &[(String, Why, Option<DateTime<Utc>>)],
    ) -> Result<()> {
        if removed.is_empty() {
            return Ok(());
        }
        let path = self.git_dir().join(PRUNED);
        let since = now.timestamp() - REMEMBERED_FOR.as_secs() as i64;
        let old = crate::fs::read_store_file(&path).unwrap_or_default();
        let old = String::from_utf8_lossy(&old);
        let mut text: String = old
            .lines()
            .filter(|line| parse(line).is_some_and(|(at, ..)| at >= since))
            .flat_map(|line| [line, "\n"])
            .collect();
        for (reference, why, last) in removed {
            let last = last
                .map(|at| format!(" {}", at.timestamp()))
                .unwrap_or_default();
            let (at, why) = (now.timestamp(), why.word());
            text.push_str(&format!("{at} {why} {reference}{last}\n"));
        }
        crate::fs::write_atomically(&path, "index.tmp", text.as_bytes())
    }
}

impl Store {
    /// When and why prune removed the first of `refs` it remembers removing (the newest
    /// removal of it). Costs reading the record.
    pub(crate) fn pruned(&self, refs: &[&str]) -> Option<(DateTime<Utc>, Why)> {
        let text = self.pruned_record()?;
        refs.iter().find_map(|wanted| {
            text.lines()
                .filter_map(parse)
                .filter(|(_, _, reference, _)| reference == wanted)
                .max_by_key(|(at, ..)| *at)
                .and_then(|(at, why, ..)| Some((DateTime::from_timestamp(at, 0)?, why)))
        })
    }

    /// The sessions (ref prefixes) that went and were active at `since` or later (when the
    /// record does not say when one was last active, its removal's time stands for it). Costs
    /// reading the record.
    pub(crate) fn gone_active_since(&self, since: DateTime<Utc>) -> Vec<String> {
        let text = self.pruned_record().unwrap_or_default();
        let went = text
            .lines()
            .filter_map(parse)
            .filter(|(at, why, reference, last)| {
                // (A session trimmed to no turn stays, and a turn's ref is no session.)
                let session = *why != Why::Trimmed && reference.ends_with('/');
                session && last.unwrap_or(*at) >= since.timestamp()
            });
        went.map(|(_, _, reference, _)| reference.to_owned())
            .collect()
    }

    /// The record's text. Costs reading it.
    fn pruned_record(&self) -> Option<String> {
        let text = crate::fs::read_store_file(&self.git_dir().join(PRUNED)).ok()?;
        String::from_utf8(text).ok()
    }
}

/// One line of the record: time, reason, ref, and a session's last activity.
fn parse(line: &str) -> Option<(i64, Why, &str, Option<i64>)> {
    let mut fields = line.splitn(4, ' ');
    let at = fields.next()?.parse().ok()?;
    let word = fields.next()?;
    let why = Why::ALL.into_iter().find(|why| why.word() == word)?;
    let reference = fields.next()?;
    let last = match fields.next() {
        Some(last) => Some(last.parse().ok()?),
        None => None,
    };
    Some((at, why, reference, last))
}

#[cfg(test)]
mod tests {
    use super::{parse, Why};

    #[test]
    fn a_record_line_reads_back_and_garbage_does_not() {
        assert_eq!(
            parse("1700000000 trimmed refs/rewind/sessions/a/turns/b"),
            Some((
                1700000000,
                Why::Trimmed,
                "refs/rewind/sessions/a/turns/b",
                None
            ))
        );
        assert_eq!(
            parse("1700000000 expired refs/rewind/sessions/a/ 1690000000"),
            Some((
                1700000000,
                Why::Expired,
                "refs/rewind/sessions/a/",
                Some(1690000000)
            ))
        );
        for garbage in ["", "x expired r", "1 nope r", "1 expired", "1 expired r x"] {
            assert_eq!(parse(garbage), None, "{garbage:?}");
        }
    }
}
