//! The site: its settings (read, validated, saved), the theme presets and outgoing mail.

pub mod mail;
pub mod site;
pub mod themes;
