//! What prune removed, and when and why: so that an error about a session or turn that is gone
//! says it was pruned, rather than that it never existed.
//!
//! One line per removed session or trimmed turn in `rewind-pruned`:
//! `<unix seconds> <reason> <ref>[ <unix seconds>]`, where `<ref>` is the session's ref prefix
//! or the turn's ref (already encoded: no whitespace), and the last field, for a session that
//! went, its last activity (what a redo of an undo that named it needs: whether it did
//! anything after that undo). Lines go after [`REMEMBERED_FOR`]; the latest activity of the
//! sessions whose lines went stays, in one line `<unix seconds> forgot <unix seconds>`, so
//! that a redo of an undo older than that still knows a session active since has gone.

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
        let mut forgot = parse_forgot(&old);
        let mut kept = String::new();
        for line in old.lines() {
            match parse(line) {
                Some((at, ..)) if at >= since => kept.extend([line, "\n"]),
                Some((at, why, reference, last)) if is_session(why, reference) => {
                    forgot = forgot.max(Some(last.unwrap_or(at)));
                }
                _ => {} // an old turn's line, the old `forgot` line, or garbage
            }
        }
        let mut text = match forgot {
            Some(last) => format!("{} {FORGOT} {last}\n", now.timestamp()),
            None => String::new(),
        };
        text.push_str(&kept);
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
                is_session(*why, reference) && last.unwrap_or(*at) >= since.timestamp()
            });
        let mut gone: Vec<String> = went
            .map(|(_, _, reference, _)| reference.to_owned())
            .collect();
        // (Sessions whose lines went: which they were is forgotten, not that they went.)
        if parse_forgot(&text).is_some_and(|last| last >= since.timestamp()) {
            gone.push(FORGOT.to_owned());
        }
        gone
    }

    /// The record's text. Costs reading it.
    fn pruned_record(&self) -> Option<String> {
        let text = crate::fs::read_store_file(&self.git_dir().join(PRUNED)).ok()?;
        String::from_utf8(text).ok()
    }
}

/// The word of the line that keeps the latest activity of the sessions whose lines went.
const FORGOT: &str = "forgot";

/// Whether a line of `why` about `reference` is a session that went (a session trimmed to no
/// turn stays, and a turn's ref is no session).
fn is_session(why: Why, reference: &str) -> bool {
    why != Why::Trimmed && reference.ends_with('/')
}

/// The latest activity of the sessions whose lines went, from the record's `forgot` line.
fn parse_forgot(text: &str) -> Option<i64> {
    text.lines().find_map(|line| {
        let mut fields = line.split(' ');
        let (_at, word, last) = (fields.next()?, fields.next()?, fields.next()?);
        (word == FORGOT && fields.next().is_none())
            .then(|| last.parse().ok())
            .flatten()
    })
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
    use super::{parse, parse_forgot, Why};

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
        assert_eq!(parse("1700000000 forgot 1690000000"), None);
    }

    #[test]
    fn the_forgot_line_reads_back_and_other_lines_are_not_it() {
        let text = "1700000000 forgot 1690000000\n1700000001 expired refs/rewind/sessions/a/ 1\n";
        assert_eq!(parse_forgot(text), Some(1690000000));
        for other in [
            "",
            "1700000000 forgot",
            "1 forgot x",
            "1 forgot 2 3",
            "1 expired r/ 2",
        ] {
            assert_eq!(parse_forgot(other), None, "{other:?}");
        }
    }
}
