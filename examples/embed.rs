use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rewind::{DiffOptions, OpenOptions, Pruner, Store};

fn main() -> Result<(), rewind::Error> {
    let project = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    // --data-dir, else $REWIND_DATA_DIR, $XDG_DATA_HOME/rewind, ~/.local/share/rewind.
    let data_dir = rewind::data_dir(None)?;
    // One handle per project for the whole runtime: Store is Send + Sync.
    let store = Arc::new(Store::open(
        Path::new(&project),
        &OpenOptions::new(data_dir),
    )?);
    // A store found damaged (its objects gone) is kept aside and a new one started: say so.
    if let Some(aside) = store.set_aside() {
        eprintln!("rewind: damaged store moved to {}", aside.display());
    }
    // Background retention: first run after 30 s, then hourly; stops when dropped.
    let pruner = Pruner::start(store.clone(), Duration::from_secs(3600));

    // A turn: "before" when it begins, "after" when it ends.
    store.begin_turn("chat-42", "1")?;
    // Before the agent edits a file, announce it: with another session's turn open at the
    // same time, the change is then this session's, not shared.
    store.track_file("chat-42", "1", "README.md")?;
    std::fs::write(
        Path::new(&project).join("README.md"),
        "edited by the agent\n",
    )
    .expect("the agent's edit");
    let end = store.end_turn("chat-42", "1")?;
    for file in &end.files {
        // origin: Unannounced, Announced or Shared (see "Two agents on one project").
        println!(
            "{:?} {} +{} -{} {:?}",
            file.status, file.file, file.additions, file.deletions, file.origin
        );
    }

    // What the turn changed, with contents (git's --numstat counts), for a review UI.
    for row in store.diff_full(end.before, Some(end.after), &DiffOptions::default())? {
        println!(
            "{} {:?} {} -> {} bytes",
            row.file,
            row.status,
            row.before.len(),
            row.after.len()
        );
    }

    // Other threads share the same store (each operation takes the store's lock itself).
    let worker = {
        let store = store.clone();
        std::thread::spawn(move || store.track(&Default::default()))
    };
    let snapshot = worker.join().expect("the worker thread")?;
    println!("snapshot {} ({} files)", snapshot.hash, snapshot.files);

    // Undo what the agent just did (pressed again: the turn before). Files someone else
    // edited since, and shared files, are left alone and listed.
    let undone = store.undo_last("chat-42", false)?;
    for path in &undone.conflicts {
        eprintln!("left alone (edited since the turn, or shared): {path}");
    }
    // Changed our mind: redo brings back what that undo changed, and only that. A file edited
    // since the undo is left alone and listed (`force` overwrites it, keeping its bytes).
    let redone = store.redo("chat-42", &Default::default())?;
    assert!(
        redone.failed.is_empty(),
        "could not write: {:?}",
        redone.failed
    );
    // (`restore(undone.undo, ..)` would instead put back the whole project as it was before the
    // undo, edits made since included.)

    if let Some(Err(message)) = pruner.last() {
        eprintln!("last prune failed: {message}");
    }
    drop(pruner); // stops the background thread
    Ok(())
}
