//! End-to-end API tests: each starts a real master over HTTP (see `nubo_tests`). One test binary
//! for the whole crate keeps link times down.

mod admin;
mod archives;
mod auth;
mod avatars;
mod captcha;
mod cluster;
mod contract;
mod crash;
mod database;
mod edge;
mod errors;
mod files;
mod ingest;
mod mail;
mod names;
mod nodes;
mod not_built;
mod oauth;
mod passkeys;
mod privileges;
mod reports;
mod search;
mod settings;
mod shares;
mod site;
mod storage;
mod tags;
mod tasks;
mod themes;
mod two_factor;
mod web;
mod webdav;
mod webdav_hardening;
mod wopi;
