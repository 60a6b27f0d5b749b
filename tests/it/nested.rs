//! Nested repositories and multi-repo workspaces (issue 14, part 4): under the default
//! `rewind.nestedRepos = include`, a snapshot holds a nested repository's working files as
//! `git -C nested add -A` sees them (its own `.gitignore` files and `info/exclude`, not the
//! project's rules), never its `.git`; under `skip` it is left out, as before.

use std::fs;
use std::path::Path;

use crate::common::*;

/// `rewind -C <project> --json ARGS`: must succeed.
fn rwj(p: &TestProject, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let run = run_with_deadline(&mut p.rewind_command(&all), DEFAULT_DEADLINE);
    assert_no_panic(&run);
    run.assert_success();
    one_json(&run)
}

fn turn(p: &TestProject, verb: &str, turn: &str) -> Value {
    rwj(p, &["turn", verb, "--session=s", &format!("--turn={turn}")])
}

/// The id of `path` in snapshot `tree` of the store (`None`: not there).
fn subtree(p: &TestProject, tree: &str, path: &str) -> Option<String> {
    let spec = format!("{tree}:{path}");
    let run =
        p.sb.git_in_run(&p.store(), ["rev-parse", "-q", "--verify", &spec]);
    run.status.success().then(|| run.stdout.trim().to_string())
}

/// `git ls-tree` of `path` in snapshot `tree`, without the entry named `leave`.
fn top_level(p: &TestProject, tree: &str, path: &str, leave: &str) -> String {
    let listing = p.store_git(["ls-tree", &format!("{tree}:{path}")]);
    without(&listing, leave)
}

/// `listing` (of `git ls-tree`) without the entry named `name`.
fn without(listing: &str, name: &str) -> String {
    listing
        .lines()
        .filter(|line| line.split('\t').nth(1) != Some(name))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The snapshot record of `tree`: its commit message.
fn record(p: &TestProject, tree: &str) -> String {
    p.store_git([
        "log",
        "-1",
        "--format=%B",
        &format!("refs/rewind/snapshots/{tree}"),
    ])
}

/// The workspace: a plain folder whose `.gitignore` ignores `*.log` and `build/`, holding
/// `api` (a repository with its own ignore rules and `info/exclude`), `api-wt` (a linked
/// worktree of it) and `web` (a repository
/// with a submodule `lib`, added with `git submodule add` from a local path, with rules of its
/// own in its `.gitignore` and in `web/.git/modules/lib/info/exclude`).
fn workspace(sb: &Sandbox) -> TestProject<'_> {
    let upstream = sb.project("upstream");
    upstream.git_init();
    upstream
        .file(".gitignore", "dist/\n")
        .file("lib.c", "int lib;\n")
        .file("lib.h", "int lib(void);\n")
        .commit_all("lib");

    let ws = sb.project("ws");
    ws.file(".gitignore", "*.log\nbuild/\n")
        .file("top.txt", "workspace notes\n")
        .file("debug.log", "ignored by the workspace\n");

    let api = sb.project_at(&ws.join("api"));
    api.git_init();
    api.file(".gitignore", "*.tmp\n")
        .file("src/main.rs", "fn main() {}\n")
        .file("notes.log", "the workspace ignores *.log, api does not\n")
        .commit_all("api");
    api.file("cache.tmp", "ignored by api\n")
        .file("secret.txt", "excluded by api's info/exclude\n")
        .file(
            "build/out.txt",
            "the workspace ignores build/, api does not\n",
        );
    let exclude = api.join(".git/info/exclude");
    let mut rules = fs::read(&exclude).unwrap_or_default();
    rules.extend_from_slice(b"/secret.txt\n"); // anchored at api's root
    fs::write(&exclude, rules).unwrap();
    // A linked worktree of api beside it: its `.git` file names a git dir whose `commondir`
    // holds api's `info/exclude`.
    api.git(["worktree", "add", "-q", "../api-wt"]);
    ws.file(
        "api-wt/secret.txt",
        "excluded by api's info/exclude, through commondir\n",
    )
    .file("api-wt/wt.txt", "the worktree's own file\n");

    let web = sb.project_at(&ws.join("web"));
    web.git_init();
    web.file("index.html", "<p>web</p>\n").commit_all("web");
    sb.git(
        Some(&web.path),
        [
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            upstream.path.to_str().unwrap(),
            "lib",
        ],
    );
    web.commit_all("lib as a submodule");
    assert!(
        web.join("lib/.git").is_file(),
        "a submodule's .git is a file"
    );
    fs::write(web.join(".git/modules/lib/info/exclude"), "local.cfg\n").unwrap();
    web.file(
        "lib/local.cfg",
        "excluded by the submodule's info/exclude\n",
    )
    .file("lib/dist/out.js", "ignored by the submodule\n")
    .file(
        "lib/notes.log",
        "the workspace ignores *.log, lib does not\n",
    );
    ws
}

