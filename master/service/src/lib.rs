//! Use cases of the master, one file per area, and the [`Context`](context::Context) they share.
//! Service functions know nothing about HTTP (cargo keeps every web framework out of this crate):
//! they take typed inputs and answer typed results or a [`ServiceError`], which each front end
//! (the JSON API, WebDAV, WOPI) renders in its own dialect.

pub mod auth; // passwords, tokens, revocation, sign-in providers
pub mod context; // what every request, job and service call shares
pub mod error; // the service layer's error vocabulary
pub mod error_codes; // every stable error code the master answers
pub mod jobs; // periodic background work

pub mod access;
pub mod accounts;
pub mod activity;
pub mod archives;
pub mod avatars;
pub mod bootstrap;
pub mod captcha;
pub mod dav_accounts;
pub mod downloads;
pub mod events;
pub mod external;
pub mod files;
pub mod groups;
pub mod health;
pub mod identities;
pub mod import;
pub mod ingest;
pub mod mail;
pub mod mail_links;
pub mod maintenance;
pub mod metadata;
pub mod metrics;
pub mod migration;
pub mod node_calls;
pub mod nodes;
pub mod passkeys;
pub mod policies;
pub mod redeem;
pub mod reports;
pub mod search;
pub mod shares;
pub mod sign_in;
pub mod site;
pub mod storage_packs;
pub mod summary;
pub mod tags;
pub mod tasks;
pub mod themes;
pub mod thumbnails;
pub mod two_factor;
pub mod uploads;
pub mod users;
pub mod versions;
pub mod viewers;
pub mod wopi;
pub mod wopi_apps;
pub mod writes;

use crate::error::{ServiceError, ServiceResult};

/// One page of a list and the total number of matching records.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Page<T> {
    pub count: i64,
    pub items: Vec<T>,
}

/// Paging of a list request: `offset` >= 0, `limit` 1..=1000 (default 50).
#[derive(Debug, Clone, Copy)]
pub struct PageRequest {
    pub offset: i64,
    pub limit: i64,
}

impl PageRequest {
    pub const DEFAULT_LIMIT: i64 = 50;
    pub const MAX_LIMIT: i64 = 1000;

    pub fn parse(offset: Option<i64>, limit: Option<i64>) -> ServiceResult<Self> {
        let offset = offset.unwrap_or(0);
        let limit = limit.unwrap_or(Self::DEFAULT_LIMIT);
        if offset < 0 {
            return Err(ServiceError::validation("offset", "offset must be 0 or more"));
        }
        if !(1..=Self::MAX_LIMIT).contains(&limit) {
            return Err(ServiceError::validation("limit", "limit must be from 1 to 1000"));
        }
        Ok(Self { offset, limit })
    }
}
