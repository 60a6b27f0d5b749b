//! The kernel's file-system events on Linux (inotify): one watch per directory, added through
//! the directory's own descriptor, so a watch never goes through a symlink.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use super::DirRef;

/// An inotify instance (non-blocking: reading it never waits).
pub(crate) struct Inotify(OwnedFd);

/// What happened, as far as a snapshot cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event<'a> {
    /// Something changed in watched directory `wd`: `name` (an entry of it; `is_dir` when the
    /// entry is a directory, `moved` when it came, went or was made or removed), or the directory
    /// itself (`name` is `None`: its permissions, or it moved or was deleted).
    Changed {
        wd: i32,
        name: Option<&'a [u8]>,
        is_dir: bool,
        moved: bool,
    },
    /// The watch on `wd` is gone (its directory was deleted, or its file system unmounted).
    Gone { wd: i32 },
    /// The kernel's queue overflowed: events were lost.
    Overflow,
}

/// The events a watch asks for: every change to a directory's entries, their contents and
/// their metadata; never opens or reads.
fn watch_flags() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::EXCL_UNLINK
}

impl Inotify {
    pub(crate) fn new() -> io::Result<Inotify> {
        Ok(Inotify(inotify::init(
            CreateFlags::CLOEXEC | CreateFlags::NONBLOCK,
        )?))
    }

    /// Watch the open directory `dir` (through `/proc/self/fd`, which names the directory the
    /// descriptor holds, whatever its path is now). Returns the watch descriptor: the same one
    /// again for a directory already watched. Costs one `inotify_add_watch`.
    pub(crate) fn watch(&self, dir: DirRef<'_>) -> io::Result<i32> {
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        Ok(inotify::add_watch(&self.0, path, watch_flags())?)
    }

    /// Stop watching `wd` (already gone: not an error).
    pub(crate) fn unwatch(&self, wd: i32) {
        let _ = inotify::remove_watch(&self.0, wd);
    }

    /// Hand every queued event to `each`, until none is left. Costs one `read` per 64 KiB of
    /// events, and never waits.
    pub(crate) fn drain(&self, mut each: impl FnMut(Event<'_>)) -> io::Result<()> {
        let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut reader = inotify::Reader::new(self.0.as_fd(), &mut buf);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::AGAIN) => return Ok(()),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            };
            let flags = event.events();
            let wd = event.wd();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                each(Event::Overflow);
            } else if flags.intersects(ReadFlags::IGNORED | ReadFlags::UNMOUNT) {
                each(Event::Gone { wd });
            } else {
                let moved = ReadFlags::CREATE
                    | ReadFlags::DELETE
                    | ReadFlags::MOVED_FROM
                    | ReadFlags::MOVED_TO
                    | ReadFlags::DELETE_SELF
                    | ReadFlags::MOVE_SELF;
                each(Event::Changed {
                    wd,
                    name: event.file_name().map(|name| name.to_bytes()),
                    is_dir: flags.contains(ReadFlags::ISDIR),
                    moved: flags.intersects(moved),
                });
            }
        }
    }
}
