//! Which paths a snapshot leaves out: git's ignore rules, and the project's own tracked files.
//!
//! Precedence is git's: the deepest `.gitignore` first, then `.gitignore` files above it up to the
//! enclosing repository's root, then that repository's `info/exclude`, then the `core.excludesFile`
//! of git's config (read by gix, includes followed, the repository's own config last). Within one
//! file the last matching line wins; a `!` line re-includes.
//! A file that the project's own git index tracks is never left out for being ignored.
//!
//! Inside a nested repository the rules start again, as `git -C nested add -A` sees them: its own
//! `.gitignore` files, its `$GIT_DIR/info/exclude`, then the user's excludes file; the rules of
//! the project around it do not apply there.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use gix::bstr::{BStr, BString, ByteSlice, ByteVec};
use gix::glob::pattern::Case;
use gix::glob::search::pattern::List;
use gix::ignore::search::{pattern_matching_relative_path, Ignore};

use crate::fs::{DirRef, CWD};

/// The enclosing git repository of a project, if any.
struct ProjectRepo {
    /// The project's path relative to the repository's work tree root, `/`-terminated, or empty.
    prefix: BString,
    /// The repository's index file (read only, never written).
    index_path: PathBuf,
}

/// Rules that hold for the whole walk (or, for a nested repository, below its root): those from
/// outside the project, and the tracked set.
pub(crate) struct Excludes {
    /// The project directory these rules hold below: empty for the project, else the path of a
    /// nested repository.
    root: BString,
    /// The user's excludes file: the lowest priority.
    global: Option<Arc<List<Ignore>>>,
    /// `info/exclude`, then `.gitignore` files above the project: lowest priority first.
    /// Matched with paths relative to the enclosing repository's root (below `root`).
    outer: Vec<List<Ignore>>,
    repo: Option<ProjectRepo>,
    /// Paths (project-relative, sorted) that the project's own index tracks; read on first need.
    tracked: OnceLock<Vec<BString>>,
    /// Everything these rules were made from (each file's path and bytes, the index's stat):
    /// equal fingerprints, equal rules.
    fingerprint: Vec<u8>,
    /// The rules alone, as [`note_rules`] writes them: what [`Self::rules_digest`] hashes.
    rules: Vec<u8>,
    /// The user's excludes file's part of `rules` (a nested repository's rules hold it too).
    global_rules: Arc<[u8]>,
    /// [`Self::rules_digest`], once made.
    digest: OnceLock<String>,
}

/// Add `part` to a fingerprint, length first (so no two sequences of parts run together).
fn note(fingerprint: &mut Vec<u8>, part: &[u8]) {
    fingerprint.extend_from_slice(&(part.len() as u64).to_le_bytes());
    fingerprint.extend_from_slice(part);
}

/// Add to `rules` the rules of one file of kind `kind`, which apply below `base`: its lines
/// that hold a pattern. A file of comments and blank lines adds nothing, as none at all (a
/// `git init` writes such an `info/exclude`), and neither does where the file is.
fn note_rules(rules: &mut Vec<u8>, kind: &[u8], base: &[u8], bytes: &[u8]) {
    let patterns: Vec<&[u8]> = bytes
        .lines()
        .filter(|line| !line.trim_ascii().is_empty() && !line.starts_with(b"#"))
        .collect();
    if patterns.is_empty() {
        return;
    }
    note(rules, kind);
    note(rules, base);
    note(rules, &(patterns.len() as u64).to_le_bytes());
    for pattern in patterns {
        note(rules, pattern);
    }
}

/// Where the rule that ignores a path comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rules {
    /// A `.gitignore` inside the project (a snapshot holds it).
    Project,
    /// The global excludes, `info/exclude`, or a `.gitignore` above the project.
    Outside,
}

/// The `.gitignore` rules of one directory inside the project, chained to its parent's.
pub(crate) struct DirRules {
    list: Option<List<Ignore>>,
    parent: Option<Arc<DirRules>>,
}

impl DirRules {
    /// The rules of the project root, before its own `.gitignore` is read.
    pub(crate) fn root() -> Arc<DirRules> {
        Arc::new(DirRules {
            list: None,
            parent: None,
        })
    }

