//! Integration tests for `rewind patch`, `diff`, `diff-full` and `has-changes`.
//!
//! git, run on the store (`rewind path`), is the oracle for every byte and every number:
//!
//! * `diff` text must be byte-identical to
//!   `git --git-dir STORE -c core.quotePath=false diff -M --no-ext-diff FROM TO` (and with
//!   `--no-renames`, to git's with `--no-renames`);
//! * `diff-full` rows must follow `git diff -M --numstat` (order, counts, binary),
//!   `--name-status` (status, old path, similarity) and `git cat-file blob` (before/after),
//!   each with `--no-renames` for `diff-full --no-renames`;
//! * `patch` paths must equal `git diff --name-only --no-renames`.
//!
//! Rename detection has its own random cases in tests/it/renames.rs.
//!
//! Nothing here hard-codes an expected diff. Helpers shared with tests/it/track.rs live in
//! tests/it/common.rs.

use crate::common::*;
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// `diff-full` rows whose larger side exceeds this carry no before/after text.
const CONTENT_LIMIT: u64 = 4 << 20;
/// The text all `diff-full` rows together carry by default (`--max-bytes`).
const TOTAL_LIMIT: u64 = 16 << 20;

/// What a `diff-full` call asks for besides its two ids: `--max-bytes N`, `--no-renames` and
/// `-- PATHS`.
#[derive(Clone, Copy, Default)]
pub(crate) struct Ask<'q> {
    /// Project-relative, as git takes them (literal pathspecs).
    pub(crate) paths: &'q [&'q str],
    pub(crate) max_bytes: Option<u64>,
    pub(crate) no_renames: bool,
}

impl Ask<'_> {
    /// The command line: `diff-full FROM TO [--max-bytes N] [--no-renames] [-- PATHS]`.
    fn args(&self, from: &str, to: &str) -> Vec<String> {
        let mut args = vec!["diff-full".to_string(), from.to_string(), to.to_string()];
        if let Some(max) = self.max_bytes {
            args.extend(["--max-bytes".to_string(), max.to_string()]);
        }
        if self.no_renames {
            args.push("--no-renames".into());
        }
        if !self.paths.is_empty() {
            args.push("--".into());
            args.extend(self.paths.iter().map(|p| p.to_string()));
        }
        args
    }
}

// ---------------------------------------------------------------------------
// A project with its store, and the git oracle
// ---------------------------------------------------------------------------

/// A [`TestProject`] plus the path of its store (asked once).
pub(crate) struct Proj<'a> {
    p: TestProject<'a>,
    store: PathBuf,
}

impl<'a> std::ops::Deref for Proj<'a> {
    type Target = TestProject<'a>;
    fn deref(&self) -> &TestProject<'a> {
        &self.p
    }
}

/// One line of `git diff --numstat -z`: `None` counts mean binary (`-`); `old_path` is a
/// rename's source.
#[derive(Debug, Clone)]
struct Numstat {
    additions: Option<u64>,
    deletions: Option<u64>,
    path: Vec<u8>,
    old_path: Option<Vec<u8>>,
}

/// One line of `git diff --raw -z --no-abbrev` (`status` `R<score>` for a rename from
/// `old_path`).
#[derive(Debug, Clone)]
struct RawRow {
    old_mode: String,
    new_mode: String,
    old_id: String,
    new_id: String,
    status: String,
    path: Vec<u8>,
    old_path: Option<Vec<u8>>,
}

const NULL_ID: &str = "0000000000000000000000000000000000000000";

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn nul_fields(out: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = out.split(|b| *b == 0).collect();
    if v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v
}

impl<'a> Proj<'a> {
    pub(crate) fn new(sb: &'a Sandbox, name: &str) -> Proj<'a> {
        let p = sb.project(name);
        let store = p.store();
        Proj { p, store }
    }

    /// `rewind track`: a snapshot's tree id.
    pub(crate) fn snap(&self) -> String {
        self.p.track()
    }

    /// `rewind track --max-file-size BYTES` (for files above the 2 MiB default).
    fn snap_big(&self, max: u64) -> String {
        let run = self.rewind(["track", "--max-file-size", &max.to_string()]);
        run.assert_success();
        let id = run.stdout.trim().to_string();
        assert_oid(&id, "`rewind track --max-file-size`");
        id
    }

    /// git on the store; asserts success; stdout bytes.
    fn git<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> Vec<u8> {
        let run = self.sb.git_in_run(&self.store, args);
        run.assert_success();
        run.stdout_bytes
    }

    /// The contract's oracle for `diff` (`-M`: the store sets `diff.renames=false`).
    fn git_diff(&self, from: &str, to: &str) -> Vec<u8> {
        self.git([
            "-c",
            "core.quotePath=false",
            "diff",
            "-M",
            "--no-ext-diff",
            from,
            to,
        ])
    }

    /// Same without rename detection: the oracle of `diff --no-renames`.
    fn git_diff_no_renames(&self, from: &str, to: &str) -> Vec<u8> {
        self.git([
            "-c",
            "core.quotePath=false",
            "diff",
            "--no-ext-diff",
            "--no-renames",
            from,
            to,
        ])
    }

    /// `git --literal-pathspecs diff FORMAT -z -M|--no-renames FROM TO -- PATHS`.
    fn git_diff_z(&self, format: &[&str], from: &str, to: &str, ask: Ask) -> Vec<u8> {
        let mut args = vec!["--literal-pathspecs", "diff"];
        args.extend(format);
        let renames = if ask.no_renames { "--no-renames" } else { "-M" };
        args.extend(["-z", renames, from, to, "--"]);
        args.extend(ask.paths);
        self.git(args)
    }

    fn numstat(&self, from: &str, to: &str, ask: Ask) -> Vec<Numstat> {
        let out = self.git_diff_z(&["--numstat"], from, to, ask);
        let mut fields = nul_fields(&out).into_iter();
        let mut rows = Vec::new();
        while let Some(rec) = fields.next() {
            let mut parts = rec.splitn(3, |b| *b == b'\t');
            let count = |s: &[u8]| -> Option<u64> {
                if s == b"-" {
                    None
                } else {
                    Some(lossy(s).parse().expect("numstat count"))
                }
            };
            let additions = count(parts.next().unwrap());
            let deletions = count(parts.next().unwrap());
            let path = parts.next().expect("numstat path").to_vec();
            // A rename: an empty path, then the old and the new one.
            let (path, old_path) = match path.is_empty() {
                true => {
                    let old = fields.next().expect("rename source").to_vec();
                    (fields.next().expect("rename target").to_vec(), Some(old))
                }
                false => (path, None),
            };
            rows.push(Numstat {
                additions,
                deletions,
                path,
                old_path,
            });
        }
        rows
    }

    /// `git diff --name-status -z`: (status, path, a rename's old path).
    fn name_status(
        &self,
        from: &str,
        to: &str,
        ask: Ask,
    ) -> Vec<(String, Vec<u8>, Option<Vec<u8>>)> {
        let out = self.git_diff_z(&["--name-status"], from, to, ask);
        let mut fields = nul_fields(&out).into_iter();
        let mut rows = Vec::new();
        while let Some(status) = fields.next() {
            let status = lossy(status);
            let first = fields.next().expect("name-status path").to_vec();
            rows.push(match status.starts_with('R') {
                true => (
                    status,
                    fields.next().expect("rename target").to_vec(),
                    Some(first),
                ),
                false => (status, first, None),
            });
        }
        rows
    }

    fn name_only(&self, from: &str, to: &str, paths: &[&str]) -> Vec<Vec<u8>> {
        let ask = Ask {
            paths,
            no_renames: true,
            ..Ask::default()
        };
        let out = self.git_diff_z(&["--name-only"], from, to, ask);
        nul_fields(&out).into_iter().map(|p| p.to_vec()).collect()
    }

    fn raw(&self, from: &str, to: &str, ask: Ask) -> Vec<RawRow> {
        let out = self.git_diff_z(&["--raw", "--no-abbrev"], from, to, ask);
        let mut fields = nul_fields(&out).into_iter();
        let mut rows = Vec::new();
        while let Some(meta) = fields.next() {
            let meta = lossy(meta);
            let f: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
            let first = fields.next().expect("raw path").to_vec();
            let (path, old_path) = match f[4].starts_with('R') {
                true => (fields.next().expect("rename target").to_vec(), Some(first)),
                false => (first, None),
            };
            rows.push(RawRow {
                old_mode: f[0].into(),
                new_mode: f[1].into(),
                old_id: f[2].into(),
                new_id: f[3].into(),
                status: f[4].into(),
                path,
                old_path,
            });
        }
        rows
    }

    /// Contents of blobs, by full id (`git cat-file --batch`).
    fn blobs<'s>(&self, ids: impl IntoIterator<Item = &'s str>) -> HashMap<String, Vec<u8>> {
        let mut input = Vec::new();
        let mut wanted = Vec::new();
        for id in ids {
            if id != NULL_ID {
                input.extend_from_slice(id.as_bytes());
                input.push(b'\n');
                wanted.push(id.to_string());
            }
        }
        let mut map = HashMap::new();
        if wanted.is_empty() {
            return map;
        }
        let mut cmd = self.sb.git_command(None);
        cmd.arg("--git-dir")
            .arg(&self.store)
            .args(["cat-file", "--batch"]);
        let run = run_with_stdin(&mut cmd, &input);
        run.assert_success();
        let out = &run.stdout_bytes;
        let mut pos = 0;
        for id in wanted {
            let nl = pos + out[pos..].iter().position(|b| *b == b'\n').unwrap();
            let header = lossy(&out[pos..nl]);
            let f: Vec<&str> = header.split(' ').collect();
            assert_eq!(f.len(), 3, "cat-file --batch header for {id}: {header:?}");
            assert_eq!(f[1], "blob", "{id} must be a blob: {header}");
            let size: usize = f[2].parse().unwrap();
            map.insert(id, out[nl + 1..nl + 1 + size].to_vec());
            pos = nl + 1 + size + 1;
        }
        map
    }

    /// Full id of a (possibly abbreviated) name, via git.
    fn full_id(&self, spec: &str) -> String {
        lossy(&self.git(["rev-parse", "--verify", "--quiet", spec]))
            .trim()
            .to_string()
    }

    // ---- rewind against the oracle ---------------------------------------

    /// `rewind diff FROM TO` (stdout is a pipe: no colour) must equal git's text.
    pub(crate) fn check_diff_text(&self, from: &str, to: &str) -> Vec<u8> {
        let run = self.rewind(["diff", from, to]);
        run.assert_success();
        self.compare_text(
            &run.stdout_bytes,
            from,
            to,
            &format!("`rewind diff {from} {to}`"),
        );
        run.stdout_bytes
    }

