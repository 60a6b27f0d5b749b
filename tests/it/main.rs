//! rewind's integration tests, one binary (`cargo test --test it`): each module is one area,
//! `common` holds the helpers they share. Tests are named `it::<module>::<test>`, so
//! `cargo test --test it -- faults::` runs one module. `REWIND_TEST_BIN=<path>` runs the
//! process tests against another build of the binary.

mod common;

mod api;
mod cli;
mod deep;
mod diff;
mod dry_run;
mod faults;
mod hooks;
mod ignore_config;
mod layout;
mod merge;
mod model;
mod nested;
mod packs;
mod prune;
mod renames;
mod restore;
mod safety;
mod serve;
mod sessions;
mod store_safety;
mod track;
mod turns;
mod undo_merge;
mod wait;
mod watch;
mod weeks;
