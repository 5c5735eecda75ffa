//! Authentication: password hashing now; tokens, guards and sign-in providers as they land.

pub mod password;
