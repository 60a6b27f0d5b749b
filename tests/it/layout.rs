//! The module layout docs/design.md draws: data flows one way, so no module of the library
//! names a module above it.

use std::fs;
use std::path::Path;

/// The library's modules, lowest first: each may use those before it, never one after it.
const LAYERS: &[&str] = &[
    "testing", "id", "error", "paths", "fs", "store", "snapshot", "diff", "restore", "turns",
    "prune", "inspect", "serve",
];

/// Every `crate::<module>` path in `text` (its code, tests aside).
fn modules_named(text: &str) -> Vec<(usize, String)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut found = Vec::new();
    for (number, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            found.push((number + 1, name));
        }
    }
    found
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_module_names_a_module_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let rank = |name: &str| LAYERS.iter().position(|l| *l == name);
    let mut upward = Vec::new();
    let mut checked = 0;
    for file in files {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.iter().next().unwrap().to_string_lossy();
        let own = first.trim_end_matches(".rs");
        if own == "cli" || own == "lib" {
            continue; // the binary, and the crate root that re-exports everything
        }
        let own_rank = rank(own).unwrap_or_else(|| panic!("{own} is not in LAYERS"));
        for (line, name) in modules_named(&fs::read_to_string(&file).unwrap()) {
            checked += 1;
            match rank(&name) {
                Some(r) if r <= own_rank => {}
                _ => upward.push(format!("{}:{line}: crate::{name}", relative.display())),
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} crate paths found: is the scan broken?"
    );
    assert!(
        upward.is_empty(),
        "modules naming one above them (or a root re-export): {upward:#?}"
    );
}

/// Platform code lives in `src/fs/` (and the Linux-only lock holder lookup of
/// `src/store/lock.rs`): a `std::os::unix` or rustix call anywhere else breaks the Windows
/// build, which CI does not run (the Unix-only build passed while ~100 such uses stood).
#[test]
fn only_fs_names_the_platform() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut outside = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.iter().next().unwrap().to_string_lossy();
        if first.trim_end_matches(".rs") == "fs" || relative == Path::new("store/lock.rs") {
            continue;
        }
        let text = fs::read_to_string(file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (number, line) in code.lines().enumerate() {
            if [
                "std::os::",
                "rustix::",
                "cfg(unix)",
                "cfg(not(unix))",
                "target_os",
            ]
            .iter()
            .any(|platform| line.contains(platform))
            {
                outside.push(format!(
                    "{}:{}: {}",
                    relative.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(files.len() > 20, "only {} sources found", files.len());
    assert!(
        outside.is_empty(),
        "platform code outside src/fs/: {outside:#?}"
    );
}
