//! `/site`: public, unauthenticated facts about this Nubo instance.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use nubo_model::domain::captcha::{CaptchaProvider, CaptchaScene};
use nubo_model::domain::settings::AuthMethod;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiQuery, ClientAddress};
use nubo_service::context::Context;
use nubo_service::{identity::captcha, identity::sign_in, ops::health, settings::site};

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

/// One readiness check.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthCheckView {
    pub ok: bool,
    /// How long the check took, in milliseconds.
    pub ms: u64,
}

/// Every readiness check.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthChecks {
    /// A trivial query.
    pub database: HealthCheckView,
    /// A write and a read of the key-value store (Redis, or this master's memory).
    pub kv: HealthCheckView,
    /// The first storage policy of the group for new users: a probe file in a local root, a
    /// `HEAD` of an S3 bucket, a call to a storage node.
    pub storage: HealthCheckView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HealthResponse {
    /// Always `ok` (a failing check answers 503).
    pub status: &'static str,
    pub checks: HealthChecks,
}

/// Readiness, for load balancers: whether this master can serve now (`ping` only says it is
/// alive). Each check has two seconds. Public: the answer names checks, never their causes.
#[utoipa::path(get, path = "/site/health", tag = "site",
    responses(
        (status = 200, description = "Every check passed", body = HealthResponse),
        (status = 503, description = "A check failed or timed out (`site.unhealthy`; the message names it)", body = ErrorBody),
    ))]
pub async fn health(State(state): State<Context>) -> ApiResult<Json<HealthResponse>> {
    let health = health::check(&state).await;
    health.verdict()?;
    let view = |check: &health::Check| HealthCheckView { ok: check.ok, ms: check.ms };
    Ok(Json(HealthResponse {
        status: "ok",
        checks: HealthChecks { database: view(&health.database), kv: view(&health.kv), storage: view(&health.storage) },
    }))
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
    /// The label of the OpenID Connect sign-in button (`oidc_display_name`, such as
    /// `Keycloak`); shown while `auth_methods` has `oidc`.
    pub oidc_display_name: String,
    /// The scenes that ask for a captcha (`register`, `login`, `magic_link`, `password_reset`,
    /// `share_password`, `report`), each with its provider; a scene not listed asks for none.
    pub captcha: BTreeMap<CaptchaScene, SceneCaptchaView>,
}

/// How one scene's captcha is solved.
#[derive(Debug, Serialize, ToSchema)]
pub struct SceneCaptchaView {
    /// `builtin`: an image from `GET /site/captcha?scene=`; `recaptcha`, `turnstile`: the
    /// provider's widget with `site_key`.
    pub provider: CaptchaProvider,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site_key: Option<String>,
}

/// Public site configuration, read before sign-in.
#[utoipa::path(get, path = "/site/config", tag = "site",
    responses(
        (status = 200, description = "Current site configuration", body = SiteConfigResponse),
        (status = 500, description = "Internal error", body = ErrorBody),
    ))]
pub async fn config(State(state): State<Context>) -> ApiResult<Json<SiteConfigResponse>> {
    let settings = site::current(&state).await?;
    let captcha = captcha::scenes(&settings.captcha)
        .into_iter()
        .map(|(scene, c)| (scene, SceneCaptchaView { provider: c.provider, site_key: c.site_key }))
        .collect();
    Ok(Json(SiteConfigResponse {
        site_name: settings.site_name.clone(),
        footer_code: settings.footer_code.clone(),
        tos_url: settings.tos_url.clone(),
        privacy_url: settings.privacy_url.clone(),
        auth_methods: settings.auth_methods.clone(),
        register_enabled: settings.register_enabled,
        oidc_display_name: settings.oidc.display_name.clone(),
        captcha,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CaptchaQuery {
    /// The scene the image is for; its answer counts only there.
    #[param(inline)]
    pub scene: CaptchaScene,
}

/// A built-in captcha image.
#[derive(Debug, Serialize, ToSchema)]
pub struct CaptchaChallengeView {
    /// Send `{id}:{text read from the image}` as the form's `captcha`.
    pub id: String,
    /// The image, a `data:image/png;base64,...` URI.
    pub image: String,
}

/// A new built-in captcha image for a scene whose captcha is `builtin`. The answer is
/// case-insensitive, works for five minutes and once: a wrong answer uses the image up too.
#[utoipa::path(get, path = "/site/captcha", tag = "site", params(CaptchaQuery),
    responses(
        (status = 200, description = "A new image", body = CaptchaChallengeView),
        (status = 400, description = "Missing or unknown scene", body = ErrorBody),
        (status = 404, description = "The scene's captcha is not the built-in one (`captcha.not_builtin`)", body = ErrorBody),
        (status = 429, description = "Too many images asked for from this address (`auth.rate_limited`)", body = ErrorBody),
        (status = 500, description = "Internal error", body = ErrorBody),
    ))]
pub async fn captcha_image(
    State(state): State<Context>,
    ClientAddress(address): ClientAddress,
    ApiQuery(query): ApiQuery<CaptchaQuery>,
) -> ApiResult<Json<CaptchaChallengeView>> {
    // Each image is drawn and its answer kept for minutes: an address gets a budget of them.
    sign_in::limit_ceremonies(&state, address).await?;
    let challenge = captcha::challenge(&state, query.scene).await?;
    Ok(Json(CaptchaChallengeView { id: challenge.id, image: challenge.image }))
}