/// Every file of the repositories' `.git` (directories, the submodule's and the worktree's
/// `.git` files, their git dirs under `web/.git/modules` and `api/.git/worktrees`), with modes,
/// mtimes and bytes.
fn git_dirs(ws: &TestProject) -> Vec<std::collections::BTreeMap<std::path::PathBuf, FsEntry>> {
    vec![
        fs_snapshot(&ws.join("api/.git")),
        fs_snapshot(&ws.join("web/.git")),
        dot_git_file(&ws.join("web/lib")),
        dot_git_file(&ws.join("api-wt")),
    ]
}

/// The `.git` file of a submodule or worktree `dir`, as an entry of its listing.
fn dot_git_file(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, FsEntry> {
    let listing = fs_snapshot(dir).into_iter();
    let found: std::collections::BTreeMap<_, _> = listing
        .filter(|(path, _)| path == Path::new(".git"))
        .collect();
    assert_eq!(found[Path::new(".git")].kind, 'f', "{}", dir.display());
    found
}

/// Snapshot the workspace and check it against git: the workspace's own files as `git add -A`
/// takes them with the repositories left out, and each repository's subtree as `git -C repo
/// add -A && git write-tree` writes it (for `web`, all but its `lib` entry, a gitlink to git,
/// which must be `lib`'s own tree). Returns the snapshot.
fn track_like_git(ws: &TestProject) -> String {
    let tracked = ws.track_json();
    let hash = tracked.hash.clone();
    assert!(
        tracked.skipped.is_empty(),
        "nothing left out: {}",
        tracked.json
    );
    let outer = ws.git_tree(); // the repositories left out
    let ours: String = ws
        .store_git(["ls-tree", "-r", &hash])
        .lines()
        .filter(|line| {
            !["\tapi/", "\tapi-wt/", "\tweb/"]
                .iter()
                .any(|r| line.contains(r))
        })
        .map(|line| format!("{line}\n"))
        .collect();
    assert_eq!(ours, outer.listing, "the workspace's own files");
    for repo in ["api", "api-wt"] {
        let (id, _) = git_repo_tree(ws.sb, &ws.join(repo), &[]);
        assert_eq!(
            subtree(ws, &hash, repo),
            Some(id),
            "{repo} as git writes it"
        );
    }
    let (lib, _) = git_repo_tree(ws.sb, &ws.join("web/lib"), &[]);
    assert_eq!(
        subtree(ws, &hash, "web/lib"),
        Some(lib),
        "lib as git writes it"
    );
    let (_, web) = git_repo_tree(ws.sb, &ws.join("web"), &[]);
    assert!(
        web.contains("160000 commit "),
        "git records lib as a gitlink: {web}"
    );
    assert_eq!(
        top_level(ws, &hash, "web", "lib"),
        without(&web, "lib"),
        "web as git writes it, but for lib"
    );
    hash
}

#[test]
fn workspace_of_three_repos_snapshots_each_under_its_own_rules_and_undoes_each_turn() {
    let sb = Sandbox::new();
    let ws = workspace(&sb);
    let git_before = git_dirs(&ws);

    let start = track_like_git(&ws);
    let paths = ws.store_paths(&start);
    for path in [
        "api/notes.log",
        "api/build/out.txt",
        "web/lib/notes.log",
        "web/.gitmodules",
    ] {
        assert!(paths.contains(path), "{path} is in: {paths:?}");
    }
    for path in [
        "debug.log",
        "api/cache.tmp",
        "api/secret.txt",
        "api-wt/secret.txt",
        "web/lib/local.cfg",
    ] {
        assert!(!paths.contains(path), "{path} is left out: {paths:?}");
    }
    assert!(
        !paths
            .iter()
            .any(|p| p.contains(".git/") || p.ends_with("/.git")),
        "{paths:?}"
    );
    let recorded = record(&ws, &start);
    for line in [
        "Rewind-Nested: repo api",
        "Rewind-Nested: repo api-wt",
        "Rewind-Nested: repo web",
        "Rewind-Nested: repo web/lib",
        "Rewind-Left-Out: ignored api/secret.txt",
        "Rewind-Left-Out: ignored web/lib/local.cfg",
    ] {
        assert!(
            recorded.lines().any(|l| l == line),
            "{line:?} in:\n{recorded}"
        );
    }

    // Turn 1 edits api, turn 2 web, turn 3 the submodule; each also makes an ignored file.
    turn(&ws, "begin", "1");
    ws.file("api/src/main.rs", "fn main() { agent(); }\n")
        .file("api/src/new.rs", "// new\n")
        .remove("api/notes.log")
        .file("api/cache2.tmp", "ignored, made during turn 1\n");
    turn(&ws, "end", "1");
    let after_1 = track_like_git(&ws);
    turn(&ws, "begin", "2");
    ws.file("web/index.html", "<p>agent</p>\n")
        .file("web/app.js", "agent();\n")
        .file(
            "web/build/gen.js",
            "web's rules keep it, the workspace's ignore it\n",
        );
    turn(&ws, "end", "2");
    track_like_git(&ws);
    turn(&ws, "begin", "3");
    ws.file("web/lib/lib.c", "int lib = 3;\n")
        .remove("web/lib/lib.h")
        .file("web/lib/new.h", "int new;\n")
        .file("web/lib/dist/new.js", "ignored, made during turn 3\n");
    turn(&ws, "end", "3");
    track_like_git(&ws);

    let o = rwj(&ws, &["undo", "--session=s", "--turn=3"]);
    assert!(strings(&o["conflicts"]).is_empty(), "{o}");
    assert_eq!(ws.read("web/lib/lib.c"), b"int lib;\n", "{o}");
    assert_eq!(ws.read("web/lib/lib.h"), b"int lib(void);\n", "{o}");
    assert!(!ws.join("web/lib/new.h").exists(), "{o}");
    assert_eq!(
        ws.read("web/lib/dist/new.js"),
        b"ignored, made during turn 3\n"
    );
    assert_eq!(
        ws.read("web/index.html"),
        b"<p>agent</p>\n",
        "turn 2 stays: {o}"
    );

    let o = rwj(&ws, &["undo", "--session=s", "--turn=2"]);
    assert!(strings(&o["conflicts"]).is_empty(), "{o}");
    assert_eq!(ws.read("web/index.html"), b"<p>web</p>\n", "{o}");
    assert!(!ws.join("web/app.js").exists(), "{o}");
    // The workspace's `build/` rule does not reach inside `web`: its snapshot saw this file.
    assert!(strings(&o["kept"]).is_empty(), "{o}");
    assert!(!ws.join("web/build/gen.js").exists(), "{o}");
    assert_eq!(
        subtree(&ws, &ws.track(), "api"),
        subtree(&ws, &after_1, "api"),
        "turn 1 stays"
    );

    let o = rwj(&ws, &["undo", "--session=s", "--turn=1"]);
    assert!(strings(&o["conflicts"]).is_empty(), "{o}");
    assert_eq!(ws.read("api/src/main.rs"), b"fn main() {}\n", "{o}");
    assert!(!ws.join("api/src/new.rs").exists(), "{o}");
    assert_eq!(
        ws.read("api/notes.log"),
        b"the workspace ignores *.log, api does not\n"
    );
    assert_eq!(ws.read("api/cache2.tmp"), b"ignored, made during turn 1\n");

    assert_eq!(track_like_git(&ws), start, "every turn undone");
    let git_after = git_dirs(&ws);
    for (before, after) in git_before.iter().zip(&git_after) {
        assert_same_snapshot(before, after, "a nested repository's .git");
    }
    ws.assert_fsck_clean();
}

#[test]
fn skip_leaves_nested_repositories_out_as_before() {
    let sb = Sandbox::new();
    let ws = workspace(&sb);
    let included = ws.track();
    assert!(ws.store_paths(&included).contains("api/src/main.rs"));
    ws.store_git(["config", "rewind.nestedRepos", "skip"]);
    let git_before = git_dirs(&ws);
    let t = ws.track_matches_git();
    t.assert_skipped("api", "nested_repo");
    t.assert_skipped("api-wt", "nested_repo");
    t.assert_skipped("web", "nested_repo");
    assert_eq!(t.skipped.len(), 3, "{}", t.json);
    let recorded = record(&ws, &t.hash);
    assert!(
        recorded.contains("Rewind-Left-Out: nested_repo api\n"),
        "{recorded}"
    );
    assert!(!recorded.contains("Rewind-Nested:"), "{recorded}");

    turn(&ws, "begin", "1");
    ws.file("api/src/main.rs", "fn main() { agent(); }\n")
        .file("top.txt", "agent\n");
    turn(&ws, "end", "1");
    let o = rwj(&ws, &["undo", "--session=s"]);
    assert_eq!(ws.read("top.txt"), b"workspace notes\n", "{o}");
    assert_eq!(
        ws.read("api/src/main.rs"),
        b"fn main() { agent(); }\n",
        "{o}"
    );
    for (before, after) in git_before.iter().zip(&git_dirs(&ws)) {
        assert_same_snapshot(before, after, "a nested repository's .git");
    }
    ws.assert_fsck_clean();
}

#[test]
fn a_project_without_nested_repositories_snapshots_like_git_under_either_setting() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.git_init();
    p.file(".gitignore", "*.log\n/build\n")
        .file("src/a.rs", "a\n")
        .file("x.log", "ignored\n")
        .exec("run.sh", "#!/bin/sh\n")
        .symlink("link", "src/a.rs")
        .commit_all("init");
    p.file("src/b.rs", "b\n");
    let include = p.track_matches_git();
    p.store_git(["config", "rewind.nestedRepos", "skip"]);
    let skip = p.track_matches_git();
    assert_eq!(include.hash, skip.hash);
}

