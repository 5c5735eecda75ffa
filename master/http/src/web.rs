//! The browser app (`web/`, built into the binary by `build.rs`): its files at their paths,
//! hashed assets cached for a year, and `index.html` for every other path (the app routes those
//! itself). Every answer carries the app's Content-Security-Policy: script, style, images and
//! connections from this origin only, so the app needs nothing from the internet and an injected
//! inline script does not run. API and WebDAV paths never fall through to the app.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use axum::extract::State;
use nubo_model::domain::captcha::CaptchaProvider;

use crate::error::ErrorResponse;
use nubo_service::context::Context;
use nubo_service::error::{ErrorKind, ServiceError};
use nubo_service::error_codes as codes;
use nubo_service::{identity::captcha, storage::nodes};

#[derive(rust_embed::Embed)]
#[folder = "$OUT_DIR/web"]
#[allow_missing = true]
struct WebApp;

/// The policy of every page and asset of the app. `blob:` and `data:` images are previews and
/// icons the app makes itself; `blob:` frames are the PDF viewer showing a file it fetched;
/// other frames are the app's own. The
/// pages also may connect to the storage nodes ([`page_csp`]), where uploads go directly.
pub const APP_CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
     media-src 'self' blob:; font-src 'self'; connect-src 'self'; frame-src 'self' blob:; worker-src 'self'; \
     object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The origins beyond the app's own that a page of the app may use, as the settings say.
#[derive(Debug, Default)]
pub struct PageSources {
    /// The enabled storage nodes (`connect-src`: uploads go to them directly).
    pub nodes: Vec<String>,
    /// The captcha providers some scene uses (their scripts and frames).
    pub captchas: Vec<CaptchaProvider>,
    /// The public avatar service (`img-src`: its avatars are redirects to it).
    pub avatar_service: Option<String>,
    /// The WOPI applications' origins (`frame-src` and `form-action`: the page posts the access
    /// token to the application's action URL in a frame).
    pub wopi: Vec<String>,
}

/// [`APP_CSP`] with the sources of [`PageSources`] added to their directives.
pub fn page_csp(sources: &PageSources) -> String {
    let node_origins = &sources.nodes;
    let captchas = &sources.captchas;
    let with = |directive: &str, extra: &mut dyn Iterator<Item = &str>| {
        extra.fold(directive.to_owned(), |mut all, source| {
            all.push(' ');
            all.push_str(source);
            all
        })
    };
    let captcha_sources = || captchas.iter().flat_map(|p| p.page_sources().iter().copied());
    let nodes = || node_origins.iter().map(String::as_str);
    let wopi = || sources.wopi.iter().map(String::as_str);
    // Files on a node are shown from the node: images and media load from its signed URLs.
    let images = sources.avatar_service.iter().map(String::as_str).chain(nodes());
    APP_CSP
        .replacen("connect-src 'self'", &with("connect-src 'self'", &mut nodes()), 1)
        .replacen("script-src 'self'", &with("script-src 'self'", &mut captcha_sources()), 1)
        .replacen("frame-src 'self'", &with("frame-src 'self'", &mut captcha_sources().chain(wopi())), 1)
        .replacen("form-action 'self'", &with("form-action 'self'", &mut wopi()), 1)
        .replacen("img-src 'self' data: blob:", &with("img-src 'self' data: blob:", &mut images.into_iter()), 1)
        .replacen("media-src 'self' blob:", &with("media-src 'self' blob:", &mut nodes()), 1)
}

/// Where the bundler puts content-hashed files: a new build gives them new names.
const HASHED_ASSETS: &str = "assets/";