    /// `rewind diff --no-renames FROM TO` must equal `git diff --no-renames`.
    pub(crate) fn check_diff_text_no_renames(&self, from: &str, to: &str) -> Vec<u8> {
        let run = self.rewind(["diff", "--no-renames", from, to]);
        run.assert_success();
        let want = self.git_diff_no_renames(from, to);
        let what = format!("`rewind diff --no-renames {from} {to}` vs git diff --no-renames");
        assert_same_diff(&run.stdout_bytes, &want, &what, None);
        run.stdout_bytes
    }

    /// `got` must be git's `diff -M` text from `from` to `to`.
    fn compare_text(&self, got: &[u8], from: &str, to: &str, what: &str) {
        let no_renames = self.git_diff_no_renames(from, to);
        let contract = self.git_diff(from, to);
        let what = format!("{what} vs git diff -M");
        assert_same_diff(got, &contract, &what, Some(&no_renames));
    }

    /// `rewind diff-full FROM TO` rows against numstat, name-status and cat-file.
    fn check_diff_full(&self, from: &str, to: &str) -> Vec<Value> {
        self.check_diff_full_asked(from, to, Ask::default())
    }

    /// `rewind diff-full FROM TO [--max-bytes N] [--no-renames] [-- PATHS]` rows against
    /// git's with PATHS.
    pub(crate) fn check_diff_full_asked(&self, from: &str, to: &str, ask: Ask) -> Vec<Value> {
        let args = ask.args(from, to);
        let run = self.rewind(&args);
        run.assert_success();
        let rows = parse_rows(&run.stdout);
        self.check_rows_asked(&rows, from, to, ask, &args.join(" "));
        rows
    }

    fn check_rows(&self, rows: &[Value], from: &str, to: &str, what: &str) {
        self.check_rows_asked(rows, from, to, Ask::default(), what)
    }

    /// `rows` are git's for `ask.paths`: files, order, statuses, counts; their text is the
    /// blobs', while it fits in `ask.max_bytes` (default 16 MiB), taken in order: from the
    /// first row whose text does not fit, rows with text are `truncated` and carry none.
    fn check_rows_asked(&self, rows: &[Value], from: &str, to: &str, ask: Ask, what: &str) {
        let numstat = self.numstat(from, to, ask);
        let status = self.name_status(from, to, ask);
        let raw = self.raw(from, to, ask);
        let mut budget = Some(ask.max_bytes.unwrap_or(TOTAL_LIMIT));
        let got: Vec<&str> = rows.iter().map(|r| r["file"].as_str().unwrap()).collect();
        let want: Vec<String> = numstat.iter().map(|n| lossy(&n.path)).collect();
        assert_eq!(
            got, want,
            "{what}: files (and their order) must be numstat's"
        );
        assert_eq!(status.len(), numstat.len(), "git: name-status vs numstat");
        assert_eq!(raw.len(), numstat.len(), "git: raw vs numstat");
        let blobs = self.blobs(
            raw.iter()
                .flat_map(|r| [r.old_id.as_str(), r.new_id.as_str()]),
        );
        for (i, row) in rows.iter().enumerate() {
            let (n, (st, st_path, st_old), r) = (&numstat[i], &status[i], &raw[i]);
            assert_eq!(st_path, &n.path);
            assert_eq!(r.path, n.path);
            assert_eq!(st_old, &n.old_path);
            assert_eq!(r.old_path, n.old_path);
            assert_eq!(&r.status, st, "git: raw vs name-status");
            assert_eq!(r.old_mode == "000000", st == "A", "git: raw modes {r:?}");
            assert_eq!(r.new_mode == "000000", st == "D", "git: raw modes {r:?}");
            let ctx =
                format!("{what}: row {i} {row}\n(git: numstat {n:?}, status {st}, raw {r:?})");
            let (want_status, similarity) = match st.as_str() {
                "A" => ("added", None),
                "D" => ("deleted", None),
                "M" | "T" => ("modified", None),
                r if r.starts_with('R') => ("renamed", Some(r[1..].parse::<u64>().unwrap())),
                other => panic!("unexpected git status {other}"),
            };
            assert_eq!(row["status"], want_status, "status: {ctx}");
            let old_file = n.old_path.as_ref().map(|old| Value::from(lossy(old)));
            assert_eq!(row.get("old_file"), old_file.as_ref(), "old_file: {ctx}");
            let similarity = similarity.map(Value::from);
            assert_eq!(
                row.get("similarity"),
                similarity.as_ref(),
                "similarity: {ctx}"
            );
            let old = blobs.get(&r.old_id).cloned().unwrap_or_default();
            let new = blobs.get(&r.new_id).cloned().unwrap_or_default();
            let too_large = old.len().max(new.len()) as u64 > CONTENT_LIMIT;
            let text = match too_large || n.additions.is_none() {
                true => 0, // binary or too large: no text to give
                false => (lossy(&old).len() + lossy(&new).len()) as u64,
            };
            // Once one row's text did not fit, no later row's does.
            let fits = budget.and_then(|left| left.checked_sub(text));
            let past_total = text > 0 && fits.is_none();
            if text > 0 {
                budget = fits;
            }
            let truncated = too_large || past_total;
            assert_eq!(
                flag(row, "truncated"),
                truncated,
                "truncated must say whether a side exceeds 4 MiB or the text passes the total: {ctx}"
            );
            match (n.additions, n.deletions) {
                (Some(add), Some(del)) => {
                    assert_eq!(row["binary"], false, "binary: {ctx}");
                    assert_eq!(row["additions"], add, "additions: {ctx}");
                    assert_eq!(row["deletions"], del, "deletions: {ctx}");
                    if truncated {
                        assert_eq!(row["before"], "", "truncated row carries no text: {ctx}");
                        assert_eq!(row["after"], "", "truncated row carries no text: {ctx}");
                    } else {
                        let invalid = std::str::from_utf8(&old).is_err()
                            || std::str::from_utf8(&new).is_err();
                        assert_eq!(flag(row, "lossy"), invalid, "lossy: {ctx}");
                        assert!(
                            row["before"].as_str() == Some(lossy(&old).as_str()),
                            "before must be the old blob ({} bytes): {ctx}",
                            old.len()
                        );
                        assert!(
                            row["after"].as_str() == Some(lossy(&new).as_str()),
                            "after must be the new blob ({} bytes): {ctx}",
                            new.len()
                        );
                    }
                }
                (None, None) => {
                    assert_eq!(row["binary"], true, "git says binary: {ctx}");
                    assert_eq!(row["additions"], 0, "binary counts: {ctx}");
                    assert_eq!(row["deletions"], 0, "binary counts: {ctx}");
                    assert_eq!(row["before"], "", "binary row carries no text: {ctx}");
                    assert_eq!(row["after"], "", "binary row carries no text: {ctx}");
                }
                _ => panic!("odd numstat {n:?}"),
            }
        }
    }

    /// `diff` text and `diff-full` rows between two snapshots.
    fn check_pair(&self, from: &str, to: &str) {
        self.check_diff_text(from, to);
        self.check_diff_full(from, to);
    }

    /// Everything, where `to` is the snapshot of the project as it is now: also `patch`,
    /// `has-changes`, and `diff`/`diff-full` without `to`.
    fn check_now(&self, from: &str, to: &str) {
        self.check_pair(from, to);
        // patch: plain and JSON
        let names = self.name_only(from, to, &[]);
        let run = self.rewind(["patch", from]);
        run.assert_success();
        // Human output quotes names as git does with core.quotePath=true.
        let want_text = self.git([
            "-c",
            "core.quotePath=true",
            "diff",
            "--name-only",
            "--no-renames",
            from,
            to,
        ]);
        assert_eq!(
            run.stdout_bytes, want_text,
            "`patch {from}` vs git diff --name-only"
        );
        let run = self.rewind(["--json", "patch", from]);
        run.assert_success();
        let json: Value = serde_json::from_str(run.stdout.trim())
            .unwrap_or_else(|e| panic!("patch --json is not JSON ({e}): {run}"));
        assert_eq!(
            json["hash"],
            self.full_id(from),
            "patch --json hash: {json}"
        );
        let files: Vec<String> = names.iter().map(|n| lossy(n)).collect();
        assert_eq!(
            json["files"],
            serde_json::json!(files),
            "patch --json files"
        );
        // has-changes
        let changed = self.full_id(from) != self.full_id(to);
        assert_eq!(self.has_changes(from), changed, "has-changes {from}");
        // no `to`: the project now
        let run = self.rewind(["diff", from]);
        run.assert_success();
        self.compare_text(
            &run.stdout_bytes,
            from,
            to,
            &format!("`rewind diff {from}` (no to)"),
        );
        let run = self.rewind(["diff-full", from]);
        run.assert_success();
        self.check_rows(&parse_rows(&run.stdout), from, to, "diff-full without to");
    }

    /// `has-changes` in both output forms; returns the answer.
    fn has_changes(&self, hash: &str) -> bool {
        let run = self.rewind(["has-changes", hash]);
        run.assert_success();
        let plain = match run.stdout.as_str() {
            "true\n" => true,
            "false\n" => false,
            _ => panic!("has-changes must print true or false: {run}"),
        };
        let run = self.rewind(["--json", "has-changes", hash]);
        run.assert_success();
        let json: Value = serde_json::from_str(run.stdout.trim())
            .unwrap_or_else(|e| panic!("has-changes --json is not JSON ({e}): {run}"));
        assert_eq!(
            json["changed"], plain,
            "has-changes --json vs plain: {json}"
        );
        assert!(json["hash"].is_string(), "has-changes --json hash: {json}");
        plain
    }

    /// A bad id: exit 1, the id named on stderr, nothing on stdout; with `--json` the
    /// error object with `code` on stdout.
    fn assert_error(&self, args: &[&str], code: &str, id: &str) {
        let run = self.rewind(args);
        run.assert_code(1);
        assert!(
            run.stdout.is_empty(),
            "an error must not print a result: {run}"
        );
        assert!(
            run.stderr.contains(id),
            "the message must name the id {id:?}: {run}"
        );
        let mut json_args = vec!["--json"];
        json_args.extend_from_slice(args);
        let run = self.rewind(&json_args);
        run.assert_code(1);
        let json: Value = serde_json::from_str(run.stdout.trim())
            .unwrap_or_else(|e| panic!("--json error output is not JSON ({e}): {run}"));
        assert_eq!(json["error"]["code"], code, "error code: {run}");
        let message = json["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(id),
            "the JSON message must name the id {id:?}: {run}"
        );
    }

    pub(crate) fn fsck(&self) {
        assert_fsck_clean(self.sb, &self.store);
    }
}

fn flag(row: &Value, key: &str) -> bool {
    match row.get(key) {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => panic!("{key} must be a boolean, got {other} in {row}"),
    }
}