    /// Chain the `.gitignore` of project directory `dir_rel` (open as `dir`; `source` names the
    /// file in messages) below `parent`, and return its bytes. An unreadable `.gitignore` is
    /// treated as empty, as git does.
    pub(crate) fn child(
        parent: &Arc<DirRules>,
        dir: DirRef<'_>,
        source: &Path,
        dir_rel: &BStr,
    ) -> (Arc<DirRules>, Option<Vec<u8>>) {
        match read_small(dir, ".gitignore".as_ref(), false) {
            Ok(bytes) => {
                let rules = Arc::new(DirRules {
                    list: Some(list_from_bytes(&bytes, source, dir_rel)),
                    parent: Some(parent.clone()),
                });
                (rules, Some(bytes))
            }
            Err(_) => (parent.clone(), None),
        }
    }

    /// Chain the rules in `bytes` (a `.gitignore` blob of directory `dir_rel`) below `parent`.
    pub(crate) fn from_bytes(
        parent: &Arc<DirRules>,
        bytes: &[u8],
        dir_rel: &BStr,
    ) -> Arc<DirRules> {
        let source = Path::new(".gitignore");
        Arc::new(DirRules {
            list: Some(list_from_bytes(bytes, source, dir_rel)),
            parent: Some(parent.clone()),
        })
    }
}

/// Unchain the parents one at a time: a chain as deep as the project must not be dropped by
/// recursion on the thread stack. Costs one step per parent this was the last owner of.
impl Drop for DirRules {
    fn drop(&mut self) {
        let mut next = self.parent.take();
        while let Some(parent) = next {
            next = Arc::into_inner(parent).and_then(|mut rules| rules.parent.take());
        }
    }
}

/// Parse ignore rules from `bytes` that apply below `base` (a `/`-separated relative directory).
fn list_from_bytes(bytes: &[u8], source: &Path, base: &BStr) -> List<Ignore> {
    let patterns = gix::glob::search::Pattern::bytes_to_patterns(&Ignore::default(), bytes, source);
    List {
        patterns,
        source: Some(source.to_owned()),
        base: (!base.is_empty()).then(|| {
            let mut base = BString::from(base);
            base.push_byte(b'/');
            base
        }),
    }
}

impl Excludes {
    /// Collect the rules from outside the project at the canonical `project` directory. Costs
    /// the repository discovery, the git config files, and one read per rules file.
    pub(crate) fn load(project: &Path) -> Excludes {
        let found = enclosing_repo(project);
        let global = match &found {
            // A relative path is relative to the work tree's root, where git runs.
            Some((repo, work_tree)) => {
                excludes_file(&repo.config_snapshot()).map(|file| work_tree.join(file))
            }
            None => gix::config(None, &config_options(plain_config(&[])))
                .inspect_err(|e| tracing::warn!(error = %e, "git config unreadable"))
                .ok()
                .and_then(|config| excludes_file(&config))
                .map(|file| project.join(file)),
        };
        let (mut fingerprint, mut rules) = (Vec::new(), Vec::new());
        let global = global.and_then(|file| {
            let bytes = read_small(CWD, &file, true).ok()?;
            note(&mut fingerprint, file.as_os_str().as_encoded_bytes());
            note(&mut fingerprint, &bytes);
            note_rules(&mut rules, b"global", b"", &bytes);
            Some(Arc::new(list_from_bytes(&bytes, &file, BStr::new(""))))
        });
        let global_rules: Arc<[u8]> = rules.as_slice().into();
        let mut outer = Vec::new();
        let repo = found.map(|(repo, work_tree)| {
            note(&mut fingerprint, work_tree.as_os_str().as_encoded_bytes());
            let exclude = repo.common_dir().join("info/exclude");
            if let Ok(bytes) = read_small(CWD, &exclude, true) {
                note(&mut fingerprint, exclude.as_os_str().as_encoded_bytes());
                note(&mut fingerprint, &bytes);
                note_rules(&mut rules, b"exclude", b"", &bytes);
                outer.push(list_from_bytes(&bytes, &exclude, BStr::new("")));
            }
            let relative = project.strip_prefix(&work_tree).unwrap_or(Path::new(""));
            // `.gitignore` files of the directories between the repository root and the project.
            let mut dir = work_tree.clone();
            let mut dir_rel = BString::default();
            for component in relative.components() {
                push_rules(
                    &mut outer,
                    &dir,
                    dir_rel.as_ref(),
                    (&mut fingerprint, &mut rules),
                );
                dir.push(component);
                if !dir_rel.is_empty() {
                    dir_rel.push_byte(b'/');
                }
                dir_rel.push_str(component.as_os_str().as_encoded_bytes());
            }
            let mut prefix = dir_rel;
            if !prefix.is_empty() {
                prefix.push_byte(b'/');
            }
            let index_path = repo.index_path();
            note(&mut fingerprint, &prefix);
            note(&mut fingerprint, &crate::fs::stat_path(&index_path));
            ProjectRepo { prefix, index_path }
        });
        // (Where the project stands in its repository matters to rules there are.)
        if !rules.is_empty() {
            note(
                &mut rules,
                repo.as_ref().map_or(&[][..], |r| r.prefix.as_slice()),
            );
        }
        Excludes {
            root: BString::default(),
            global,
            outer,
            repo,
            tracked: OnceLock::new(),
            fingerprint,
            rules,
            global_rules,
            digest: OnceLock::new(),
        }
    }

