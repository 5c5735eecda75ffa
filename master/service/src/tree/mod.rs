//! A user's tree: who may reach an object, folders and files, metadata, tags, search and the change
//! events of the tree.

pub mod access;
pub mod events;
pub mod files;
pub mod metadata;
pub mod search;
pub mod tags;
