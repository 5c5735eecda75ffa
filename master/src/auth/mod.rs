//! Authentication: password hashing, tokens, the per-user revocation state and the three
//! guard levels. Sign-in use cases live in `service::sign_in`.

pub mod guard;
pub mod password;
pub mod revocation;
pub mod token;