    /// Everything these rules were made from: equal fingerprints, equal rules.
    pub(crate) fn fingerprint(&self) -> &[u8] {
        &self.fingerprint
    }

    /// A digest of the rules alone (not the index's stat), in hex: a snapshot records it, so
    /// that a restore knows whether the rules it would judge the snapshot's sight by are the
    /// ones it was taken under. Costs a hash of the rules files' bytes, once.
    pub(crate) fn rules_digest(&self) -> &str {
        self.digest.get_or_init(|| {
            let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
            hasher.update(&self.rules);
            match hasher.try_finalize() {
                Ok(id) => id.to_hex().to_string(),
                Err(_) => String::new(),
            }
        })
    }

    /// The rules below the nested repository at project path `root`, whose directory is `base`
    /// below `dir` (`""` when `dir` is the repository's own directory): the user's excludes file
    /// and the repository's `info/exclude`, found through its `.git` (a `gitdir:` file is followed
    /// only to read that, and a `commondir` in the git dir, as git does). Nothing else of the
    /// repository is read, so the files its index tracks are not known. Costs a few small reads.
    pub(crate) fn nested(&self, root: &BStr, dir: DirRef<'_>, base: &Path) -> Excludes {
        let (_, common) = git_dirs(dir, base);
        let exclude = common.join("info/exclude");
        let mut fingerprint = Vec::new();
        let mut rules = self.global_rules.to_vec();
        note(&mut fingerprint, exclude.as_os_str().as_encoded_bytes());
        let outer = read_small(dir, &exclude, true)
            .map(|bytes| {
                note(&mut fingerprint, &bytes);
                note_rules(&mut rules, b"exclude", b"", &bytes);
                list_from_bytes(&bytes, &exclude, BStr::new(""))
            })
            .into_iter()
            .collect();
        Excludes {
            root: root.into(),
            global: self.global.clone(),
            outer,
            repo: None,
            tracked: OnceLock::new(),
            fingerprint,
            rules,
            global_rules: self.global_rules.clone(),
            digest: OnceLock::new(),
        }
    }

    /// Whether the `.git` in directory `base` below `dir` makes it a repository, as git decides
    /// before it leaves a directory out of `git add`: its git dir (the `.git` directory, or the
    /// target of a `gitdir:` file) holds a `HEAD` naming a ref or a commit. A `.git` of garbage,
    /// a link to nowhere or an empty `.git/` does not (git adds such a directory's files, under
    /// the project's rules). Costs a few small reads.
    pub(crate) fn is_repository(dir: DirRef<'_>, base: &Path) -> bool {
        let (git_dir, _) = git_dirs(dir, base);
        read_small(dir, &git_dir.join("HEAD"), true).is_ok_and(|head| {
            let head = head.trim();
            head.starts_with(b"ref: refs/")
                || (head.len() >= 40 && head.iter().all(u8::is_ascii_hexdigit))
        })
    }

    /// Whether `rel` (project-relative) is ignored by the rules in `dir` and above.
    pub(crate) fn is_ignored(&self, dir: &DirRules, rel: &BStr, is_dir: bool) -> bool {
        self.ignored_by(dir, rel, is_dir).is_some()
    }

