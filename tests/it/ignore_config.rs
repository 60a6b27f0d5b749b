//! Where the ignore rules come from: `core.excludesFile` found through git's own config loading
//! (`[include]`, `[includeIf "gitdir:..."]`, the repository's config) and the enclosing repository
//! found as git finds it (linked worktrees, submodules). The git CLI is the oracle.

use crate::common::*;
use std::fs;
use std::path::Path;

/// The tree git writes for `project` with `git add -A && git write-tree`, run in the project's
/// own repository (whose work tree is `work_tree`), so that git reads that repository's config
/// and evaluates `includeIf "gitdir:..."` against its git dir. Call it after rewind's snapshot:
/// it stages into the repository's index.
fn git_add_all_tree(sb: &Sandbox, work_tree: &Path, project: &Path) -> String {
    sb.git(Some(work_tree), ["add", "-A"]);
    let root = sb.git(Some(work_tree), ["write-tree"]);
    let prefix = project
        .strip_prefix(work_tree)
        .unwrap()
        .to_str()
        .expect("utf-8 prefix");
    if prefix.is_empty() {
        return root.trim().to_string();
    }
    sb.git(
        Some(work_tree),
        ["rev-parse", &format!("{}:{prefix}", root.trim())],
    )
    .trim()
    .to_string()
}

/// Asserts that rewind's snapshot of `p` is the tree git wrote (`want`), and which paths it holds.
fn assert_tree(p: &TestProject, tracked: &Tracked, want: &str, present: &[&str], absent: &[&str]) {
    let paths = p.store_paths(&tracked.hash);
    assert_eq!(
        tracked.hash, want,
        "rewind's tree differs from git's; rewind has {paths:?}"
    );
    for x in present {
        assert!(paths.contains(*x), "{x} must be in the tree: {paths:?}");
    }
    for x in absent {
        assert!(
            !paths.contains(*x),
            "{x} must not be in the tree: {paths:?}"
        );
    }
    p.assert_fsck_clean();
}

#[test]
fn global_excludes_file_set_through_include_is_honoured() {
    let sb = Sandbox::new();
    fs::write(sb.home.join(".global-ignore"), "*.secret\n").unwrap();
    fs::create_dir_all(sb.home.join(".gitconfig.d")).unwrap();
    // A relative include path is relative to the including file; `~/` is the home directory.
    fs::write(
        sb.home.join(".gitconfig.d/ignore.inc"),
        "[core]\n\texcludesFile = ~/.global-ignore\n",
    )
    .unwrap();
    // A condition without a repository to match never includes.
    fs::write(
        sb.home.join("never.inc"),
        "[core]\n\texcludesFile = /dev/null\n",
    )
    .unwrap();
    sb.write_home_gitconfig(
        "[include]\n\tpath = .gitconfig.d/ignore.inc\n\
         [includeIf \"gitdir:/nonexistent/\"]\n\tpath = never.inc\n",
    );
    let p = sb.project("proj");
    p.file("a.txt", "a\n").file("sub/x.secret", "s\n");
    let t = p.track_matches_git();
    assert_eq!(
        p.store_paths(&t.hash).into_iter().collect::<Vec<_>>(),
        ["a.txt"]
    );
    p.assert_fsck_clean();
}

#[test]
fn global_excludes_file_set_through_include_if_gitdir_is_honoured() {
    let sb = Sandbox::new();
    let root = sb.root.display();
    fs::write(sb.root.join("base-ignore"), "*.base\n").unwrap();
    fs::write(sb.root.join("match-ignore"), "*.secret\n").unwrap();
    fs::write(sb.root.join("other-ignore"), "*.txt\n").unwrap();
    fs::write(
        sb.root.join("match.inc"),
        format!("[core]\n\texcludesFile = {root}/match-ignore\n"),
    )
    .unwrap();
    fs::write(
        sb.root.join("other.inc"),
        format!("[core]\n\texcludesFile = {root}/other-ignore\n"),
    )
    .unwrap();
    // The matching condition comes first: the one after it must not match.
    sb.write_home_gitconfig(&format!(
        "[core]\n\texcludesFile = {root}/base-ignore\n\
         [includeIf \"gitdir:{root}/proj/\"]\n\tpath = {root}/match.inc\n\
         [includeIf \"gitdir:{root}/other/\"]\n\tpath = {root}/other.inc\n"
    ));
    let p = sb.project("proj");
    p.git_init();
    p.file("a.txt", "a\n")
        .file("x.secret", "s\n")
        .file("deeper/y.secret", "s\n")
        .file("y.base", "b\n");
    let t = p.track_json();
    let want = git_add_all_tree(&sb, &p.path, &p.path);
    assert_tree(
        &p,
        &t,
        &want,
        &["a.txt", "y.base"],
        &["x.secret", "deeper/y.secret"],
    );
}