#[test]
fn a_nested_repos_setting_that_is_neither_include_nor_skip_is_an_error() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "a\n");
    p.store_git(["config", "rewind.nestedRepos", "sometimes"]);
    let run = run_with_deadline(&mut p.rewind_command(["--json", "track"]), DEFAULT_DEADLINE);
    run.assert_code(1);
    let error = one_json(&run);
    assert_eq!(error["error"]["code"], "bad_setting", "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("rewind.nestedRepos"), "{message}");
    p.store_git(["config", "rewind.nestedRepos", "Skip"]);
    p.track();
}

/// What else may stand at a path between two snapshots: a repository made or dissolved
/// during a turn, a `.git` file that became a directory, a repository in an ignored
/// directory, a snapshot taken under `skip`, a repository where the target has a file.
#[test]
fn undo_and_restore_across_repositories_made_dissolved_and_swapped() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file(".gitignore", "vendor/\n")
        .file("d/x.txt", "plain dir\n")
        .file("gone/y.txt", "a repository, dissolved in the turn\n")
        .file("swap/z.txt", "a .git file, then a .git dir\n")
        .file("vendor/lib/v.txt", "a repository in an ignored dir\n")
        .file("old/o.txt", "a repository seen under skip\n")
        .file("r", "a file here in the first snapshot\n");
    sb.git(Some(&p.join("gone")), ["init", "-q"]);
    sb.git(Some(&p.join("vendor/lib")), ["init", "-q"]);
    sb.git(Some(&p.join("old")), ["init", "-q"]);
    let separate = sb.root.join("separate.git");
    sb.git(
        None,
        [
            "init".as_ref(),
            "-q".as_ref(),
            "--separate-git-dir".as_ref(),
            separate.as_os_str(),
            p.join("swap").as_os_str(),
        ],
    );
    let with_file = p.track();
    assert!(!p
        .store_paths(&with_file)
        .iter()
        .any(|x| x.starts_with("vendor")));

    // The snapshot before turn 1 is taken under `skip`: `old` could not be seen then, so what
    // is there after the turn is kept.
    p.store_git(["config", "rewind.nestedRepos", "skip"]);
    turn(&p, "begin", "1");
    p.store_git(["config", "rewind.nestedRepos", "include"]);
    p.file("old/o.txt", "agent\n")
        .file("old/new.txt", "agent\n");
    turn(&p, "end", "1");
    let old_git = fs_snapshot(&p.join("old/.git"));
    let o = rwj(&p, &["undo", "--session=s", "--turn=1"]);
    assert_eq!(p.read("old/o.txt"), b"agent\n", "{o}");
    let kept = ["gone/y.txt", "old/new.txt", "old/o.txt", "swap/z.txt"];
    assert_eq!(strings(&o["kept"]), kept, "{o}");
    assert_same_snapshot(&old_git, &fs_snapshot(&p.join("old/.git")), "old/.git");

    turn(&p, "begin", "2");
    sb.git(Some(&p.join("d")), ["init", "-q"]); // made
    p.file("d/x.txt", "agent\n");
    fs::remove_dir_all(p.join("gone/.git")).unwrap(); // dissolved
    p.file("gone/y.txt", "agent\n");
    fs::remove_file(p.join("swap/.git")).unwrap(); // a file, now a directory
    sb.git(Some(&p.join("swap")), ["init", "-q"]);
    p.file("swap/z.txt", "agent\n");
    p.file("vendor/lib/v.txt", "agent, in an ignored dir\n");
    turn(&p, "end", "2");
    let d_git = fs_snapshot(&p.join("d/.git"));
    let swap_git = fs_snapshot(&p.join("swap/.git"));

    let o = rwj(&p, &["undo", "--session=s", "--turn=2"]);
    assert!(strings(&o["conflicts"]).is_empty(), "{o}");
    assert!(strings(&o["kept"]).is_empty(), "{o}");
    assert_eq!(p.read("d/x.txt"), b"plain dir\n", "{o}");
    assert_eq!(
        p.read("gone/y.txt"),
        b"a repository, dissolved in the turn\n",
        "{o}"
    );
    assert_eq!(
        p.read("swap/z.txt"),
        b"a .git file, then a .git dir\n",
        "{o}"
    );
    assert!(!p.join("gone/.git").exists(), "{o}");
    assert_eq!(
        p.read("vendor/lib/v.txt"),
        b"agent, in an ignored dir\n",
        "{o}"
    );
    assert_same_snapshot(&d_git, &fs_snapshot(&p.join("d/.git")), "d/.git");
    assert_same_snapshot(&swap_git, &fs_snapshot(&p.join("swap/.git")), "swap/.git");

    // A repository where the first snapshot had a file: its files go back to that snapshot
    // (they are in the undo point), the repository itself is never replaced.
    p.remove("r");
    sb.git(Some(&p.path), ["init", "-q", "r"]);
    p.file("r/f.txt", "in the repository\n");
    let r_git = fs_snapshot(&p.join("r/.git"));
    let o = rwj(&p, &["restore", &with_file]);
    assert_eq!(strings(&o["conflicts"]), vec!["r"], "{o}");
    assert_same_snapshot(&r_git, &fs_snapshot(&p.join("r/.git")), "r/.git");
    let undo = o["undo"].as_str().unwrap();
    assert_eq!(p.store_blob(undo, "r/f.txt"), b"in the repository\n");
    p.assert_fsck_clean();
}

