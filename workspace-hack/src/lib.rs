//! Nothing to run: the crate exists for its manifest, which cargo hakari keeps (see
//! .config/hakari.toml), so every package of the workspace builds its dependencies with one
//! feature set.
