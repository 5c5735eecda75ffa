//! Nubo master: metadata, authentication, the REST API, WebDAV and the storage-node router. `main.rs` only parses the command line and calls into this library.

pub mod app; // wiring: serving and the one-shot commands
pub mod auth; // passwords, tokens, revocation, sign-in providers
pub mod context; // what every request, job and service call shares
#[cfg(test)]
mod docs; // the documentation's links resolve
pub mod error; // the service layer's error vocabulary
pub mod error_codes; // every stable error code the master answers
pub mod http; // routers, middleware, error rendering, OpenAPI
pub mod jobs; // periodic background work
pub mod service; // use cases
pub mod telemetry; // logging set-up