#[test]
fn linked_worktree_project_gets_its_repository_excludes() {
    let sb = Sandbox::new();
    let main = sb.project("main");
    main.git_init();
    main.file("a.txt", "a\n")
        .file("tracked.secret", "tracked although ignored\n");
    main.git(["add", "-f", "tracked.secret"]);
    main.commit_all("init");
    main.git(["worktree", "add", "-q", "../wt"]);
    fs::write(main.join(".git/info/exclude"), "*.secret\n").unwrap();
    fs::write(sb.root.join("repo-ignore"), "*.local\n").unwrap();
    // The repository's own config (in the common dir) counts, as for `git add -A`.
    main.git([
        "config",
        "core.excludesFile",
        &sb.root.join("repo-ignore").display().to_string(),
    ]);
    let p = sb.project_at(&sb.root.join("wt"));
    p.file("b.secret", "s\n")
        .file("c.local", "l\n")
        .file("d.txt", "d\n");
    let t = p.track_json();
    let want = git_add_all_tree(&sb, &p.path, &p.path);
    assert_tree(
        &p,
        &t,
        &want,
        &["a.txt", "d.txt", "tracked.secret"],
        &["b.secret", "c.local"],
    );
}

/// Found by a hostile pass (r45): a project in a subdirectory of a repository whose git dir
/// is kept elsewhere (`git init --separate-git-dir`, no `core.worktree`) got none of its
/// rules: the git dir was opened again on its own, without the work tree discovery found.
#[test]
fn a_project_below_a_separate_git_dir_repository_gets_its_rules_and_index() {
    let sb = Sandbox::new();
    let gd = sb.root.join("gd");
    let gd_arg = format!("--separate-git-dir={}", gd.display());
    sb.git(Some(&sb.root), ["init", "-q", &gd_arg, "repo"]);
    let repo = sb.root.join("repo");
    fs::write(repo.join(".gitignore"), "*.log\n").unwrap();
    fs::write(gd.join("info/exclude"), "*.tmp\n").unwrap();
    let p = sb.project_at(&repo.join("sub"));
    p.file("kept.c", "c\n")
        .file("build.log", "log\n")
        .file("scratch.tmp", "t\n")
        .file("forced.log", "tracked although ignored\n");
    sb.git(Some(&repo), ["add", "-f", "sub/forced.log"]);
    let t = p.track_json();
    let want = git_add_all_tree(&sb, &repo, &p.path);
    assert_tree(
        &p,
        &t,
        &want,
        &["kept.c", "forced.log"],
        &["build.log", "scratch.tmp"],
    );
}

#[test]
fn project_inside_a_submodule_gets_the_submodule_excludes() {
    let sb = Sandbox::new();
    let source = sb.project("subsrc");
    source.git_init();
    source.file("inner/kept.txt", "k\n").commit_all("init");
    let sup = sb.project("super");
    sup.git_init();
    sup.file("top.txt", "t\n").commit_all("init");
    sup.git([
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        "../subsrc",
        "sub",
    ]);
    sup.commit_all("add submodule");
    let modules = sup.join(".git/modules/sub");
    fs::write(
        modules.join("info/exclude"),
        "*.secret\n/inner/anchored.md\n",
    )
    .unwrap();
    // The superproject's rules do not apply inside the submodule.
    fs::write(sup.join(".git/info/exclude"), "*.md\n").unwrap();
    fs::write(sb.root.join("sub-ignore"), "*.local\n").unwrap();
    sb.git(
        Some(&sup.join("sub")),
        [
            "config",
            "core.excludesFile",
            &sb.root.join("sub-ignore").display().to_string(),
        ],
    );
    let p = sb.project_at(&sup.join("sub/inner"));
    p.file("a.md", "a\n")
        .file("b.secret", "s\n")
        .file("c.local", "l\n")
        .file(
            "anchored.md",
            "ignored (anchored at the submodule's root)\n",
        )
        .file("deeper/anchored.md", "kept\n");
    let t = p.track_json();
    let want = git_add_all_tree(&sb, &sup.join("sub"), &p.path);
    assert_tree(
        &p,
        &t,
        &want,
        &["a.md", "kept.txt", "deeper/anchored.md"],
        &["b.secret", "c.local", "anchored.md"],
    );
}