/// Parses `diff-full` output: a JSON array of rows with exactly the contract's keys.
fn parse_rows(stdout: &str) -> Vec<Value> {
    let json: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("diff-full output is not JSON ({e}): {stdout}"));
    let rows = json
        .as_array()
        .unwrap_or_else(|| panic!("diff-full must print an array: {json}"))
        .clone();
    for row in &rows {
        let obj = row.as_object().expect("row is an object");
        for key in [
            "file",
            "status",
            "before",
            "after",
            "additions",
            "deletions",
            "binary",
        ] {
            assert!(obj.contains_key(key), "row without {key:?}: {row}");
        }
        for key in obj.keys() {
            assert!(
                [
                    "file",
                    "status",
                    "before",
                    "after",
                    "additions",
                    "deletions",
                    "binary",
                    "truncated",
                    "lossy",
                    "old_file",
                    "similarity"
                ]
                .contains(&key.as_str()),
                "unexpected key {key:?} in {row}"
            );
        }
    }
    rows
}

/// Panics unless `got == want`. Says so plainly when the texts differ only in the
/// abbreviation length of `index` lines; else shows the first differing lines. `no_renames`
/// (git's text with `--no-renames`) tells a rename-detection difference from other ones.
fn assert_same_diff(got: &[u8], want: &[u8], what: &str, no_renames: Option<&[u8]>) {
    if got == want {
        return;
    }
    let g: Vec<&[u8]> = got.split(|b| *b == b'\n').collect();
    let w: Vec<&[u8]> = want.split(|b| *b == b'\n').collect();
    if g.len() == w.len() {
        let mut only_abbrev = true;
        let mut examples = Vec::new();
        for (a, b) in g.iter().zip(&w) {
            if a == b {
                continue;
            }
            if a.starts_with(b"index ") && b.starts_with(b"index ") && same_ids(a, b) {
                if examples.len() < 3 {
                    examples.push(format!("rewind {:?} / git {:?}", lossy(a), lossy(b)));
                }
            } else {
                only_abbrev = false;
                break;
            }
        }
        if only_abbrev {
            panic!(
                "{what}: the texts differ ONLY in the abbreviation length of `index` lines:\n{}",
                examples.join("\n")
            );
        }
    }
    let note = match no_renames {
        Some(nr) if nr == got => {
            "\nNOTE: rewind's text equals `git diff --no-renames`: the difference is git's \
             rename detection."
        }
        _ => "",
    };
    let first = g
        .iter()
        .zip(&w)
        .position(|(a, b)| a != b)
        .unwrap_or(g.len().min(w.len()));
    let from = first.saturating_sub(4);
    let show = |lines: &[&[u8]]| -> String {
        lines
            .iter()
            .enumerate()
            .skip(from)
            .take(12)
            .map(|(i, l)| {
                format!(
                    "{:>6}{} {:?}\n",
                    i + 1,
                    if i == first { ">" } else { ":" },
                    lossy(l)
                )
            })
            .collect()
    };
    panic!(
        "{what}: texts differ at line {} (rewind {} bytes, git {} bytes){note}\n--- rewind ---\n{}--- git ---\n{}",
        first + 1,
        got.len(),
        want.len(),
        show(&g),
        show(&w)
    );
}

/// `index a..b[ mode]` lines naming the same ids, one abbreviation a prefix of the other.
fn same_ids(a: &[u8], b: &[u8]) -> bool {
    let parse = |l: &[u8]| -> Option<(String, String, String)> {
        let s = lossy(&l[6..]);
        let (ids, mode) = s.split_once(' ').unwrap_or((&s, ""));
        let (x, y) = ids.split_once("..")?;
        Some((x.to_string(), y.to_string(), mode.to_string()))
    };
    let (Some((ax, ay, am)), Some((bx, by, bm))) = (parse(a), parse(b)) else {
        return false;
    };
    let pre = |p: &str, q: &str| p.starts_with(q) || q.starts_with(p);
    am == bm && pre(&ax, &bx) && pre(&ay, &by)
}

fn strip_ansi(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == 0x1b && b.get(i + 1) == Some(&b'[') {
            let mut j = i + 2;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b';') {
                j += 1;
            }
            if b.get(j) == Some(&b'm') {
                i = j + 1;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// `n` lines "line {i}" joined (each ending in "\n").
fn numbered(prefix: &str, n: usize) -> String {
    (0..n).map(|i| format!("{prefix} {i}\n")).collect()
}

// ---------------------------------------------------------------------------
// Basic cases
// ---------------------------------------------------------------------------

#[test]
fn modified_added_deleted_match_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("keep.txt", "same\n")
        .file("mod.txt", numbered("line", 30))
        .file("gone.txt", "to be deleted\nsecond line\n")
        .file("dir/inner.txt", "a\nb\nc\n")
        .file("dir/sub/deep.txt", numbered("deep", 5));
    let a = p.snap();
    let mut m = numbered("line", 30).replace("line 3\n", "LINE three\n");
    m = m.replace("line 20\n", "");
    m.push_str("appended\n");
    p.file("mod.txt", m)
        .remove("gone.txt")
        .file("new.txt", "brand new\ncontent\n")
        .file("dir/inner.txt", "a\nB\nc\nd\n")
        .file("dir/sub/added.txt", "x\n");
    let b = p.snap();
    assert_ne!(a, b);
    p.check_now(&a, &b);
    // And backwards.
    p.check_pair(&b, &a);
    p.fsck();
}

#[test]
fn nothing_changed_gives_empty_results() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("a.txt", "a\n").file("d/b.txt", "b\n");
    let a = p.snap();
    let b = p.snap();
    assert_eq!(a, b, "two snapshots with nothing in between");
    let run = p.rewind(["diff-full", &a, &b]);
    run.assert_success();
    assert_eq!(
        serde_json::from_str::<Value>(run.stdout.trim()).unwrap(),
        serde_json::json!([]),
        "{run}"
    );
    let run = p.rewind(["diff", &a, &b]);
    run.assert_success();
    assert!(run.stdout_bytes.is_empty(), "empty diff expected: {run}");
    assert!(p.git_diff(&a, &b).is_empty());
    assert!(!p.has_changes(&a));
    let run = p.rewind(["patch", &a]);
    run.assert_success();
    assert_eq!(run.stdout, "", "{run}");
    p.check_now(&a, &b);
    p.fsck();
}

#[test]
fn has_changes_false_then_true_then_false_after_revert() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("a.txt", "one\n").file("b/c.txt", "two\n");
    let a = p.snap();
    assert!(!p.has_changes(&a), "nothing changed yet");
    // Same content rewritten (new mtime): still no change.
    std::thread::sleep(std::time::Duration::from_millis(20));
    p.file("a.txt", "one\n");
    assert!(!p.has_changes(&a), "rewriting the same bytes is no change");
    p.file("a.txt", "one!\n");
    assert!(p.has_changes(&a), "after an edit");
    p.file("a.txt", "one\n");
    assert!(!p.has_changes(&a), "after reverting the edit");
    p.file("b/new", "");
    assert!(p.has_changes(&a), "after adding an empty file");
    p.remove("b/new").chmod("b/c.txt", 0o755);
    assert!(p.has_changes(&a), "after chmod +x");
    // Abbreviated id.
    let short = lossy(&p.git(["rev-parse", "--short=6", &a]))
        .trim()
        .to_string();
    assert!(p.has_changes(&short));
    p.fsck();
}

#[test]
fn diff_without_to_equals_diff_to_fresh_track() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("a.txt", numbered("a", 10)).file("b.txt", "b\n");
    let a = p.snap();
    p.file("a.txt", numbered("a", 12))
        .remove("b.txt")
        .file("c.txt", "c\n");
    let run = p.rewind(["diff", &a]);
    run.assert_success();
    let full = p.rewind(["diff-full", &a]);
    full.assert_success();
    let now = p.snap();
    let explicit = p.rewind(["diff", &a, &now]);
    explicit.assert_success();
    assert_eq!(
        run.stdout_bytes, explicit.stdout_bytes,
        "diff A == diff A <track>"
    );
    let explicit_full = p.rewind(["diff-full", &a, &now]);
    explicit_full.assert_success();
    assert_eq!(
        full.stdout, explicit_full.stdout,
        "diff-full A == diff-full A <track>"
    );
    p.check_now(&a, &now);
    p.fsck();
}

#[test]
fn abbreviated_ids_are_accepted() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("a.txt", "1\n2\n3\n");
    let a = p.snap();
    p.file("a.txt", "1\n3\n4\n");
    let b = p.snap();
    let want = p.check_diff_text(&a, &b);
    for len in [4, 5, 7, 12, 39] {
        let sa = lossy(&p.git(["rev-parse", &format!("--short={len}"), &a]))
            .trim()
            .to_string();
        let sb_ = lossy(&p.git(["rev-parse", &format!("--short={len}"), &b]))
            .trim()
            .to_string();
        let run = p.rewind(["diff", &sa, &sb_]);
        run.assert_success();
        assert_eq!(run.stdout_bytes, want, "diff with --short={len} ids");
        let full = p.rewind(["diff-full", &sa, &sb_]);
        full.assert_success();
        p.check_rows(
            &parse_rows(&full.stdout),
            &a,
            &b,
            "diff-full with abbreviated ids",
        );
        let run = p.rewind(["--json", "patch", &sa]);
        run.assert_success();
        let json: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        assert_eq!(json["hash"], a, "patch --json must give the full id");
    }
    p.fsck();
}

#[test]
fn diff_from_the_empty_tree() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("a.txt", "a\n")
        .exec("bin/x", "#!/bin/sh\n")
        .symlink("l", "a.txt")
        .file("e", "");
    let a = p.snap();
    let empty = empty_tree(&sb);
    p.check_pair(&empty, &a);
    p.check_pair(&a, &empty);
    p.fsck();
}

// ---------------------------------------------------------------------------
// Content kinds
// ---------------------------------------------------------------------------

#[test]
fn binary_changes_match_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let bin1: Vec<u8> = (0..3000u32).map(|i| (i * 31 % 251) as u8).collect();
    let mut bin2 = bin1.clone();
    bin2[100] ^= 0x55;
    // NUL beyond git's 8000-byte probe: text for git.
    let mut late_nul = numbered("text", 1000).into_bytes();
    assert!(late_nul.len() > 8000);
    late_nul.push(0);
    late_nul.extend_from_slice(b"tail\n");
    p.file("t2b", "text\nfile\n")
        .file("b2t", &bin1)
        .file("b2b", &bin1)
        .file("bin-deleted", &bin2)
        .file("late-nul", &late_nul)
        .file("nul-at-8000", {
            let mut v = vec![b'x'; 7999];
            v.push(0);
            v
        });
    let a = p.snap();
    p.file("t2b", &bin1)
        .file("b2t", "now\ntext\n")
        .file("b2b", &bin2)
        .remove("bin-deleted")
        .file("bin-added", b"\x00\x01\x02")
        .file("late-nul", {
            let mut v = late_nul.clone();
            v.extend_from_slice(b"more\n");
            v
        })
        .file("nul-at-8000", {
            let mut v = vec![b'y'; 7999];
            v.push(0);
            v
        });
    let b = p.snap();
    p.check_now(&a, &b);
    p.fsck();
}

