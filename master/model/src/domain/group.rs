//! Groups as values: the permission flags every member inherits.

use serde::{Deserialize, Serialize};

/// What members of a group may do beyond managing their own files. Stored as JSON on the group
/// and snapshotted into each access token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct GroupPermissions {
    /// Create shares of their objects.
    pub share: bool,
    /// Use WebDAV accounts.
    pub webdav: bool,
    /// Submit external (remote URL) downloads.
    pub external_download: bool,
    /// Save what others share into their own files (`POST /share/{code}/save`). Groups stored
    /// before it existed have it.
    #[serde(default = "allowed")]
    pub share_save: bool,
}

fn allowed() -> bool {
    true
}

impl GroupPermissions {
    pub fn all() -> Self {
        Self { share: true, webdav: true, external_download: true, share_save: true }
    }
}

/// One gibibyte, the default capacity of the registrations group.
pub const GIB: i64 = 1024 * 1024 * 1024;