#[test]
fn relative_global_excludes_file_is_relative_to_the_work_tree_root() {
    let sb = Sandbox::new();
    sb.write_home_gitconfig("[core]\n\texcludesFile = .myignore\n");
    let repo = sb.project("repo");
    repo.git_init();
    repo.file(".myignore", "*.log\n");
    let p = sb.project_at(&repo.join("sub"));
    p.file("a.log", "l\n").file("b.txt", "b\n");
    // rewind runs in the sandbox root, git in the work tree's root.
    let t = p.track_json();
    let want = git_add_all_tree(&sb, &repo.path, &p.path);
    assert_tree(&p, &t, &want, &["b.txt"], &["a.log"]);
}

#[test]
fn a_dot_git_that_is_no_repository_is_passed_over_as_git_passes_it() {
    let sb = Sandbox::new();
    let repo = sb.project("repo");
    repo.git_init();
    fs::write(repo.join(".git/info/exclude"), "*.secret\n").unwrap();
    // An empty `.git` directory between the repository and the project: not a repository.
    fs::create_dir_all(repo.join("mid/.git")).unwrap();
    let p = sb.project_at(&repo.join("mid/proj"));
    p.file("a.txt", "a\n").file("b.secret", "s\n");
    let t = p.track_json();
    let want = git_add_all_tree(&sb, &repo.path, &p.path);
    assert_tree(&p, &t, &want, &["a.txt"], &["b.secret"]);
}

/// Found by the hostile pass over the watcher (F3, F4): gix reads git's config files by path
/// and whole, so `~/.gitconfig` made a FIFO blocked `track` for ever (holding the store's lock)
/// and `~/.gitconfig` linked to /dev/zero read until memory ran out. Such a file, in any of
/// git's places or included from one, is now passed over with the rest of the user's config:
/// `track` answers, the project's own files are in, and the enclosing repository's own rules
/// (its `info/exclude`, its `.gitignore`) still apply.
#[test]
fn a_git_config_file_that_is_a_fifo_or_endless_never_hangs_track() {
    type Setup = fn(&Sandbox, &Path);
    let cases: [(&str, Setup); 5] = [
        ("~/.gitconfig is a FIFO", |sb, _| {
            plant(&sb.home.join(".gitconfig"), true, Path::new(""))
        }),
        ("~/.gitconfig -> /dev/zero", |sb, _| {
            std::os::unix::fs::symlink("/dev/zero", sb.home.join(".gitconfig")).unwrap()
        }),
        ("$XDG_CONFIG_HOME/git/config is a FIFO", |sb, _| {
            fs::create_dir_all(sb.xdg_config.join("git")).unwrap();
            plant(&sb.xdg_config.join("git/config"), true, Path::new(""))
        }),
        ("a file ~/.gitconfig includes is a FIFO", |sb, _| {
            sb.write_home_gitconfig("[include]\n\tpath = ~/inc/one\n");
            fs::create_dir_all(sb.home.join("inc")).unwrap();
            fs::write(sb.home.join("inc/one"), "[include]\n\tpath = two\n").unwrap();
            plant(&sb.home.join("inc/two"), true, Path::new(""))
        }),
        (
            "a file the repository's config includes if -> /dev/zero",
            |_, repo| {
                let config = repo.join(".git/config");
                let mut text = fs::read_to_string(&config).unwrap();
                text.push_str("[includeIf \"gitdir:/\"]\n\tpath = ../zero\n");
                fs::write(&config, text).unwrap();
                std::os::unix::fs::symlink("/dev/zero", repo.join("zero")).unwrap();
            },
        ),
    ];
    for (what, setup) in cases {
        let sb = Sandbox::new();
        let repo = sb.root.join("repo");
        fs::create_dir_all(&repo).unwrap();
        sb.git(Some(&repo), ["init", "-q"]);
        fs::write(repo.join(".git/info/exclude"), "*.excluded\n").unwrap();
        fs::write(repo.join(".gitignore"), "*.ignored\n").unwrap();
        let p = sb.project("repo/proj");
        p.file("a.txt", "a\n")
            .file("b.excluded", "b\n")
            .file("c.ignored", "c\n");
        setup(&sb, &repo);
        let run = run_with_deadline(&mut p.rewind_command(["--json", "track"]), DEFAULT_DEADLINE);
        assert_no_panic(&run);
        run.assert_success();
        let hash = Tracked::parse(&run.stdout).hash;
        // The oracle is git, which would hang on them too.
        let planted = [
            sb.home.join(".gitconfig"),
            sb.xdg_config.join("git/config"),
            sb.home.join("inc/two"),
            repo.join("zero"),
        ];
        for path in planted {
            let _ = fs::remove_file(path);
        }
        let paths: Vec<String> = p.store_paths(&hash).into_iter().collect();
        assert_eq!(paths, ["a.txt"], "{what}: {run}");
    }
}