#[test]
fn mode_only_change_and_mode_plus_content() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("run.sh", "#!/bin/sh\necho hi\n")
        .exec("was-exec", "x\n")
        .file("both", "1\n2\n");
    let a = p.snap();
    p.chmod("run.sh", 0o755)
        .chmod("was-exec", 0o644)
        .file("both", "1\n2\n3\n")
        .chmod("both", 0o755);
    let b = p.snap();
    p.check_now(&a, &b);
    let rows = p.check_diff_full(&a, &b);
    let row = rows
        .iter()
        .find(|r| r["file"] == "run.sh")
        .expect("run.sh row");
    assert_eq!(row["status"], "modified");
    assert_eq!(
        (row["additions"].as_u64(), row["deletions"].as_u64()),
        (Some(0), Some(0))
    );
    p.fsck();
}

#[test]
fn symlink_file_swaps_match_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("target.txt", "target\ncontent\n")
        .symlink("link-becomes-file", "target.txt")
        .file("file-becomes-link", "was a file\n")
        .symlink("link-retargeted", "target.txt")
        .symlink("link-same-text", "same")
        .file("file-same-text", "same");
    let a = p.snap();
    p.remove("link-becomes-file")
        .file("link-becomes-file", "now a file\nwith lines\n")
        .remove("file-becomes-link")
        .symlink("file-becomes-link", "target.txt")
        .remove("link-retargeted")
        .symlink("link-retargeted", "elsewhere/x")
        // Same bytes, different type: a typechange with equal text.
        .remove("link-same-text")
        .file("link-same-text", "same")
        .remove("file-same-text")
        .symlink("file-same-text", "same");
    let b = p.snap();
    p.check_now(&a, &b);
    // One modified row per swapped path in diff-full, two patches each in diff.
    let rows = p.check_diff_full(&a, &b);
    for name in [
        "link-becomes-file",
        "file-becomes-link",
        "link-same-text",
        "file-same-text",
    ] {
        let n = rows.iter().filter(|r| r["file"] == name).count();
        assert_eq!(n, 1, "{name}: one diff-full row");
        let row = rows.iter().find(|r| r["file"] == name).unwrap();
        assert_eq!(row["status"], "modified", "{row}");
    }
    let text = lossy(&p.check_diff_text(&a, &b));
    assert_eq!(
        text.matches("diff --git a/link-becomes-file b/link-becomes-file\n")
            .count(),
        2,
        "{text}"
    );
    p.fsck();
}

#[test]
fn crlf_and_final_newlines_match_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("crlf.txt", "one\r\ntwo\r\nthree\r\n")
        .file("to-crlf.txt", "a\nb\nc\n")
        .file("mixed.txt", "a\r\nb\nc\rd\n")
        .file("nonl-old.txt", "x\ny")
        .file("nonl-new.txt", "x\ny\n")
        .file("nonl-both.txt", "x\ny")
        .file("nonl-same-last.txt", "a\nb\nlast")
        .file("only-nl.txt", "\n")
        .file("nonl-deleted.txt", "gone")
        .file("cr-only.txt", "a\rb\rc");
    let a = p.snap();
    p.file("crlf.txt", "one\r\nTWO\r\nthree\r\n")
        .file("to-crlf.txt", "a\r\nb\r\nc\r\n")
        .file("mixed.txt", "a\nb\r\nc\rD\n")
        .file("nonl-old.txt", "x\ny\n")
        .file("nonl-new.txt", "x\ny")
        .file("nonl-both.txt", "x\nz")
        .file("nonl-same-last.txt", "A\nb\nlast")
        .file("only-nl.txt", "")
        .remove("nonl-deleted.txt")
        .file("nonl-added.txt", "new")
        .file("cr-only.txt", "a\rB\rc");
    let b = p.snap();
    p.check_now(&a, &b);
    p.fsck();
}

#[test]
fn empty_files_added_removed_and_filled() {
    // Removals and additions of empty files happen in different steps: git's rename
    // detection pairs any deleted empty file with any added one (that case is
    // `renamed_file_diff_text_matches_git`'s business).
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("empty-removed", "")
        .file("empty-filled", "")
        .file("emptied", "had\ncontent\n")
        .exec("empty-exec-removed", "")
        .file("empty-chmod", "");
    let a = p.snap();
    p.remove("empty-removed")
        .file("empty-filled", "now\nfull\n")
        .file("emptied", "")
        .remove("empty-exec-removed")
        .chmod("empty-chmod", 0o755);
    let b = p.snap();
    p.check_now(&a, &b);
    p.file("empty-added", "").exec("empty-exec-added", "");
    let c = p.snap();
    p.check_now(&b, &c);
    p.fsck();
}

#[test]
fn hunk_headers_context_and_merging_match_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    // Hunks 6 and 7 unchanged lines apart (git merges hunks whose contexts touch).
    let gap = |n: usize| -> (String, String) {
        let base: Vec<String> = (0..40).map(|i| format!("  body {i}")).collect();
        let mut new = base.clone();
        new[10] = "  changed A".into();
        new[10 + n + 1] = "  changed B".into();
        (base.join("\n") + "\n", new.join("\n") + "\n")
    };
    // Function names for `@@ ... @@ name`: git takes the nearest preceding line of the old
    // side that starts with a letter, `_` or `$`, cut to 80 bytes, trailing blanks removed.
    let long = format!("fn {}(x: u8) {{   ", "ü".repeat(50)); // > 80 bytes, cut inside 'ü'
    let mut func_a = String::new();
    for (i, head) in [
        "fn first() {",
        "_underscore()",
        "$dollar = 1",
        "\tindented() {",
        " spaced() {",
        "{",
        "0digit()",
        "élan()",
        long.as_str(),
        "trailing   \t",
        "crlf() {\r",
        "class Klass:",
    ]
    .iter()
    .enumerate()
    {
        func_a.push_str(head);
        func_a.push('\n');
        for j in 0..8 {
            func_a.push_str(&format!("    stmt {i} {j};\n"));
        }
    }
    let func_b: String = func_a
        .lines()
        .map(|l| {
            if l.ends_with(" 6;") {
                format!("{l} // edited\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let (g6a, g6b) = gap(6);
    let (g7a, g7b) = gap(7);
    let (g5a, g5b) = gap(5);
    p.file("gap6", g6a)
        .file("gap7", g7a)
        .file("gap5", g5a)
        .file("func", &func_a)
        .file("first-line", "a\nb\nc\nd\ne\nf\ng\nh\n")
        .file("last-line", "a\nb\nc\nd\ne\nf\ng\nh\n");
    let a = p.snap();
    p.file("gap6", g6b)
        .file("gap7", g7b)
        .file("gap5", g5b)
        .file("func", &func_b)
        .file("first-line", "A\nb\nc\nd\ne\nf\ng\nh\n")
        .file("last-line", "a\nb\nc\nd\ne\nf\ng\nH");
    let b = p.snap();
    p.check_now(&a, &b);
    p.check_pair(&b, &a);
    p.fsck();
}

/// Function names in hunk headers, at the edges git's finder has: after the 80-byte cut and
/// the trailing-blank strip (spaces, tabs, CR only: a form feed or vertical tab stays), git ends
/// the name before its first byte that is not UTF-8 and before U+FFFE/U+FFFF; a name cut
/// inside a character loses the whole character.
#[test]
fn function_names_end_at_invalid_utf8_and_keep_form_feeds_like_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let a77 = "a".repeat(77);
    let heads: Vec<Vec<u8>> = vec![
        b"f \x0c".to_vec(),
        b"f \x0b".to_vec(),
        [b"f", a77.as_bytes(), b" \xbc"].concat(),
        [b"f", a77.as_bytes(), b"\xe9 bbb"].concat(),
        [b"f", a77.as_bytes(), "\u{1f600}".as_bytes()].concat(),
        [b"f", a77.as_bytes(), "\u{fc}bbb".as_bytes()].concat(),
        b"faaaa\xe9\xe9".to_vec(),
        [b"f\xe9", a77.as_bytes()].concat(),
        b"fa\xed\xa0\x80b".to_vec(), // an encoded surrogate
        b"fa\xc0\x80b".to_vec(),     // an overlong encoding
        "fa\u{fffe}b".as_bytes().to_vec(),
        "fa\u{ffff}b".as_bytes().to_vec(),
        "fa\u{fdd0}b\u{1fffe}c\u{10ffff}".as_bytes().to_vec(),
    ];
    let (mut old, mut new) = (Vec::new(), Vec::new());
    for (i, head) in heads.iter().enumerate() {
        for text in [&mut old, &mut new] {
            text.extend_from_slice(head);
            text.push(b'\n');
        }
        for j in 0..8 {
            old.extend_from_slice(format!("    stmt {i} {j};\n").as_bytes());
            let edit = if j == 6 { " // edited" } else { "" };
            new.extend_from_slice(format!("    stmt {i} {j};{edit}\n").as_bytes());
        }
    }
    p.file("func", &old);
    let a = p.snap();
    p.file("func", &new);
    let b = p.snap();
    p.check_now(&a, &b);
    p.fsck();
}

/// Bug (found by faults.rs `fuzz_diff_full_counts_equal_git_numstat`): gix-imara-diff's indent
/// measure skips form feeds, so a line holding only `\f` was blank to its slider heuristic and
/// a deleted `{` after it slid to another place than git's; git counts a form feed as text.
#[test]
fn form_feed_line_is_not_blank_to_the_slider_heuristic() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let cases: [(&str, &str); 4] = [
        ("x\n\x0c\n{\n{\ny\n", "x\n\x0c\n{\ny\n"),
        ("a\n}\n\x0c\n{\n{\nb\nc\n", "a\n}\n\x0c\n{\nb\nc\n"),
        ("x\n \x0c \n{\n{\ny\n", "x\n \x0c \n{\ny\n"),
        ("x\n\x0b\n{\n{\ny\n", "x\n\x0b\n{\ny\n"),
    ];
    for (i, (old, _)) in cases.iter().enumerate() {
        p.file(format!("f{i}"), old);
    }
    let a = p.snap();
    for (i, (_, new)) in cases.iter().enumerate() {
        p.file(format!("f{i}"), new);
    }
    let b = p.snap();
    p.check_now(&a, &b);
    p.check_pair(&b, &a);
}

#[test]
fn unicode_content_and_names_match_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("naïve.txt", "café\nñandú\n")
        .file("日本/ファイル.md", "# 見出し\n本文\n")
        .file("emoji 😀.txt", "😀\n")
        .file("zwj/👩‍👩‍👧.txt", "family\n")
        .file("combining/e\u{301}.txt", "decomposed é\n");
    let a = p.snap();
    p.file("naïve.txt", "café\nÑANDÚ\n")
        .file("日本/ファイル.md", "# 見出し\n本文を変更\n追加\n")
        .remove("emoji 😀.txt")
        .file("emoji 🎉.txt", "🎉 tada\n")
        .file("zwj/👩‍👩‍👧.txt", "family!\n")
        .file("combining/\u{e9}.txt", "precomposed é\n");
    let b = p.snap();
    p.check_now(&a, &b);
    p.fsck();
}

