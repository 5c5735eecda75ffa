//! The HTTP front end: the `/api/v1` router and the middleware every request passes through
//! (request ids, tracing, panic capture, body limits, the uniform error body).

pub mod api;
pub mod content_safety;
pub mod dav;
pub mod download;
pub mod error;
pub mod extract;
pub mod node_rpc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, Method, Request, Uri, header};
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

use crate::app::AppState;
use crate::service::{ErrorKind, ServiceError};

/// Builds the complete application router.
pub fn router(state: AppState) -> Router {
    let (api, _doc) = api::routes();
    let request_id = HeaderName::from_static(error::REQUEST_ID_HEADER);
    let max_json_body = state.config().max_json_body;
    // Bodies under /dav are streams the services meter themselves: no JSON body limit there.
    let dav = axum::routing::any(dav::serve).layer(DefaultBodyLimit::disable());
    api.route(dav::PREFIX, dav.clone())
        .route("/dav/", dav.clone())
        .route("/dav/{*path}", dav)
        .fallback(unknown_route)
        .layer(DefaultBodyLimit::max(max_json_body))
        .with_state(state)
        .layer(
            ServiceBuilder::new()
                .layer(SetSensitiveRequestHeadersLayer::new([header::AUTHORIZATION, header::COOKIE]))
                .layer(SetRequestIdLayer::new(request_id.clone(), MakeRequestUuid))
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(|request: &Request<_>| {
                            let id = request
                                .headers()
                                .get(error::REQUEST_ID_HEADER)
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or_default();
                            tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id = %id)
                        })
                        .on_response(DefaultOnResponse::new().level(Level::INFO)),
                )
                .layer(PropagateRequestIdLayer::new(request_id))
                .layer(axum::middleware::from_fn(error::uniform_errors))
                .layer(CatchPanicLayer::custom(error::panic_response)),
        )
}

async fn unknown_route(method: Method, uri: Uri) -> ServiceError {
    ServiceError::new(ErrorKind::NotFound, "route.not_found", format!("no route for {method} {}", uri.path()))
}
