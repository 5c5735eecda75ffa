//! End-to-end API tests: each starts a real master over HTTP (see `nubo_tests`). One test binary
//! for the whole crate keeps link times down.

mod admin;
mod auth;
mod cluster;
mod crash;
mod database;
mod edge;
mod errors;
mod files;
mod nodes;
mod settings;
mod site;
mod storage;
mod tasks;
mod themes;
mod webdav;
