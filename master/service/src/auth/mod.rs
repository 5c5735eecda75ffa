//! Authentication without HTTP: password hashing, sign-in providers, the second factor, tokens
//! and the per-user revocation state.
//! The guard extractors live in `http::guard`; sign-in use cases in `service::sign_in`.

pub mod mailed_token;
pub mod password;
pub mod providers;
pub mod revocation;
pub mod token;
pub mod two_factor;
