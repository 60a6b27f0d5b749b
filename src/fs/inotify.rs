//! The kernel's file-system events on Linux (inotify): one watch per directory, added through
//! the directory's own descriptor, so a watch never goes through a symlink.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use super::{DirRef, WatchEvent as Event};

/// An inotify instance (non-blocking: reading it never waits).
pub(crate) struct Inotify(OwnedFd);

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
    /// A new inotify instance; `EMFILE` names the limits it may have met.
    pub(crate) fn new() -> io::Result<Inotify> {
        match inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) {
            Ok(fd) => Ok(Inotify(fd)),
            Err(rustix::io::Errno::MFILE) => Err(io::Error::other(
                "the user's inotify instances (fs.inotify.max_user_instances) or the process's \
                 open descriptors are at their limit",
            )),
            Err(e) => Err(e.into()),
        }
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
                    created: flags.contains(ReadFlags::CREATE),
                    deleted: flags.contains(ReadFlags::DELETE),
                    moved_from: flags.contains(ReadFlags::MOVED_FROM),
                    moved_to: flags.contains(ReadFlags::MOVED_TO),
                    cookie: event.cookie(),
                });
            }
        }
    }
}