    /// Which rules ignore `rel` (project-relative), if any: the `.gitignore` files in `dir` and
    /// above inside the project, or the rules from outside it (which no snapshot holds, so a
    /// snapshot records what they hid). Costs one pattern match per rule list until one matches.
    pub(crate) fn ignored_by(&self, dir: &DirRules, rel: &BStr, is_dir: bool) -> Option<Rules> {
        let matching = |list: &List<Ignore>, path: &BStr| {
            let basename = path.rfind_byte(b'/').map(|pos| pos + 1);
            pattern_matching_relative_path(list, path, basename, Some(is_dir), Case::Sensitive)
                .map(|m| !m.pattern.is_negative())
        };
        let mut node = Some(dir);
        while let Some(rules) = node {
            if let Some(ignored) = rules.list.as_ref().and_then(|list| matching(list, rel)) {
                return ignored.then_some(Rules::Project);
            }
            node = rules.parent.as_deref();
        }
        if self.outer.is_empty() && self.global.is_none() {
            return None;
        }
        let below_root = match self.root.is_empty() {
            true => rel,
            false => rel.get(self.root.len() + 1..).unwrap_or_default().as_bstr(),
        };
        let full: BString;
        let path = match &self.repo {
            Some(repo) if !repo.prefix.is_empty() => {
                full = [repo.prefix.as_slice(), below_root.as_bytes()]
                    .concat()
                    .into();
                full.as_ref()
            }
            _ => below_root,
        };
        self.outer
            .iter()
            .rev()
            .chain(self.global.as_deref())
            .find_map(|list| matching(list, path))
            .and_then(|ignored| ignored.then_some(Rules::Outside))
    }

    /// Whether the project's own git index tracks the file `rel`.
    pub(crate) fn is_tracked(&self, rel: &BStr) -> bool {
        self.tracked()
            .binary_search_by(|p| p.as_bstr().cmp(rel))
            .is_ok()
    }

    /// Whether the project's own git index tracks any file below directory `rel`.
    pub(crate) fn tracks_below(&self, rel: &BStr) -> bool {
        let mut prefix = BString::from(rel);
        prefix.push_byte(b'/');
        let tracked = self.tracked();
        let start = tracked.partition_point(|p| p.as_bstr() < prefix.as_bstr());
        tracked
            .get(start)
            .is_some_and(|p| p.starts_with(prefix.as_slice()))
    }

    fn tracked(&self) -> &[BString] {
        self.tracked.get_or_init(|| {
            let Some(repo) = &self.repo else {
                return Vec::new();
            };
            // A missing or unreadable index tracks nothing (a fresh `git init`).
            let Ok(index) = gix::index::File::at(
                &repo.index_path,
                gix::hash::Kind::Sha1,
                true,
                Default::default(),
            ) else {
                return Vec::new();
            };
            let mut paths: Vec<BString> = index
                .entries()
                .iter()
                .filter_map(|entry| {
                    let path = entry.path(&index);
                    path.strip_prefix(repo.prefix.as_slice()).map(BString::from)
                })
                .collect();
            paths.dedup(); // conflict stages repeat a path
            paths
        })
    }
}

/// The most [`read_small`] reads of a file.
const SMALL_FILE_CAP: usize = 64 << 20;

/// Read a rules or repository file (at most [`SMALL_FILE_CAP`] bytes) only if it is a regular
/// file: a FIFO or a device standing in its place would block or never end.
fn read_small(dir: DirRef<'_>, path: &Path, follow: bool) -> std::io::Result<Vec<u8>> {
    let file = crate::fs::open_regular(dir, path, follow)?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, SMALL_FILE_CAP as u64),
        &mut bytes,
    )?;
    Ok(bytes)
}

/// Add the `.gitignore` of `dir` (relative `dir_rel`) to `lists` if it is a regular file, and
/// to `fingerprint`.
fn push_rules(
    lists: &mut Vec<List<Ignore>>,
    dir: &Path,
    dir_rel: &BStr,
    (fingerprint, rules): (&mut Vec<u8>, &mut Vec<u8>),
) {
    let file = dir.join(".gitignore");
    if fs::symlink_metadata(&file).is_ok_and(|m| m.is_file()) {
        if let Ok(bytes) = read_small(CWD, &file, false) {
            note(fingerprint, file.as_os_str().as_encoded_bytes());
            note(fingerprint, &bytes);
            note_rules(rules, b"above", dir_rel, &bytes);
            lists.push(list_from_bytes(&bytes, &file, dir_rel));
        }
    }
}