/// Whether `path` belongs to the API or WebDAV (whose unknown paths answer the JSON 404).
fn is_service_path(path: &str) -> bool {
    ["/api", "/dav", "/wopi"]
        .iter()
        .any(|prefix| path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
}

fn unknown_route(method: &Method, path: &str) -> Response {
    ServiceError::new(ErrorKind::NotFound, codes::ROUTE_NOT_FOUND, format!("no route for {method} {path}"))
        .into_response()
}

/// Answers every request no route took: a file of the app, or `index.html`.
pub async fn serve(State(ctx): State<Context>, method: Method, uri: Uri, request: HeaderMap) -> Response {
    let path = uri.path();
    if is_service_path(path) || (method != Method::GET && method != Method::HEAD) {
        return unknown_route(&method, path);
    }
    let relative = path.trim_start_matches('/');
    if let Some(file) = WebApp::get(relative).filter(|_| !relative.is_empty()) {
        let cache =
            if relative.starts_with(HASHED_ASSETS) { "public, max-age=31536000, immutable" } else { "no-cache" };
        return respond(&method, &request, relative, file, cache, APP_CSP.to_owned());
    }
    // A missing asset (`assets/...`, or a top-level file such as `robots.txt`) must not be
    // answered with a page; deeper paths are the app's routes, whose folder names may have dots.
    if relative.starts_with(HASHED_ASSETS) || (!relative.contains('/') && relative.contains('.')) {
        return unknown_route(&method, path);
    }
    match WebApp::get("index.html") {
        Some(index) => {
            // A node the database cannot list right now is only a direct upload refused later.
            let origins = nodes::upload_origins(&ctx).await.unwrap_or_default();
            // Likewise a captcha widget that does not load: its form answers 422 and says why;
            // and avatars of the public avatar service, which are redirects to it.
            let sources = PageSources {
                nodes: origins,
                captchas: captcha::page_providers(&ctx).await.unwrap_or_default(),
                avatar_service: nubo_service::identity::avatars::service_origin(&ctx).await.ok().flatten(),
                // Without the registry, "open with" a WOPI application shows a blocked frame.
                wopi: nubo_service::office::viewers::registry(&ctx)
                    .await
                    .map(|r| r.wopi_origins.clone())
                    .unwrap_or_default(),
            };
            respond(&method, &request, "index.html", index, "no-cache", page_csp(&sources))
        }
        None => ServiceError::new(
            ErrorKind::Unavailable,
            codes::WEB_NOT_BUILT,
            "this master was built without its web app: install Node.js and npm and build it again (see README)",
        )
        .into_response(),
    }
}

fn respond(
    method: &Method,
    request: &HeaderMap,
    name: &str,
    file: rust_embed::EmbeddedFile,
    cache: &'static str,
    policy: String,
) -> Response {
    let etag = format!("\"{}\"", hex(&file.metadata.sha256_hash()[..16]));
    let mut headers = HeaderMap::new();
    let mime = mime_guess::from_path(name).first_or_octet_stream();
    let content_type = match mime.type_() {
        mime_guess::mime::TEXT | mime_guess::mime::APPLICATION if mime.get_param("charset").is_none() => {
            format!("{}; charset=utf-8", mime.essence_str())
        }
        _ => mime.essence_str().to_owned(),
    };
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(&content_type).unwrap_or(HeaderValue::from_static("application/octet-stream")),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(policy) = HeaderValue::from_str(&policy) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    let unchanged = request
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.split(',').any(|tag| tag.trim() == etag));
    if unchanged {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    let body = if method == Method::HEAD { Body::empty() } else { Body::from(file.data.into_owned()) };
    (StatusCode::OK, headers, body).into_response()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_may_connect_to_the_nodes_and_nowhere_else() {
        let nodes = vec!["https://node-1.example".to_owned(), "http://10.0.0.2:5213".to_owned()];
        let policy = page_csp(&PageSources { nodes, ..PageSources::default() });
        assert!(policy.contains("connect-src 'self' https://node-1.example http://10.0.0.2:5213;"), "{policy}");
        // Files on the nodes are shown from there.
        assert!(policy.contains("img-src 'self' data: blob: https://node-1.example http://10.0.0.2:5213;"), "{policy}");
        assert!(policy.contains("media-src 'self' blob: https://node-1.example http://10.0.0.2:5213;"), "{policy}");
        assert!(policy.contains("frame-src 'self' blob:;"), "{policy}");
        assert_eq!(page_csp(&PageSources::default()), APP_CSP);
    }

    #[test]
    fn the_avatar_service_may_serve_images() {
        let sources =
            PageSources { avatar_service: Some("https://www.gravatar.com".to_owned()), ..PageSources::default() };
        let policy = page_csp(&sources);
        assert!(policy.contains("img-src 'self' data: blob: https://www.gravatar.com;"), "{policy}");
    }

    #[test]
    fn captcha_providers_in_use_may_load_their_scripts_and_frames() {
        let only = |provider| page_csp(&PageSources { captchas: vec![provider], ..PageSources::default() });
        let policy = only(CaptchaProvider::Turnstile);
        assert!(policy.contains("script-src 'self' https://challenges.cloudflare.com;"), "{policy}");
        assert!(policy.contains("frame-src 'self' https://challenges.cloudflare.com blob:;"), "{policy}");
        assert!(!policy.contains("google"), "{policy}");
        let policy = only(CaptchaProvider::Recaptcha);
        assert!(
            policy.contains("script-src 'self' https://www.google.com/recaptcha/ https://www.gstatic.com/recaptcha/;")
        );
        assert_eq!(only(CaptchaProvider::Builtin), APP_CSP, "the built-in image is a data: URI");
    }

    #[test]
    fn wopi_applications_may_be_framed_and_posted_to() {
        let wopi = vec!["https://office.example".to_owned()];
        let policy = page_csp(&PageSources { wopi, ..PageSources::default() });
        assert!(policy.contains("frame-src 'self' https://office.example blob:;"), "{policy}");
        assert!(policy.contains("form-action 'self' https://office.example;"), "{policy}");
        assert!(policy.contains("connect-src 'self';"), "{policy}");
    }

    #[test]
    fn service_paths_never_reach_the_app() {
        for service in ["/api", "/api/", "/api/v1/nothing", "/dav", "/dav/x", "/wopi/files/1"] {
            assert!(is_service_path(service), "{service}");
        }
        for app in ["/", "/files/api", "/apiary", "/davinci", "/login"] {
            assert!(!is_service_path(app), "{app}");
        }
    }
}