#[test]
fn awkward_names_are_quoted_as_git_quotes_them() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let names = [
        "with space.txt",
        "two  spaces",
        " leading space",
        "trailing space ",
        "tab\there",
        "tab\tand space",
        "quote\"d",
        "back\\slash",
        "new\nline",
        "bell\u{7}",
        "del\u{7f}",
        "cr\rname",
        "esc\u{1b}[0m",
        "-rf",
        "--help.txt",
        "-",
        "a b/c d.txt",
        "dir\twith tab/file",
        "ünï cödé with space",
        "#hash",
        "$dollar",
        "star*",
        "question?",
        "semi;colon",
    ];
    for (i, n) in names.iter().enumerate() {
        p.file(n, format!("original {i}\n"));
    }
    p.file("del me.txt", "deleted with a space\n")
        .file("del\"q", "deleted with a quote\n");
    let a = p.snap();
    for (i, n) in names.iter().enumerate() {
        p.file(n, format!("original {i}\nchanged {i}\n"));
    }
    p.remove("del me.txt")
        .remove("del\"q")
        .file("add me.txt", "added with a space\n")
        .file("add\\b", "added with a backslash\n")
        .file("add\ttab space x", "added: tab and space\n")
        .exec("exec me", "mode change with a space\n");
    let b = p.snap();
    p.check_now(&a, &b);
    p.fsck();
}

#[test]
fn repeated_lines_hunk_placement_matches_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let braces_a = "{\n}\n\n{\n}\n\n{\n}\n\n{\n}\n\n{\n}\n";
    let braces_b = "{\n}\n\n{\n}\n\n{\n}\n\n{\n}\n\n{\n}\n\n{\n}\n";
    let code_a = "fn a() {\n    x();\n}\n\nfn b() {\n    y();\n}\n\nfn c() {\n    z();\n}\n";
    let code_b = "fn a() {\n    x();\n}\n\nfn new() {\n    n();\n}\n\nfn b() {\n    y();\n}\n\nfn c() {\n    z();\n}\n";
    // Indentation heuristic material: a block inserted between similar blocks.
    let py_a = "def f():\n    if x:\n        return 1\n\n    return 2\n\ndef g():\n    if y:\n        return 3\n\n    return 4\n";
    let py_b = "def f():\n    if x:\n        return 1\n\n    if z:\n        return 5\n\n    return 2\n\ndef g():\n    if y:\n        return 3\n\n    return 4\n";
    let blanks_a = "a\n\n\n\nb\n\n\n\nc\n";
    let blanks_b = "a\n\n\n\n\n\nb\n\nc\n\n";
    let mut many_a = String::new();
    let mut many_b = String::new();
    for i in 0..60 {
        many_a.push_str("}\n\n{\n");
        many_b.push_str("}\n\n{\n");
        if i % 17 == 5 {
            many_b.push_str("}\n{\n\n");
        }
        if i % 23 == 11 {
            many_a.push_str("x\n");
        }
    }
    let far_a: String = (0..40)
        .map(|i| {
            if i == 20 {
                "changed?\n".to_string()
            } else {
                "same\n".to_string()
            }
        })
        .collect();
    let far_b: String = (0..40)
        .map(|i| {
            if i == 5 || i == 35 {
                "X\n".to_string()
            } else {
                "same\n".to_string()
            }
        })
        .collect();
    p.file("braces", braces_a)
        .file("code.rs", code_a)
        .file("code.py", py_a)
        .file("blanks", blanks_a)
        .file("many", &many_a)
        .file("far", &far_a)
        .file("all-same", "x\n".repeat(50))
        .file("swap", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n");
    let a = p.snap();
    p.file("braces", braces_b)
        .file("code.rs", code_b)
        .file("code.py", py_b)
        .file("blanks", blanks_b)
        .file("many", &many_b)
        .file("far", &far_b)
        .file("all-same", "x\n".repeat(47))
        .file("swap", "j\ni\nc\nd\ne\nf\ng\nh\nb\na\n");
    let b = p.snap();
    p.check_now(&a, &b);
    p.check_pair(&b, &a);
    p.fsck();
}

#[test]
fn file_replaced_by_directory_and_back() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("foo", "I am the file foo\n")
        .file("foo.txt", "neighbour sorting between foo and foo/\n")
        .file("foo-bar", "another neighbour\n")
        .file("foo0", "and another\n")
        .file("dir/x", "dir x\n")
        .file("dir/y", "dir y\n")
        .file("dir.txt", "dir.txt\n");
    let a = p.snap();
    p.remove("foo")
        .file("foo/inner", "completely different inner content\n")
        .file("foo/deeper/leaf", "leaf\n")
        .remove("dir")
        .file("dir", "now dir is a file\n");
    let b = p.snap();
    p.check_now(&a, &b);
    p.remove("foo")
        .file("foo", "the file is back, different\n")
        .remove("dir")
        .file("dir/z", "a new z\n");
    let c = p.snap();
    p.check_now(&b, &c);
    p.check_pair(&a, &c);
    p.check_pair(&c, &a);
    // A symlink replaced by a directory.
    p.remove("foo")
        .symlink("foo", "dir")
        .remove("foo0")
        .file("foo0/x", "zz\n")
        // A directory replaced by a symlink.
        .remove("dir")
        .symlink("dir", "foo0");
    let d = p.snap();
    p.check_now(&c, &d);
    p.fsck();
}

#[test]
fn deep_and_long_paths() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let deep: String = (0..60).map(|i| format!("level{i}/")).collect();
    let long_name = "n".repeat(250);
    p.file(format!("{deep}leaf.txt"), "leaf\n")
        .file(format!("{deep}sibling.txt"), "sibling\n")
        .file(format!("mid/{long_name}"), "long\n")
        .file(format!("{}x", &deep[..deep.len() / 2]), "halfway\n");
    let a = p.snap();
    p.file(format!("{deep}leaf.txt"), "leaf changed\n")
        .remove(format!("{deep}sibling.txt"))
        .file(format!("{deep}more/new.txt"), "new deep file\n")
        .file(format!("mid/{long_name}"), "long changed\n")
        .remove(format!("{}x", &deep[..deep.len() / 2]));
    let b = p.snap();
    p.check_now(&a, &b);
    p.fsck();
}

#[test]
fn non_utf8_content_is_lossy() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("latin1.txt", b"caf\xe9\nna\xefve\n")
        .file("to-bad.txt", "fine\ntext\n")
        .file("from-bad.txt", b"\xff\xfe bad\nline\n")
        .file("ok.txt", "plain\n");
    let a = p.snap();
    p.file("latin1.txt", b"caf\xe9\nna\xefve\nplus\n")
        .file("to-bad.txt", b"fine\nt\xc3xt\n")
        .file("from-bad.txt", "good\nline\n")
        .file("ok.txt", "plain\nmore\n")
        .file(OsStr::from_bytes(b"name-\xe9.txt"), "a non-UTF-8 name\n");
    let b = p.snap();
    p.check_now(&a, &b);
    let rows = p.check_diff_full(&a, &b);
    let get = |f: &str| rows.iter().find(|r| r["file"] == f).unwrap().clone();
    for f in ["latin1.txt", "to-bad.txt", "from-bad.txt"] {
        let row = get(f);
        assert_eq!(row["lossy"], true, "{row}");
        let text = format!(
            "{}{}",
            row["before"].as_str().unwrap(),
            row["after"].as_str().unwrap()
        );
        assert!(text.contains('\u{FFFD}'), "U+FFFD expected: {row}");
    }
    assert!(get("ok.txt").get("lossy").is_none_or(|v| v == false));
    p.fsck();
}

#[test]
fn large_text_file_is_truncated_but_counted() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let max = 64 << 20;
    // ~5.2 MiB of numbered lines.
    let big = numbered("a fairly ordinary line of text, number", 130_000);
    assert!(big.len() as u64 > CONTENT_LIMIT);
    // Exactly 4 MiB: not larger than the limit, so it keeps its text.
    let mut exact = numbered("x", 600_000).into_bytes();
    exact.truncate(CONTENT_LIMIT as usize - 1);
    exact.push(b'\n');
    assert_eq!(exact.len() as u64, CONTENT_LIMIT);
    p.file("big.txt", &big)
        .file("exact.txt", &exact)
        .file("small.txt", "small\n")
        .file("grows.txt", "will grow past the limit\n");
    let a = p.snap_big(max);
    let big2 = big
        .replace("number 5\n", "number five\n")
        .replace("number 70000\n", "")
        .replace("number 129999\n", "number 129999\nappended\n");
    let mut exact2 = exact.clone();
    exact2[0] = b'Y';
    p.file("big.txt", &big2)
        .file("exact.txt", &exact2)
        .file("small.txt", "small\nchanged\n")
        .file("grows.txt", numbered("grown", 500_000));
    let b = p.snap_big(max);
    let rows = p.check_diff_full(&a, &b);
    let get = |f: &str| rows.iter().find(|r| r["file"] == f).unwrap().clone();
    assert_eq!(get("big.txt")["truncated"], true);
    assert_eq!(get("grows.txt")["truncated"], true);
    assert!(!flag(&get("exact.txt"), "truncated"));
    assert!(!flag(&get("small.txt"), "truncated"));
    p.check_diff_text(&a, &b);
    p.fsck();
}

#[test]
fn color_always_is_plain_text_plus_escapes() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("a.txt", numbered("a", 20))
        .file("bin", b"\x00bin")
        .file("gone", "gone\n");
    let a = p.snap();
    p.file("a.txt", numbered("a", 20).replace("a 4\n", "four\n"))
        .file("bin", b"\x00bin2")
        .remove("gone")
        .file("new file", "new\n")
        .chmod("a.txt", 0o755);
    let b = p.snap();
    let plain = p.check_diff_text(&a, &b);
    let run = p.rewind(["diff", "--color=always", &a, &b]);
    run.assert_success();
    assert!(
        run.stdout_bytes.windows(2).any(|w| w == b"\x1b["),
        "--color=always must colour: {run}"
    );
    assert_same_diff(
        &strip_ansi(&run.stdout_bytes),
        &plain,
        "--color=always minus escapes",
        None,
    );
    let run = p.rewind(["diff", "--color=never", &a, &b]);
    run.assert_success();
    assert_eq!(run.stdout_bytes, plain, "--color=never");
    let run = p.rewind(["diff", "--color=auto", &a, &b]);
    run.assert_success();
    assert_eq!(run.stdout_bytes, plain, "--color=auto into a pipe");
    // Without `to`, too.
    let run = p.rewind(["diff", "--color=always", &a]);
    run.assert_success();
    assert_eq!(strip_ansi(&run.stdout_bytes), plain);
    p.fsck();
}

// ---------------------------------------------------------------------------
// Renames: git's `diff` detects them by default
// ---------------------------------------------------------------------------