/// How the enclosing repository and the user's config are read: git's config files (system,
/// `$XDG_CONFIG_HOME/git/config`, `~/.gitconfig`, the repository's own) with `include` and
/// `includeIf` followed, HOME and XDG_CONFIG_HOME honoured, every other environment variable
/// (GIT_DIR, GIT_CONFIG_*, ...) ignored. Without `plain` (see [`config_files_are_plain`]),
/// only the repository's own file, without its includes.
fn config_options(plain: bool) -> gix::open::Options {
    let mut permissions = gix::open::Permissions::isolated();
    permissions.config = gix::open::permissions::Config {
        system: plain,
        git: plain,
        user: plain,
        includes: plain,
        ..permissions.config
    };
    permissions.env.home = gix::sec::Permission::Allow;
    permissions.env.xdg_config_home = gix::sec::Permission::Allow;
    gix::open::Options::isolated().permissions(permissions)
}

/// Whether the config files [`config_options`] has gix read (the system's, the user's two, and
/// `repo_files`), and every file they include however deep, are regular files of at most 64
/// MiB, or absent: gix opens them by path and reads them whole, so a FIFO there (`~/.gitconfig`
/// made one) would block `track` for ever, holding the store's lock, and a link to `/dev/zero`
/// would read until memory runs out. (One swapped in between this look and gix's read is not
/// seen.) Costs a read and a parse of each.
fn config_files_are_plain(repo_files: &[PathBuf]) -> bool {
    use gix::config::Source;
    let env = |name: &str| match name {
        "HOME" | "XDG_CONFIG_HOME" => std::env::var_os(name),
        _ => None,
    };
    let home = gix::path::env::home_dir();
    let mut pending: Vec<(PathBuf, usize)> = [Source::System, Source::Git, Source::User]
        .into_iter()
        .filter_map(|source| source.storage_location(&mut { env }))
        .chain(repo_files.iter().cloned())
        .map(|path| (path, 0))
        .collect();
    while let Some((path, depth)) = pending.pop() {
        let bytes = match read_small(CWD, &path, true) {
            // (At the cap, it may go on: gix would read it all.)
            Ok(bytes) if bytes.len() == SMALL_FILE_CAP => return false,
            Ok(bytes) => bytes,
            // A FIFO, a device or a socket; else absent, unreadable or a directory, which
            // gix fails on at once.
            Err(_) => match fs::metadata(&path) {
                Ok(meta) if !meta.is_file() && !meta.is_dir() => return false,
                _ => continue,
            },
        };
        // gix follows includes ten deep; what it would not read is not looked at.
        if depth == 10 {
            continue;
        }
        let meta = gix::config::file::Metadata::from(Source::Api);
        let Ok(config) =
            gix::config::File::from_bytes_no_includes(&bytes, meta, Default::default())
        else {
            continue; // gix fails on it too, and reads no include of it
        };
        let base = path.parent().unwrap_or(Path::new("")).to_owned();
        let included = config
            .sections()
            .filter(|section| {
                let name = section.header().name();
                name.eq_ignore_ascii_case(b"include") || name.eq_ignore_ascii_case(b"includeIf")
            })
            .flat_map(|section| section.values("path"))
            .filter_map(|value| {
                let context = gix::config::path::interpolate::Context {
                    git_install_dir: None,
                    home_dir: home.as_deref(),
                    home_for_user: Some(gix::config::path::interpolate::home_for_user),
                };
                gix::config::Path::from(value)
                    .interpolate(context)
                    .ok()
                    .map(|p| base.join(p))
            });
        pending.extend(included.map(|path| (path, depth + 1)));
    }
    true
}

/// [`config_files_are_plain`], told when not.
fn plain_config(repo_files: &[PathBuf]) -> bool {
    let plain = config_files_are_plain(repo_files);
    if !plain {
        tracing::warn!("a git config file (or one it includes) is a FIFO, a device or over 64 MiB: only the repository's own config is read, without its includes");
    }
    plain
}