/// `git init d` changes no file: the same tree is taken while `d` is a plain directory (the
/// project's `*.tmp` rule reaches inside) and while it is a repository (it does not). Restoring
/// that tree keeps a file either reading could not see.
#[test]
fn a_tree_taken_with_and_without_a_repository_keeps_what_either_could_not_see() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file(".gitignore", "*.tmp\n").file("d/x.txt", "x\n");
    let plain = p.track();
    sb.git(Some(&p.join("d")), ["init", "-q"]);
    assert_eq!(p.track(), plain, "the same tree");
    assert!(
        record(&p, &plain).contains("Rewind-Nested: mixed d\n"),
        "{}",
        record(&p, &plain)
    );
    p.file("d/made.tmp", "d's rules see it, the project's do not\n");
    let o = rwj(&p, &["restore", &plain]);
    assert_eq!(strings(&o["kept"]), vec!["d/made.tmp"], "{o}");
    assert_eq!(
        p.read("d/made.tmp"),
        b"d's rules see it, the project's do not\n"
    );
}

/// A forged snapshot naming paths in a `.git`: the project's own (`.git/hooks/...`, which git
/// would run) and a nested repository's. Restore refuses them and writes the rest.
#[test]
fn restore_refuses_paths_inside_a_dot_git() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.git_init();
    p.file("top.txt", "now\n").commit_all("init");
    p.dir("sub");
    sb.git(Some(&p.join("sub")), ["init", "-q"]);
    p.file("sub/f.txt", "sub\n");
    let store = p.store();
    let own_git = fs_snapshot(&p.join(".git"));
    let sub_git = fs_snapshot(&p.join("sub/.git"));

    let blob = |text: &str| {
        let mut cmd = sb.git_command(None);
        cmd.arg("--git-dir")
            .arg(&store)
            .args(["hash-object", "-w", "--stdin"]);
        run_with_stdin(&mut cmd, text.as_bytes())
            .stdout
            .trim()
            .to_string()
    };
    let mktree = |entries: &str| {
        let mut cmd = sb.git_command(None);
        cmd.arg("--git-dir").arg(&store).arg("mktree");
        let run = run_with_stdin(&mut cmd, entries.as_bytes());
        run.assert_success();
        run.stdout.trim().to_string()
    };
    let hook = blob("#!/bin/sh\necho forged\n");
    let hooks = mktree(&format!("100755 blob {hook}\tpost-checkout\n"));
    let dot_git = mktree(&format!("040000 tree {hooks}\thooks\n"));
    let config = blob("[core]\n\tforged = true\n");
    let sub_dot_git = mktree(&format!("100644 blob {config}\tconfig\n"));
    let sub = mktree(&format!(
        "040000 tree {sub_dot_git}\t.git\n100644 blob {}\tf.txt\n",
        blob("sub\n")
    ));
    let top = blob("then\n");
    let forged = mktree(&format!(
        "040000 tree {dot_git}\t.git\n040000 tree {sub}\tsub\n100644 blob {top}\ttop.txt\n"
    ));
    // Recorded as if `track` had taken it (a forged store): the refusal tested is per path.
    let commit = sb.git_in(&store, ["commit-tree", &forged, "-m", "forged"]);
    let record = format!("refs/rewind/snapshots/{forged}");
    sb.git_in(&store, ["update-ref", &record, commit.trim()]);

    let run = run_with_deadline(
        &mut p.rewind_command(["--json", "restore", &forged]),
        DEFAULT_DEADLINE,
    );
    assert_no_panic(&run);
    run.assert_code(1);
    assert_eq!(
        p.read("top.txt"),
        b"then\n",
        "the other paths are written: {run}"
    );
    assert!(!p.join(".git/hooks/post-checkout").exists(), "{run}");
    assert_same_snapshot(
        &own_git,
        &fs_snapshot(&p.join(".git")),
        "the project's .git",
    );
    assert_same_snapshot(&sub_git, &fs_snapshot(&p.join("sub/.git")), "sub/.git");
    assert!(run.stdout.contains(".git/hooks/post-checkout"), "{run}");
}