#[test]
fn renamed_file_diff_text_matches_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("old-name.txt", numbered("content", 8))
        .file("similar-old.txt", numbered("similar", 10));
    let a = p.snap();
    p.remove("old-name.txt")
        .file("new-name.txt", numbered("content", 8))
        .remove("similar-old.txt")
        .file(
            "similar-new.txt",
            numbered("similar", 10).replace("similar 3\n", "changed\n"),
        );
    let b = p.snap();
    // Both pairs are renames for `git diff -M`, and two paths each with `--no-renames`.
    p.check_diff_full(&a, &b);
    p.check_diff_text(&a, &b);
    let ask = Ask {
        no_renames: true,
        ..Ask::default()
    };
    p.check_diff_full_asked(&a, &b, ask);
    p.check_diff_text_no_renames(&a, &b);
    p.fsck();
}

// ---------------------------------------------------------------------------
// Many files
// ---------------------------------------------------------------------------

#[test]
fn thousand_changed_files_in_git_order() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    // 10 dirs x 10 subdirs x 15 names, with names that sort differently as paths and as
    // plain strings: "f1", "f1.txt", "f1-x", "f1/..." (dir), "F1", "f10".
    let bases = [
        "f1", "f1.txt", "f1-x", "F1", "f10", "f2", "g", "g.rs", "g_", "h h", "Z", "z", "0", "9.x",
        "a~",
    ];
    let mut all = Vec::new();
    for d in 0..10 {
        for s in 0..10 {
            let dir = match s {
                0 => format!("d{d}"),
                1 => format!("d{d}/f1"), // a directory named like a file elsewhere
                _ => format!("d{d}/s{s}"),
            };
            for (k, b) in bases.iter().enumerate() {
                if s == 0 && *b == "f1" {
                    continue; // d{d}/f1 is a directory
                }
                all.push((format!("{dir}/{b}"), d * 1000 + s * 100 + k));
            }
        }
    }
    for (path, n) in &all {
        p.file(path, format!("original {n}\nshared line\nline {n}\n"));
    }
    let a = p.snap();
    let mut changed = 0;
    for (i, (path, n)) in all.iter().enumerate() {
        match i % 3 {
            0 | 1 if changed < 800 => {
                p.file(
                    path,
                    format!("original {n}\nmodified line\nline {n}\nextra {n}\n"),
                );
                changed += 1;
            }
            2 if i % 7 == 0 => {
                p.remove(path);
                changed += 1;
            }
            _ => {}
        }
    }
    for i in 0..(1000 - changed) {
        p.file(
            format!("d{}/new{i}/added {i}.txt", i % 10),
            format!("fresh {i}\n"),
        );
    }
    let b = p.snap();
    let names = p.name_only(&a, &b, &[]);
    assert!(names.len() >= 1000, "{} changed files", names.len());
    p.check_now(&a, &b);
    p.fsck();
}

#[test]
fn index_abbreviation_in_a_store_with_many_packed_objects() {
    // git's automatic abbreviation grows with the number of packed objects; rewind must
    // print the same `index` lines. The first snapshot goes into one pack: 8,300 objects.
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    for d in 0..83 {
        let dir = p.join(format!("d{d}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            fs::write(dir.join(format!("f{f}")), format!("object {d} {f}\n")).unwrap();
        }
    }
    let a = p.snap();
    let count = lossy(&p.git(["count-objects", "-v"]));
    eprintln!("{count}");
    p.file("d0/f0", "changed\n")
        .file("d1/new", "new\n")
        .remove("d2/f2");
    let b = p.snap();
    p.check_diff_text(&a, &b);
    p.fsck();
}

// ---------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------

#[test]
fn bad_ids_are_errors_with_codes() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("a.txt", "a\n").file("dir/b.txt", "b\n");
    let a = p.snap();
    p.file("a.txt", "A\n");
    let b = p.snap();

    let objects = lossy(&p.git([
        "cat-file",
        "--batch-all-objects",
        "--batch-check=%(objectname)",
    ]));
    let ids: Vec<&str> = objects.lines().collect();
    // A valid-looking id that names nothing, full and abbreviated.
    let unknown_full = (0..)
        .map(|i: u32| {
            format!("{i:08x}{}", "0123456789abcdef0123456789abcdef")
                .chars()
                .take(40)
                .collect::<String>()
        })
        .find(|c| !ids.contains(&c.as_str()))
        .unwrap();
    let unknown_short = (0..)
        .map(|i: u32| format!("{i:06x}"))
        .find(|c| !ids.iter().any(|id| id.starts_with(c.as_str())))
        .unwrap();
    let blob = p.full_id(&format!("{a}:a.txt"));
    let blob_short = lossy(&p.git(["rev-parse", "--short=7", &blob]))
        .trim()
        .to_string();
    let commit = lossy(&p.git(["commit-tree", &a, "-m", "a commit in the store"]))
        .trim()
        .to_string();
    let commit_short = lossy(&p.git(["rev-parse", "--short=8", &commit]))
        .trim()
        .to_string();

    let cases: Vec<(String, &str)> = vec![
        (unknown_full.clone(), "not_found"),
        (unknown_short.clone(), "not_found"),
        ("zzz".into(), "invalid_id"),
        ("zzzz".into(), "invalid_id"),
        ("abc".into(), "invalid_id"),
        (format!("{a}0"), "invalid_id"), // 41 hex digits
        ("g".repeat(40), "invalid_id"),
        ("HEAD".into(), "invalid_id"),
        (format!("{a}:dir"), "invalid_id"), // revision syntax is not an id
        (format!("{}^{{tree}}", &a[..8]), "invalid_id"),
        (format!("-{}", &a[..8]), "invalid_id"),
        (blob.clone(), "wrong_type"),
        (blob_short.clone(), "wrong_type"),
        (commit.clone(), "wrong_type"),
        (commit_short.clone(), "wrong_type"),
    ];
    for (bad, code) in &cases {
        // clap would read a leading dash as an option: pass it after `--`. (For diff-full,
        // `--` starts its PATHS, as in `git diff`: such an id has no way in, a usage error.)
        let dash = bad.starts_with('-');
        let bad = bad.as_str();
        if dash {
            p.rewind(["diff-full", "--", bad, &b]).assert_code(2);
        }
        let commands: Vec<Vec<&str>> = if dash {
            vec![
                vec!["diff", "--", bad, &b],
                vec!["patch", "--", bad],
                vec!["has-changes", "--", bad],
            ]
        } else {
            vec![
                vec!["diff", bad, &b],
                vec!["diff", &a, bad],
                vec!["diff", bad],
                vec!["diff-full", bad, &b],
                vec!["diff-full", &a, bad],
                vec!["diff-full", bad],
                vec!["patch", bad],
                vec!["has-changes", bad],
            ]
        };
        for args in commands {
            p.assert_error(&args, code, bad);
        }
    }
    p.fsck();
}

#[test]
fn ambiguous_abbreviations_are_reported() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    // ~1,300 objects: several 4-hex prefixes are shared (packed by the first track, loose
    // after the second). Contents are fixed, so the ids are too.
    for i in 0..600 {
        p.file(format!("d{}/f{i}", i % 20), format!("blob {i}\n"));
    }
    let a = p.snap();
    for i in 0..600 {
        if i % 2 == 0 {
            p.file(format!("d{}/f{i}", i % 20), format!("blob {i} changed\n"));
        }
    }
    p.file("x", "x\n");
    let b = p.snap();
    let objects = lossy(&p.git([
        "cat-file",
        "--batch-all-objects",
        "--batch-check=%(objectname) %(objecttype)",
    ]));
    let mut by_prefix: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for line in objects.lines() {
        by_prefix.entry(&line[..4]).or_default().push(line);
    }
    let shared: Vec<(&str, Vec<&str>)> = by_prefix
        .into_iter()
        .filter(|(_, v)| v.len() >= 2)
        .collect();
    assert!(
        !shared.is_empty(),
        "no shared 4-hex prefix among the store's objects"
    );
    // Prefer prefixes shared with a tree (the case a user can hit with a snapshot id).
    let mut picked: Vec<&(&str, Vec<&str>)> = shared
        .iter()
        .filter(|(_, v)| v.iter().any(|l| l.ends_with(" tree")))
        .take(2)
        .collect();
    picked.extend(shared.iter().take(3));
    for (prefix, objs) in picked {
        // git agrees that it is ambiguous.
        let dis = lossy(&p.git(["rev-parse", &format!("--disambiguate={prefix}")]));
        assert!(
            dis.lines().count() >= 2,
            "git --disambiguate={prefix}: {dis}"
        );
        eprintln!("ambiguous prefix {prefix}: {objs:?}");
        for args in [
            vec!["diff", prefix, &b],
            vec!["diff", &a, prefix],
            vec!["diff-full", prefix, &b],
            vec!["diff-full", prefix],
            vec!["patch", prefix],
            vec!["has-changes", prefix],
        ] {
            p.assert_error(&args, "ambiguous_id", prefix);
        }
    }
    // One digit more than git needs is unambiguous again.
    let short = lossy(&p.git(["rev-parse", "--short=4", &a]))
        .trim()
        .to_string();
    let run = p.rewind(["diff", &short, &b]);
    run.assert_success();
    assert_eq!(run.stdout_bytes, p.rewind(["diff", &a, &b]).stdout_bytes);
    p.fsck();
}

/// Known difference (docs/design.md, Line diffs): in files of 35,000+ lines with hundreds of
/// scattered changes, gix-imara-diff's Myers gives up on a minimal script at other points than
/// git's, so numstat counts and hunks differ for about half of such files (17 of 35 measured).
/// Held at the rate this fixed set measures (6 of 8); tighten it when the library comes closer
/// to git.
#[test]
fn large_heavily_edited_files_differ_from_git_at_the_measured_rate() {
    const MEASURED: usize = 6;
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let mut rng = XorShift::seeded(13);
    let files = 8;
    let mut news = Vec::new();
    for f in 0..files {
        let lines = 40_000 + rng.below(20_000) as usize;
        let mut text = code_lines(&mut rng, lines);
        p.file(format!("f{f}"), text.join("\n") + "\n");
        edit_code_lines(&mut rng, &mut text, 1000);
        news.push(text.join("\n") + "\n");
    }
    let a = p.snap();
    for (f, new) in news.iter().enumerate() {
        p.file(format!("f{f}"), new);
    }
    let b = p.snap();
    let full = p.rewind(["diff-full", &a, &b]);
    full.assert_success();
    let rows = parse_rows(&full.stdout);
    let numstat = p.numstat(&a, &b, Ask::default());
    assert_eq!(rows.len(), files);
    assert_eq!(numstat.len(), files);
    let counts_differ = rows
        .iter()
        .zip(&numstat)
        .filter(|(row, n)| {
            (row["additions"].as_u64(), row["deletions"].as_u64()) != (n.additions, n.deletions)
        })
        .count();
    let text = p.rewind(["diff", &a, &b]);
    text.assert_success();
    let split = |t: &[u8]| -> Vec<Vec<u8>> {
        let t = lossy(t);
        t.split("diff --git ")
            .map(|s| s.as_bytes().to_vec())
            .collect()
    };
    let (ours, gits) = (split(&text.stdout_bytes), split(&p.git_diff(&a, &b)));
    assert_eq!(ours.len(), gits.len());
    let text_differs = ours.iter().zip(&gits).filter(|(o, g)| o != g).count();
    eprintln!(
        "{counts_differ} of {files} numstat rows and {text_differs} patches differ from git's"
    );
    assert!(
        counts_differ <= MEASURED && text_differs <= MEASURED,
        "{counts_differ} numstat rows and {text_differs} patches of {files} differ from git's; \
         measured: {MEASURED}"
    );
    p.fsck();
}

