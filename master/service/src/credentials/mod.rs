//! What proves who is asking: signed tokens and their keys, password hashing, and the revocation of
//! tokens already issued.

pub mod password;
pub mod revocation;
pub mod token;
