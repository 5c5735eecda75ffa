//! What the Nubo master and its storage nodes share: secret values and their loading rules.

pub mod secret;
