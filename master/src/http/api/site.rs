//! `/site`: public, unauthenticated facts about this Nubo instance.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::context::Context;
use crate::domain::settings::AuthMethod;
use crate::error::ServiceResult;
use crate::http::error::ErrorBody;
use crate::service::site;

#[derive(Debug, Serialize, ToSchema)]
pub struct PingResponse {
    /// Version of the running master.
    pub version: &'static str,
    /// Version of the master <-> storage-node protocol it speaks.
    pub protocol_version: u32,
}

/// Liveness and version.
#[utoipa::path(get, path = "/site/ping", tag = "site",
    responses(
        (status = 200, description = "The service is up", body = PingResponse),
        (status = 500, description = "Internal error", body = ErrorBody),
    ))]
pub async fn ping() -> Json<PingResponse> {
    Json(PingResponse { version: env!("CARGO_PKG_VERSION"), protocol_version: nubo_protocol::PROTOCOL_VERSION })
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SiteConfigResponse {
    pub site_name: String,
    /// HTML snippet the web client puts in the page footer (set by administrators).
    pub footer_code: String,
    /// Terms of service; empty when none.
    pub tos_url: String,
    /// Privacy policy; empty when none.
    pub privacy_url: String,
    /// Enabled sign-in methods; `email_password` by default.
    pub auth_methods: Vec<AuthMethod>,
    /// Whether new accounts may register.
    pub register_enabled: bool,
}

/// Public site configuration, read before sign-in.
#[utoipa::path(get, path = "/site/config", tag = "site",
    responses(
        (status = 200, description = "Current site configuration", body = SiteConfigResponse),
        (status = 500, description = "Internal error", body = ErrorBody),
    ))]
pub async fn config(State(state): State<Context>) -> ServiceResult<Json<SiteConfigResponse>> {
    let config = site::site_config(state.db()).await?;
    Ok(Json(SiteConfigResponse {
        site_name: config.site_name,
        footer_code: config.footer_code,
        tos_url: config.tos_url,
        privacy_url: config.privacy_url,
        auth_methods: config.auth_methods,
        register_enabled: config.register_enabled,
    }))
}