/// The real-history half of the line-diff measurement (issue 13, docs/design.md "Line diffs"):
/// every non-merge commit of this repository, fetched into a store, against its parent with
/// `diff` and `diff-full`, each held against git. Ignored because a checkout may be shallow; it
/// fails, never skips, with fewer than 100 commits.
/// `cargo test --test it -- --ignored diff::this_repository_history_diffs_like_git` runs it.
#[test]
#[ignore]
fn this_repository_history_diffs_like_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("a", "a\n");
    p.snap();
    let repo = env!("CARGO_MANIFEST_DIR");
    p.git(["fetch", "--quiet", "--no-tags", repo, "+HEAD:refs/replay"]);
    let commits = lossy(&p.git(["rev-list", "--no-merges", "--parents", "refs/replay"]));
    let mut pairs = 0;
    for line in commits.lines() {
        let [commit, parent] = line.split(' ').collect::<Vec<_>>()[..] else {
            continue; // the root commit
        };
        let from = p.full_id(&format!("{parent}^{{tree}}"));
        let to = p.full_id(&format!("{commit}^{{tree}}"));
        p.check_pair(&from, &to);
        pairs += 1;
    }
    assert!(
        pairs >= 100,
        "only {pairs} commits: is the checkout shallow?"
    );
}

// ---------------------------------------------------------------------------
// Property-style: random edits, every round compared with git
// ---------------------------------------------------------------------------

#[test]
fn random_edits_match_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let mut rng = XorShift::from_time();
    let dirs = ["", "d/", "d/e/", "z z/", "y/"];
    let bases = ["a", "b.txt", "c.rs", "sp ace", "bin", "q\"t", "-x"];
    let paths: Vec<String> = dirs
        .iter()
        .flat_map(|d| bases.iter().map(move |b| format!("{d}{b}")))
        .collect();
    let alphabet = [
        "{",
        "}",
        "",
        "fn f() {",
        "    return 1;",
        "    }",
        "a",
        "b",
        "// c",
        "\tx",
        "é",
    ];
    let gen_lines = |rng: &mut XorShift| -> Vec<String> {
        let n = if rng.below(4) == 0 {
            rng.below(60)
        } else {
            rng.below(14)
        } as usize;
        (0..n)
            .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize].to_string())
            .collect()
    };
    let render = |rng: &mut XorShift, lines: &[String]| -> Vec<u8> {
        let eol = if rng.below(12) == 0 { "\r\n" } else { "\n" };
        let mut s = lines.join(eol);
        if !lines.is_empty() && rng.below(6) != 0 {
            s.push_str(eol);
        }
        let mut v = s.into_bytes();
        if rng.below(12) == 0 {
            v.insert(rng.below(v.len() as u64 + 1) as usize, 0); // binary
        }
        v
    };
    // path -> (lines, exec) for regular files we model; symlinks are tracked separately.
    let mut model: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut links: BTreeMap<String, String> = BTreeMap::new();
    let write = |p: &Proj, rng: &mut XorShift, path: &str, lines: &[String], exec: bool| {
        let bytes = render(rng, lines);
        p.file(path, bytes);
        if exec {
            p.chmod(path, 0o755);
        }
    };
    let is_exec = |p: &Proj, path: &str| -> bool {
        use std::os::unix::fs::PermissionsExt;
        fs::symlink_metadata(p.join(path))
            .map(|m| m.permissions().mode() & 0o100 != 0)
            .unwrap_or(false)
    };
    for path in paths.iter().take(12) {
        let lines = gen_lines(&mut rng);
        write(&p, &mut rng, path, &lines, false);
        model.insert(path.clone(), lines);
    }
    let mut prev = p.snap();
    for round in 0..30 {
        let ops = 1 + rng.below(5);
        let mut log = Vec::new();
        for _ in 0..ops {
            let free: Vec<&String> = paths
                .iter()
                .filter(|x| !model.contains_key(*x) && !links.contains_key(*x))
                .collect();
            let existing: Vec<String> = model.keys().cloned().collect();
            let pick =
                |rng: &mut XorShift, v: &[String]| v[rng.below(v.len() as u64) as usize].clone();
            match rng.below(10) {
                0 | 1 if !free.is_empty() => {
                    let path = free[rng.below(free.len() as u64) as usize].clone();
                    let lines = gen_lines(&mut rng);
                    let exec = rng.below(4) == 0;
                    write(&p, &mut rng, &path, &lines, exec);
                    log.push(format!("add {path:?}"));
                    model.insert(path, lines);
                }
                2..=4 if !existing.is_empty() => {
                    let path = pick(&mut rng, &existing);
                    let mut lines = model[&path].clone();
                    for _ in 0..1 + rng.below(6) {
                        let at = rng.below(lines.len() as u64 + 1) as usize;
                        match rng.below(3) {
                            0 => lines.insert(
                                at,
                                alphabet[rng.below(alphabet.len() as u64) as usize].into(),
                            ),
                            1 if at < lines.len() => {
                                lines.remove(at);
                            }
                            _ if at < lines.len() => {
                                lines[at] =
                                    alphabet[rng.below(alphabet.len() as u64) as usize].into()
                            }
                            _ => {}
                        }
                    }
                    let exec = is_exec(&p, &path);
                    write(&p, &mut rng, &path, &lines, exec);
                    log.push(format!("modify {path:?}"));
                    model.insert(path, lines);
                }
                5 if !existing.is_empty() => {
                    let path = pick(&mut rng, &existing);
                    p.remove(&path);
                    model.remove(&path);
                    log.push(format!("delete {path:?}"));
                }
                6 if !existing.is_empty() => {
                    let path = pick(&mut rng, &existing);
                    let mode = if is_exec(&p, &path) { 0o644 } else { 0o755 };
                    p.chmod(&path, mode);
                    log.push(format!("chmod {mode:o} {path:?}"));
                }
                7 | 8 if !existing.is_empty() && !free.is_empty() => {
                    // rename = delete + add (maybe with an edit)
                    let from = pick(&mut rng, &existing);
                    let to = free[rng.below(free.len() as u64) as usize].clone();
                    let bytes = p.read(&from);
                    let exec = is_exec(&p, &from);
                    p.remove(&from);
                    let mut lines = model.remove(&from).unwrap();
                    if rng.below(2) == 0 {
                        lines.push("renamed".into());
                        write(&p, &mut rng, &to, &lines, exec);
                    } else {
                        p.file(&to, bytes);
                        if exec {
                            p.chmod(&to, 0o755);
                        }
                    }
                    log.push(format!("rename {from:?} -> {to:?}"));
                    model.insert(to, lines);
                }
                9 => {
                    // symlink add/remove/swap
                    if let Some(path) = links.keys().next().cloned().filter(|_| rng.below(2) == 0) {
                        p.remove(&path);
                        links.remove(&path);
                        log.push(format!("unlink {path:?}"));
                    } else if !existing.is_empty() && rng.below(2) == 0 {
                        let path = pick(&mut rng, &existing);
                        p.remove(&path);
                        model.remove(&path);
                        p.symlink(&path, "b.txt");
                        links.insert(path.clone(), "b.txt".into());
                        log.push(format!("file->symlink {path:?}"));
                    } else if let Some(path) = free.first().map(|s| s.to_string()) {
                        p.symlink(&path, "../a");
                        links.insert(path.clone(), "../a".into());
                        log.push(format!("symlink {path:?}"));
                    }
                }
                _ => {}
            }
        }
        let next = p.snap();
        let what = format!("round {round} ({})", log.join(", "));
        eprintln!("{what}");
        p.check_diff_text(&prev, &next);
        let full = p.rewind(["diff-full", &prev, &next]);
        full.assert_success();
        p.check_rows(
            &parse_rows(&full.stdout),
            &prev,
            &next,
            &format!("{what}: diff-full"),
        );
        if round % 10 == 9 {
            p.check_now(&prev, &next);
        }
        prev = next;
    }
    p.fsck();
}