/// The target has a file where a directory now holds a repository further down, whose `.git`
/// is an empty directory: the directory was taken for empty once the repository's files were
/// deleted, and replaced, `.git` and all.
#[test]
fn restore_never_removes_a_nested_empty_dot_git_to_put_a_file_back() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("d", "a file in the target\n");
    let target = p.track();
    p.remove("d")
        .dir("d/n/.git")
        .file("d/n/f.txt", "in the repository\n");
    let o = rwj(&p, &["restore", &target]);
    assert_eq!(strings(&o["conflicts"]), vec!["d"], "{o}");
    assert!(p.join("d/n/.git").is_dir(), "{o}");
    let undo = o["undo"].as_str().unwrap();
    assert_eq!(p.store_blob(undo, "d/n/f.txt"), b"in the repository\n");
}

/// `.git` in another case is a name git refuses (`git add` fails on it, `git fsck` flags a
/// tree holding it, and a case-insensitive file system takes it for a repository's `.git`):
/// it is left out and reported, and the store stays fsck-clean.
#[test]
fn a_dot_git_in_another_case_is_left_out_reported_and_the_store_stays_fsck_clean() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file(
        ".GIT/config",
        "not a repository on a case-sensitive file system\n",
    )
    .file("sub/.Git", "a file\n")
    .file("sub/kept.txt", "k\n")
    .file("top.txt", "t\n");
    let t = p.track_matches_git_excluding(&[".GIT", "sub/.Git"]);
    t.assert_skipped(".GIT", "reserved_name");
    t.assert_skipped("sub/.Git", "reserved_name");
    assert_eq!(t.skipped.len(), 2, "{}", t.json);
    p.assert_fsck_clean();
}