/// The git repository whose work tree holds `project` (the project itself or an ancestor), found
/// as git finds it: a `.git` directory or file (linked worktrees, submodules) that holds a valid
/// repository, without crossing into another file system. Costs a stat per ancestor, then the
/// repository's config files.
fn enclosing_repo(project: &Path) -> Option<(gix::Repository, PathBuf)> {
    if let Some(dot_git) = project
        .ancestors()
        .map(|dir| dir.join(".git"))
        .find(|dot_git| fs::symlink_metadata(dot_git).is_ok() && !git_files_are_plain(dot_git))
    {
        tracing::warn!(repo = %dot_git.display(), "a repository file is a FIFO or a device; its ignore rules are not applied");
        return None;
    }
    let discovery = gix::discover::upwards::Options {
        current_dir: Some(project),
        ..Default::default()
    };
    let (path, trust) = gix::discover::upwards_opts(project, discovery).ok()?;
    let (git_dir, found_work_tree) = path.into_repository_and_work_tree_directories();
    let own = [
        common_dir(CWD, &git_dir).join("config"),
        git_dir.join("config.worktree"),
    ];
    let mut repo = gix::open_opts(&git_dir, config_options(plain_config(&own)).with(trust))
        .inspect_err(|e| {
            tracing::warn!(repo = %git_dir.display(), error = %e, "enclosing repository unreadable; its ignore rules are not applied");
        })
        .ok()?;
    // A git dir kept elsewhere (`git init --separate-git-dir`, no `core.worktree`) names no
    // work tree of its own: the one discovery found is it.
    if repo.workdir().is_none() {
        repo.set_workdir(found_work_tree).ok()?;
    }
    // A bare repository, or a `core.worktree` elsewhere, holds no files of the project.
    let work_tree = fs::canonicalize(repo.workdir()?).ok()?;
    project.starts_with(&work_tree).then_some((repo, work_tree))
}