/// A side above 64 MiB is not even counted: `truncated`, 0/0 (the only place where the
/// counts may differ from numstat, by contract).
#[test]
fn huge_file_is_truncated_and_not_counted() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("small", "small\n");
    let a = p.snap();
    let huge = numbered("line", 6_000_000);
    assert!(huge.len() as u64 > 64 << 20);
    p.file("huge", &huge).file("small", "small\nchanged\n");
    let b = p.snap_big(100 << 20);
    let run = p.rewind(["diff-full", &a, &b]);
    run.assert_success();
    let rows = parse_rows(&run.stdout);
    let files: Vec<String> = p
        .numstat(&a, &b, Ask::default())
        .iter()
        .map(|n| lossy(&n.path))
        .collect();
    let got: Vec<&str> = rows.iter().map(|r| r["file"].as_str().unwrap()).collect();
    assert_eq!(got, files);
    let row = rows.iter().find(|r| r["file"] == "huge").unwrap();
    assert_eq!(row["status"], "added", "{row}");
    assert_eq!(row["truncated"], true, "{row}");
    assert_eq!(
        (row["additions"].as_u64(), row["deletions"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(
        (row["before"].as_str(), row["after"].as_str()),
        (Some(""), Some(""))
    );
    p.fsck();
}

// ---------------------------------------------------------------------------
// diff-full: -- PATHS and --max-bytes
// ---------------------------------------------------------------------------

/// `diff-full -- PATHS` gives the rows `git diff -- PATHS` gives (literal pathspecs): files
/// and directories, nested, overlapping, several in any order, none matching, the whole
/// project, absolute or with `..` inside the project; `src2/` and `sr` are not under `src`; a
/// trailing `/` selects only below a directory (not the file `f` that became `f/g`).
#[test]
fn diff_full_paths_select_what_git_diff_paths_selects() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("a.txt", "a\n")
        .file("src/x.rs", "x\n")
        .file("src/sub/y.rs", "y\n")
        .file("src/sub/gone.rs", "gone\n")
        .file("src2/z.rs", "z\n")
        .file("sr", "sr\n")
        .file("docs/readme", "readme\n")
        .file("with space/f", "f\n")
        .file("f", "a file, then a directory\n")
        .file("keep", "unchanged\n");
    let a = p.snap();
    p.file("a.txt", "a\nA\n")
        .file("src/x.rs", "x\nX\n")
        .file("src/sub/y.rs", "Y\n")
        .file("src/sub/new.rs", "new\n")
        .file("src2/z.rs", "z\nZ\n")
        .file("sr", "SR\n")
        .file("docs/readme", "readme\nmore\n")
        .file("with space/f", "F\n")
        .file("added/deep/file", "deep\n")
        .remove("src/sub/gone.rs")
        .remove("f")
        .file("f/g", "below f now\n");
    let b = p.snap();
    let all = p.name_only(&a, &b, &[]).len();
    let cases: &[&[&str]] = &[
        &["src"],
        &["src/sub"],
        &["src/x.rs"],
        &["src/sub/gone.rs"],
        &["docs", "a.txt"],
        &["src", "src/sub", "src/x.rs"],
        &["added"],
        &["with space"],
        &["f"],
        &["f/"],
        &["src/"],
        &["src/x.rs/"],
        &["s"],
        &["nothing-here"],
        &["keep"],
        &["."],
    ];
    for &paths in cases {
        let ask = Ask {
            paths,
            ..Ask::default()
        };
        let rows = p.check_diff_full_asked(&a, &b, ask);
        let got: Vec<&str> = rows.iter().map(|r| r["file"].as_str().unwrap()).collect();
        let names: Vec<String> = p
            .name_only(&a, &b, paths)
            .iter()
            .map(|n| lossy(n))
            .collect();
        assert_eq!(got, names, "diff-full -- {paths:?} vs git diff --name-only");
        // Not vacuous: a directory selects some rows, not all.
        if paths == ["src"] {
            assert!(!got.is_empty() && got.len() < all, "{got:?}");
        }
        // The project now (no `to`): the same rows.
        let mut now = vec!["diff-full", a.as_str(), "--"];
        now.extend(paths);
        let run = p.rewind(&now);
        run.assert_success();
        assert_eq!(parse_rows(&run.stdout), rows, "diff-full A -- {paths:?}");
    }
    // Absolute inside the project, and with `.`/`..` that stay inside: the same as relative.
    let src = p.path.join("src").to_string_lossy().into_owned();
    let want = p.check_diff_full_asked(
        &a,
        &b,
        Ask {
            paths: &["src", "docs"],
            max_bytes: None,
            ..Ask::default()
        },
    );
    let run = p.rewind(["diff-full", &a, &b, "--", &src, "./src/../docs/"]);
    run.assert_success();
    assert_eq!(parse_rows(&run.stdout), want, "absolute and dotted paths");
    // Outside the project: an error naming the path, nothing printed.
    p.assert_error(&["diff-full", &a, &b, "--", "../x"], "bad_path", "../x");
    let outside = sb.root.join("elsewhere").to_string_lossy().into_owned();
    p.assert_error(&["diff-full", &a, &b, "--", &outside], "bad_path", &outside);
    p.fsck();
}

/// `--max-bytes N` bounds the text (before + after, UTF-8 bytes as returned, so U+FFFD counts
/// 3) all rows carry: rows get theirs in git's order while the running total stays at or
/// under N; from the first that would pass it, every row with text is `truncated` and empty,
/// even a later one small enough. Every row is still listed and counted as git counts it.
#[test]
fn diff_full_max_bytes_truncates_exactly_at_the_limit() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("1.txt", "one\n")
        .file("2.lossy", b"bad \xff byte\n")
        .file("3.bin", b"\0binary\n")
        .file("5.txt", numbered("five", 200))
        .file("6.txt", "six\n");
    let a = p.snap();
    p.file("1.txt", "one\nuno\n")
        .file("2.lossy", b"bad \xff\xfe bytes\n")
        .file("3.bin", b"\0binary, changed\n")
        .file("4.empty", "")
        .file("5.txt", numbered("five", 300))
        .file("6.txt", "six\nsechs\n");
    let b = p.snap();
    // The text each row carries when it fits, from git's blobs (0: binary or empty).
    let raw = p.raw(&a, &b, Ask::default());
    let numstat = p.numstat(&a, &b, Ask::default());
    let blobs = p.blobs(
        raw.iter()
            .flat_map(|r| [r.old_id.as_str(), r.new_id.as_str()]),
    );
    let text: Vec<u64> = raw
        .iter()
        .zip(&numstat)
        .map(|(r, n)| {
            let side = |id: &str| lossy(blobs.get(id).map_or(&[][..], |b| &b[..])).len() as u64;
            n.additions.map_or(0, |_| side(&r.old_id) + side(&r.new_id))
        })
        .collect();
    let names: Vec<String> = numstat.iter().map(|n| lossy(&n.path)).collect();
    assert_eq!(
        names,
        ["1.txt", "2.lossy", "3.bin", "4.empty", "5.txt", "6.txt"]
    );
    assert_eq!(text[2..4], [0, 0], "binary and empty rows have no text");
    let total: u64 = text.iter().sum();
    let upto = |n: usize| text[..n].iter().sum::<u64>();
    // Limit -> which rows carry their text (the others with text are truncated).
    let cases = [
        (0, [false, false, false, false, false, false]),
        (upto(1) - 1, [false, false, false, false, false, false]),
        (upto(1), [true, false, false, false, false, false]),
        (upto(2) - 1, [true, false, false, false, false, false]),
        (upto(2), [true, true, false, false, false, false]),
        // 6.txt alone would fit in what is left: still truncated, after 5.txt.
        (upto(5) - 1, [true, true, false, false, false, false]),
        (upto(5), [true, true, false, false, true, false]),
        (total - 1, [true, true, false, false, true, false]),
        (total, [true, true, false, false, true, true]),
    ];
    for (limit, carries) in cases {
        let ask = Ask {
            paths: &[],
            max_bytes: Some(limit),
            ..Ask::default()
        };
        let rows = p.check_diff_full_asked(&a, &b, ask);
        assert_eq!(rows.len(), 6, "every row listed at --max-bytes {limit}");
        for (i, row) in rows.iter().enumerate() {
            let has_text = row["before"] != "" || row["after"] != "";
            assert_eq!(has_text, carries[i], "--max-bytes {limit}: row {i} {row}");
            assert_eq!(
                flag(row, "truncated"),
                text[i] > 0 && !carries[i],
                "--max-bytes {limit}: row {i} {row}"
            );
        }
    }
    // A size with a unit.
    p.check_diff_full_asked(
        &a,
        &b,
        Ask {
            paths: &[],
            max_bytes: Some(1 << 10),
            ..Ask::default()
        },
    );
    let run = p.rewind(["diff-full", &a, &b, "--max-bytes", "1K"]);
    run.assert_success();
    let kib = p.rewind(["diff-full", &a, &b, "--max-bytes", "1024"]);
    assert_eq!(run.stdout, kib.stdout, "1K is 1024 bytes");
    // With paths: the limit counts only the selected rows.
    let ask = Ask {
        paths: &["5.txt", "6.txt"],
        max_bytes: Some(text[4] + text[5]),
        ..Ask::default()
    };
    let rows = p.check_diff_full_asked(&a, &b, ask);
    assert!(rows.iter().all(|r| !flag(r, "truncated")), "{rows:?}");
    p.fsck();
}

/// Bug: `diff-full` of 8 changed 2 MB files was one 31 MB JSON line. Now the text of all rows
/// together stops at 16 MiB by default (`--max-bytes` for another bound); every row is still
/// listed with git's counts.
#[test]
fn diff_full_of_eight_changed_2mb_files_was_one_31mb_line() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let line = "0123456789".repeat(99) + "abcdefghi\n"; // 1,000 bytes
    for i in 0..8 {
        p.file(format!("f{i}.txt"), format!("{i}\n") + &line.repeat(2_000));
    }
    let a = p.snap_big(4 << 20);
    for i in 0..8 {
        p.file(format!("f{i}.txt"), format!("{i}\n") + &line.repeat(2_001));
    }
    let b = p.snap_big(4 << 20);
    let rows = p.check_diff_full(&a, &b);
    assert_eq!(rows.len(), 8);
    let carried = rows.iter().filter(|r| !flag(r, "truncated")).count();
    assert_eq!(carried, 4, "4 rows of 4 MB fit in 16 MiB");
    // The output: the text plus one escape per newline plus the rows' keys.
    let run = p.rewind(["diff-full", &a, &b]);
    run.assert_success();
    let bound = TOTAL_LIMIT + TOTAL_LIMIT / 1000 + 8 * 256;
    assert!(
        (run.stdout.len() as u64) < bound,
        "diff-full printed {} bytes, over {bound}",
        run.stdout.len()
    );
    // A smaller bound: one row's text.
    let ask = Ask {
        paths: &[],
        max_bytes: Some(5 << 20),
        ..Ask::default()
    };
    let rows = p.check_diff_full_asked(&a, &b, ask);
    assert_eq!(rows.iter().filter(|r| !flag(r, "truncated")).count(), 1);
    p.fsck();
}

/// The tree diff decodes only the entries two trees do not share byte for byte: a tree with a
/// malformed entry (written by git with `--literally`) is still an error naming it, whether
/// the entry is cut short or holds what is no mode, and never a diff that looks complete.
#[test]
fn a_malformed_tree_entry_is_an_error_naming_its_tree() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("d/a", "a\n").file("d/f", "f\n").file("g", "g\n");
    let good = p.snap();
    let raw_id = |spec: &str| {
        let hex = p.full_id(spec);
        (0..40)
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    let literal_tree = |name: &str, data: &[u8]| {
        let file = sb.root.join(name);
        fs::write(&file, data).unwrap();
        let out = p.git([
            OsStr::new("hash-object"),
            OsStr::new("--literally"),
            OsStr::new("-t"),
            OsStr::new("tree"),
            OsStr::new("-w"),
            file.as_os_str(),
        ]);
        lossy(&out).trim().to_string()
    };
    let entry = |mode: &str, name: &str, id: &[u8]| {
        let mut entry = format!("{mode} {name}\0").into_bytes();
        entry.extend_from_slice(id);
        entry
    };
    let (a, f, g) = (
        raw_id(&format!("{good}:d/a")),
        raw_id(&format!("{good}:d/f")),
        raw_id(&format!("{good}:g")),
    );
    let cases: [(&str, Vec<u8>); 2] = [
        // `d/a` as in the good tree, then `f` with its id cut short.
        (
            "cut short",
            [entry("100644", "a", &a), entry("100644", "f", &f[..7])].concat(),
        ),
        // `d/a` as in the good tree, then an entry whose mode is not octal.
        (
            "no mode",
            [entry("100644", "a", &a), entry("10x644", "f", &f)].concat(),
        ),
    ];
    for (what, data) in cases {
        let bad_dir = literal_tree(what, &data);
        let root = [
            entry("40000", "d", &raw_id(&bad_dir)),
            entry("100644", "g", &g),
        ]
        .concat();
        let bad = literal_tree(&format!("{what} root"), &root);
        for args in [
            vec!["diff", good.as_str(), bad.as_str()],
            vec!["diff", bad.as_str(), good.as_str()],
            vec!["patch", bad.as_str()],
        ] {
            p.assert_error(&args, "object", &bad_dir);
        }
    }
}
