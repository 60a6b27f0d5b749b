//! The progress line on stderr: drawn from half a second into a command, cleared for good as
//! soon as output starts.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Whether the progress line is on screen (`Some(true)`), not (`Some(false)`), or ended (`None`).
static LINE: Mutex<Option<bool>> = Mutex::new(Some(false));

/// Clear the progress line, if drawn, and draw no more: output follows.
pub(crate) fn end() {
    let mut state = LINE.lock().unwrap_or_else(|p| p.into_inner());
    if *state == Some(true) {
        let _ = write!(std::io::stderr(), "\r\x1b[K");
    }
    *state = None;
}

/// Draw `progress` on stderr every 100 ms, from half a second in, until output starts or
/// `done`.
pub(crate) fn draw(progress: &rewind::Progress, done: &AtomicBool) {
    let start = Instant::now();
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        let (phase, count, total) = progress.get();
        if phase.is_empty() || start.elapsed() < Duration::from_millis(500) {
            continue;
        }
        let line = match total {
            0 => format!("{phase}: {count}"),
            total => format!(
                "{phase}: {count}/{total} ({}%)",
                count.min(total) * 100 / total
            ),
        };
        let mut state = LINE.lock().unwrap_or_else(|p| p.into_inner());
        if state.is_none() {
            return;
        }
        let _ = write!(std::io::stderr(), "\r\x1b[K{line}");
        *state = Some(true);
    }
    end();
}
