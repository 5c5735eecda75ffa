//! The storage node's HTTP behaviour, end to end: each test starts the library server on
//! `127.0.0.1:0` with its own temp dir and talks to it as the master and a client would.

mod fetch;
mod helpers;
mod layers;
mod rpc;
mod startup;
mod transfer;