/// Whether the files gix reads to find and open the repository at `dot_git` (a `.git`
/// directory, or a `.git` file naming the git dir) are directories and regular files where they
/// exist: gix opens them by path, so a FIFO there would block `track` for ever and a link to a
/// device would read without end. Costs a few `stat`s (and two small reads for a `.git` file
/// and a `commondir`).
fn git_files_are_plain(dot_git: &Path) -> bool {
    let plain_or_absent = |path: &Path| match fs::metadata(path) {
        Ok(meta) => meta.is_file() || meta.is_dir(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    };
    let Ok(meta) = fs::metadata(dot_git) else {
        return fs::symlink_metadata(dot_git).is_ok_and(|m| m.is_symlink()); // a dangling link
    };
    let git_dir = match (meta.is_dir(), meta.is_file()) {
        (true, _) => dot_git.to_owned(),
        (_, true) => match read_small(CWD, dot_git, true) {
            Ok(content) => match content
                .strip_prefix(b"gitdir:")
                .and_then(|target| gix::path::from_byte_slice(target.trim()).ok())
            {
                Some(target) => dot_git.parent().unwrap_or(dot_git).join(target),
                None => return true, // not a repository: gix passes it over
            },
            Err(_) => return true,
        },
        _ => return false,
    };
    let files = ["HEAD", "commondir", "config", "config.worktree", "gitdir"];
    if !files
        .iter()
        .all(|name| plain_or_absent(&git_dir.join(name)))
    {
        return false;
    }
    match read_small(CWD, &git_dir.join("commondir"), true) {
        Ok(common) => match gix::path::from_byte_slice(common.trim()) {
            Ok(common) => ["HEAD", "config"]
                .iter()
                .all(|name| plain_or_absent(&git_dir.join(common).join(name))),
            Err(_) => true,
        },
        Err(_) => true,
    }
}

/// The user's excludes file as git picks it from `config`: `core.excludesFile` from a trusted
/// section (`~` expanded), else `$XDG_CONFIG_HOME/git/ignore` (or `~/.config/git/ignore`).
fn excludes_file(config: &gix::config::File) -> Option<PathBuf> {
    let home = gix::path::env::home_dir();
    match config.path_filter("core.excludesFile", gix::config::section::is_trusted) {
        Some(path) => path
            .interpolate(gix::config::path::interpolate::Context {
                git_install_dir: None,
                home_dir: home.as_deref(),
                home_for_user: Some(gix::config::path::interpolate::home_for_user),
            })
            .ok(),
        None => gix::path::env::xdg_config("ignore", &mut |name| {
            std::env::var_os(name).filter(|value| !value.is_empty())
        }),
    }
}

/// The git dir and the common dir of the repository whose `.git` is in `base` below `dir`: a
/// `gitdir:` file is followed (only to read), and a `commondir` in the git dir, as git does.
/// Costs two small reads.
fn git_dirs(dir: DirRef<'_>, base: &Path) -> (PathBuf, PathBuf) {
    let dot_git = base.join(".git");
    let git_dir = match read_small(dir, &dot_git, true) {
        Ok(content) => match content
            .strip_prefix(b"gitdir:")
            .and_then(|target| gix::path::from_byte_slice(target.trim()).ok())
        {
            Some(target) => base.join(target),
            None => dot_git, // not a repository's link
        },
        Err(_) => dot_git,
    };
    let common = common_dir(dir, &git_dir);
    (git_dir, common)
}

/// The common dir of the repository whose git dir is `git_dir` (in `dir`): the one its
/// `commondir` file names (a linked worktree's), else the git dir itself. Costs a small read.
fn common_dir(dir: DirRef<'_>, git_dir: &Path) -> PathBuf {
    let named = read_small(dir, &git_dir.join("commondir"), true).ok();
    named
        .and_then(|common| {
            gix::path::from_byte_slice(common.trim())
                .ok()
                .map(|c| git_dir.join(c))
        })
        .unwrap_or_else(|| git_dir.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deeper `.gitignore` wins over the ones above it, a `!` line re-includes, an anchored
    /// rule holds only in its own directory, a `dir/` rule only for directories, and rules from
    /// outside the project lose to the project's own: the paths ignored are those
    /// `git check-ignore` names for the same files.
    #[test]
    fn chained_rules_ignore_what_git_check_ignore_ignores() {
        let root_rules = b"*.log\n!keep.log\nout/\n/local\n*.tmp\n";
        let sub_rules = b"!*.log\n/local\n!x.tmp\n";
        let outer_rules = b"*.bak\nx.tmp\n";
        let root = DirRules::from_bytes(&DirRules::root(), root_rules, "".into());
        let sub = DirRules::from_bytes(&root, sub_rules, "sub".into());
        let excludes = Excludes {
            root: BString::default(),
            global: None,
            outer: vec![list_from_bytes(
                outer_rules,
                Path::new("exclude"),
                "".into(),
            )],
            repo: None,
            tracked: OnceLock::new(),
            fingerprint: Vec::new(),
            rules: Vec::new(),
            global_rules: Arc::from(&[][..]),
            digest: OnceLock::new(),
        };
        // (path, whether it is a directory); paths below `sub` take its chained rules.
        let cases = [
            ("a.log", false),
            ("keep.log", false),
            ("out", true),
            ("local", false),
            ("a.tmp", false),
            ("a.bak", false),
            ("sub/a.log", false),
            ("sub/deep/b.log", false),
            ("sub/local", false),
            ("sub/deep/local", false),
            ("sub/out", false),
            ("sub/x.tmp", false),
            ("sub/y.tmp", false),
            ("sub/z.bak", false),
        ];
        let ours: Vec<&str> = cases
            .iter()
            .filter(|(path, is_dir)| {
                let rules = if path.starts_with("sub/") {
                    &sub
                } else {
                    &root
                };
                excludes.is_ignored(rules, (*path).into(), *is_dir)
            })
            .map(|(path, _)| *path)
            .collect();
        assert_eq!(
            excludes.ignored_by(&root, "a.log".into(), false),
            Some(Rules::Project)
        );
        assert_eq!(
            excludes.ignored_by(&sub, "sub/z.bak".into(), false),
            Some(Rules::Outside)
        );

        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        let git = |args: &[&str]| crate::testing::git(repo, args, b"");
        assert!(git(&["init", "-q"]).status.success());
        fs::write(repo.join(".gitignore"), root_rules).unwrap();
        fs::create_dir_all(repo.join("sub/deep")).unwrap();
        fs::write(repo.join("sub/.gitignore"), sub_rules).unwrap();
        fs::write(repo.join(".git/info/exclude"), outer_rules).unwrap();
        for (path, is_dir) in cases {
            if is_dir {
                fs::create_dir_all(repo.join(path)).unwrap();
            } else {
                fs::write(repo.join(path), "x\n").unwrap();
            }
        }
        let mut args = vec!["check-ignore", "--"];
        args.extend(cases.iter().map(|(path, _)| *path));
        let out = git(&args);
        let gits: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
        assert_eq!(ours, gits);
    }
}