/// The files read to find a nested repository's `info/exclude` (its `.git` file, the git dir's
/// `commondir`, `info/exclude` itself) are read only when they are regular files: a FIFO there
/// would block `track` for ever, a link to /dev/zero would read without end. The repository's
/// files are snapshotted all the same.
#[test]
fn hostile_nested_repository_files_never_hang_track() {
    let mkfifo = |path: &Path| {
        let _ = fs::remove_file(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let made = std::process::Command::new("mkfifo").arg(path).status();
        assert!(made.unwrap().success(), "mkfifo {}", path.display());
    };
    let link_zero = |path: &Path| {
        let _ = fs::remove_file(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", path).unwrap();
    };
    type Setup = fn(&Path, &dyn Fn(&Path), &dyn Fn(&Path));
    let cases: [(&str, Setup); 5] = [
        ("sub/.git is a FIFO", |sub, fifo, _| fifo(&sub.join(".git"))),
        ("sub/.git -> /dev/zero", |sub, _, zero| {
            zero(&sub.join(".git"))
        }),
        ("sub/.git/info/exclude is a FIFO", |sub, fifo, _| {
            fifo(&sub.join(".git/info/exclude"))
        }),
        ("sub/.git/info/exclude -> /dev/zero", |sub, _, zero| {
            zero(&sub.join(".git/info/exclude"))
        }),
        (
            "a gitdir: file whose commondir is a FIFO",
            |sub, fifo, _| {
                let git_dir = sub.with_file_name("sub-git-dir");
                fs::create_dir_all(&git_dir).unwrap();
                fs::write(sub.join(".git"), format!("gitdir: {}\n", git_dir.display())).unwrap();
                fifo(&git_dir.join("commondir"));
            },
        ),
    ];
    for (what, setup) in cases {
        let sb = Sandbox::new();
        let p = sb.project("p");
        p.file("sub/f.txt", "the repository's file\n");
        setup(&p.join("sub"), &mkfifo, &link_zero);
        let run = run_with_deadline(&mut p.rewind_command(["--json", "track"]), DEFAULT_DEADLINE);
        assert_no_panic(&run);
        run.assert_success();
        let hash = Tracked::parse(&run.stdout).hash;
        assert!(p.store_paths(&hash).contains("sub/f.txt"), "{what}: {run}");
    }
}

/// Found by the issue-14 hostile pass: any `.git` entry (a file of garbage, a `gitdir:` to
/// nowhere, an empty `.git/`) made its directory a nested repository, so the project's ignore
/// rules stopped applying inside it (ignored files went into the store) and `skip` left its
/// files out. git takes such a directory as an ordinary one; so does the snapshot now.
#[test]
fn a_dot_git_that_makes_no_repository_leaves_its_directory_an_ordinary_one() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.git_init();
    p.file(".gitignore", "*.log\n")
        .file("docs/.git", "garbage\n")
        .file("docs/x.log", "ignored\n")
        .file("docs/t.txt", "t\n")
        .file("e/.git", "gitdir: /nonexistent\n")
        .file("e/y.log", "ignored\n")
        .file("e/k.txt", "k\n")
        .dir("f/.git")
        .file("f/z.log", "ignored\n")
        .file("f/q", "q\n");
    // (The shared oracle takes every `.git` for a repository: real git is asked here.)
    p.git(["add", "-A"]);
    let git = p.git(["write-tree"]).trim().to_string();
    assert_eq!(p.track(), git);
    p.store_git(["config", "rewind.nestedRepos", "skip"]);
    assert_eq!(p.track(), git);
}
