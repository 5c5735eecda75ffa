//! File content: the one ingest commit, uploads and writes, downloads, media URLs and archives, versions,
//! thumbnails, external downloads, imports, policy migration and what the storage nodes report.

pub mod archives;
pub mod downloads;
pub mod external;
pub mod import;
pub mod ingest;
pub mod media;
pub mod migration;
pub mod node_calls;
pub mod thumbnails;
pub mod uploads;
pub mod versions;
pub mod writes;
