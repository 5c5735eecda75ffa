//! Nubo master's lowest floor: domain types and rules, every SQL statement, the key-value store, the blob store registry and the configuration. It imports nothing of the floors above (service, http, master).

pub mod config; // the one typed configuration
pub mod db; // pools, migrations, all SQL
pub mod domain; // pure types and rules
pub mod kv; // shared key-value state: memory or Redis
pub mod storage; // the blob store of each storage policy
