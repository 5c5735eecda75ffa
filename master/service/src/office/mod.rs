//! Opening files in place: the viewers registry and WOPI applications and sessions.

pub mod viewers;
pub mod wopi;
pub mod wopi_apps;
