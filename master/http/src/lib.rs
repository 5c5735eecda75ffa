//! The HTTP front end: the `/api/v1` router and the middleware every request passes through
//! (request ids, tracing, panic capture, body limits, the uniform error body).

pub mod api;
pub mod captcha;
pub mod content_safety;
pub mod dav;
pub mod download;
pub mod edge;
pub mod error;
pub mod extract;
pub mod guard;
pub mod links;
pub mod metrics;
pub mod node_rpc;
pub mod web;

use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, Request, StatusCode, header};
use axum::{Extension, Router};
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::compression::CompressionLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::{Level, Span};

use nubo_service::context::Context;

/// Builds the complete application router.
pub fn router(state: Context) -> Router {
    let (api, _doc) = api::routes();
    let request_id = HeaderName::from_static(error::REQUEST_ID_HEADER);
    let max_json_body = state.config().max_json_body;
    let body_timeout = nubo_common::serve::seconds(state.config().body_timeout_seconds);
    let json_body_deadline = nubo_common::serve::seconds(state.config().json_body_deadline_seconds);
    let long_requests = std::sync::Arc::new(tokio::sync::Semaphore::new(state.config().long_request_slots()));
    let proxies = std::sync::Arc::new(state.config().trusted_proxies.clone());
    let span_proxies = proxies.clone();
    let forwarded_clients = edge::ForwardedClients {
        proxies: proxies.clone(),
        in_flight: nubo_common::serve::PerAddress::new(state.config().max_connections_per_address),
    };
    // Bodies under /dav are streams the services meter themselves: no JSON body limit there.
    // WebDAV requests are transfers: each holds a place for long requests.
    let dav = axum::routing::any(dav::serve)
        .layer(DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn(edge::hold_long_request_slot));
    let mut app = api
        .route(dav::PREFIX, dav.clone())
        .route("/dav/", dav.clone())
        .route("/dav/{*path}", dav)
        // Every other path: the web app (API and WebDAV paths still answer the JSON 404).
        .fallback_service(axum::routing::any(web::serve).with_state(state.clone()).layer(CompressionLayer::new()));
    if let Some(instruments) = state.instruments() {
        // A router layer, so the matched route template is known to it.
        app = app.layer(axum::middleware::from_fn_with_state(
            instruments.http.clone(),
            nubo_common::metrics::track_requests,
        ));
    }
    app.layer(DefaultBodyLimit::max(max_json_body))
        .layer(Extension(edge::JsonBodyLimit(max_json_body)))
        .layer(Extension(edge::JsonBodyDeadline(json_body_deadline)))
        .layer(Extension(edge::LongRequestSlots(long_requests)))
        .layer(Extension(proxies.clone()))
        .layer(axum::middleware::from_fn_with_state(state.clone(), poke_after_writes))
        .with_state(state)
        .layer(
            ServiceBuilder::new()
                .layer(SetSensitiveRequestHeadersLayer::new([header::AUTHORIZATION, header::COOKIE]))
                .layer(SetRequestIdLayer::new(request_id.clone(), MakeRequestUuid))
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(move |request: &Request<_>| {
                            let id = request
                                .headers()
                                .get(error::REQUEST_ID_HEADER)
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or_default();
                            let path = edge::loggable_path(request.uri().path());
                            // The client as rate limits see it (`trusted_proxies`).
                            let client = request
                                .extensions()
                                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                                .map(|info| extract::client_address(info.0.ip(), request.headers(), &span_proxies));
                            let client = client.map(|address| address.to_string()).unwrap_or_default();
                            tracing::info_span!("request", method = %request.method(), path = %path, client = %client, request_id = %id)
                        })
                        .on_response(DefaultOnResponse::new().level(Level::INFO))
                        .on_failure(log_failure),
                )
                .layer(PropagateRequestIdLayer::new(request_id))
                .layer(axum::middleware::from_fn(error::uniform_errors))
                .layer(axum::middleware::from_fn_with_state(proxies.clone(), extract::with_client_address))
                .layer(axum::middleware::from_fn_with_state(forwarded_clients, edge::cap_forwarded_clients))
                .layer(axum::middleware::from_fn_with_state(body_timeout, edge::body_progress))
                .layer(CatchPanicLayer::custom(error::panic_response)),
        )
}

/// How loud a 5xx answer or a broken response stream is, by what it says about us: ERROR only
/// for our own faults (500, whose cause `ServiceError` already logged); a dependency that failed
/// (502, 503, 504) or a stream that broke off is a WARN; a refusal such as 507 (quota) or 501 is
/// ordinary (INFO).
fn failure_level(failure: &ServerErrorsFailureClass) -> tracing::Level {
    match failure {
        ServerErrorsFailureClass::StatusCode(StatusCode::INTERNAL_SERVER_ERROR) => tracing::Level::ERROR,
        ServerErrorsFailureClass::StatusCode(
            StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT,
        )
        | ServerErrorsFailureClass::Error(_) => tracing::Level::WARN,
        ServerErrorsFailureClass::StatusCode(_) => tracing::Level::INFO,
    }
}

/// Logs a 5xx answer or a broken response stream at its [`failure_level`].
fn log_failure(failure: ServerErrorsFailureClass, latency: Duration, _span: &Span) {
    let latency_ms = latency.as_millis();
    let level = failure_level(&failure);
    match failure {
        ServerErrorsFailureClass::StatusCode(status) => {
            let status = status.as_u16();
            match level {
                tracing::Level::ERROR => tracing::error!(status, latency_ms, "response failed"),
                tracing::Level::WARN => tracing::warn!(status, latency_ms, "a dependency failed"),
                _ => tracing::info!(status, latency_ms, "request refused"),
            }
        }
        ServerErrorsFailureClass::Error(error) => tracing::warn!(%error, latency_ms, "response stream broke off"),
    }
}

/// After a request that may have changed a tree (any method but reads), wakes every master's
/// change-event hub so subscribers hear of it at once (`service::tree::events`).
async fn poke_after_writes(
    axum::extract::State(state): axum::extract::State<Context>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let reads = matches!(request.method().as_str(), "GET" | "HEAD" | "OPTIONS" | "PROPFIND");
    let response = next.run(request).await;
    if !reads && response.status().is_success() {
        state.events().poke();
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_own_faults_are_logged_as_errors() {
        let level =
            |status: u16| failure_level(&ServerErrorsFailureClass::StatusCode(StatusCode::from_u16(status).unwrap()));
        assert_eq!(level(500), tracing::Level::ERROR);
        for dependency in [502, 503, 504] {
            assert_eq!(level(dependency), tracing::Level::WARN, "{dependency}");
        }
        for refusal in [501, 507, 505] {
            assert_eq!(level(refusal), tracing::Level::INFO, "{refusal}");
        }
        assert_eq!(failure_level(&ServerErrorsFailureClass::Error("reset".into())), tracing::Level::WARN);
    }
}
