//! Use cases of the master, in folders by what they serve, and the [`Context`](context::Context)
//! they share.
//! Service functions know nothing about HTTP (cargo keeps every web framework out of this crate):
//! they take typed inputs and answer typed results or a [`ServiceError`], which each front end
//! (the JSON API, WebDAV, WOPI) renders in its own dialect.

// The folders, lowest first: credentials, context, audit, settings, storage, tree, identity,
// capacity, tasks, sharing, content, office, ops, jobs. Each imports only the crate root's
// modules and the folders before it (master/tests/layers.rs holds them to that order).
pub mod error; // the service layer's error vocabulary
pub mod error_codes; // every stable error code the master answers

pub mod audit;
pub mod capacity;
pub mod content;
pub mod context;
pub mod credentials;
pub mod identity;
pub mod jobs;
pub mod office;
pub mod ops;
pub mod settings;
pub mod sharing;
pub mod storage;
pub mod tasks;
pub mod tree;

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
