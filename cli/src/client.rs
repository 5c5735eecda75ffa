//! The HTTP side of the client: the server's `/api/v1` with the signed-in session's access
//! token, refreshed with the refresh token shortly before it expires or when the server says it
//! has (refresh tokens rotate, and reusing one revokes the session, so refreshes are
//! serialised, across processes too); error answers become [`CliError`]s.

use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::config::Credentials;
use crate::error::{CliError, CliResult, ExitKind};

/// Refresh when the access token has less than this left.
const REFRESH_MARGIN_SECONDS: i64 = 60;

/// How often a transient failure of an idempotent request is tried again.
pub const ATTEMPTS: u32 = 5;

pub fn now_unix() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Unix seconds of an RFC 3339 time (0 when it does not parse).
pub fn unix_of(rfc3339: &str) -> i64 {
    time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .map_or(0, |t| t.unix_timestamp())
}

/// A plain HTTP client: keep-alive, no overall timeout (uploads of large chunks take long), a
/// connect timeout so an unreachable server fails fast.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .pool_max_idle_per_host(16)
        .user_agent(concat!("nubo-cli/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("the HTTP client builds")
}

/// `server` as a base URL: a scheme (https by default, never http unless written: see
/// [`explain_https_failure`]), no trailing slash, no `/api/v1`.
pub fn normalise_server(server: &str) -> String {
    let trimmed = server.trim().trim_end_matches('/');
    let trimmed = trimmed.strip_suffix("/api/v1").unwrap_or(trimmed);
    if trimmed.starts_with("http://") || trimmed.starts_with("https://") {
        trimmed.to_owned()
    } else {
        format!("https://{trimmed}")
    }
}

/// The server, reached with (or without) a signed-in session.
#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    pub server: String,
    session: Option<Arc<Mutex<Credentials>>>,
}

impl Api {
    pub fn anonymous(server: &str) -> Api {
        Api { http: http_client(), server: normalise_server(server), session: None }
    }

    /// The stored session's server; 3 (auth needed) when nobody is signed in.
    pub fn signed_in() -> CliResult<Api> {
        let credentials = Credentials::load()?.ok_or_else(|| CliError::auth_needed("not signed in"))?;
        Ok(Api {
            http: http_client(),
            server: credentials.server.clone(),
            session: Some(Arc::new(Mutex::new(credentials))),
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.server)
    }

    /// A URL the server handed out relative to the site (download links) made absolute.
    pub fn site_url(&self, relative: &str) -> String {
        if relative.starts_with("http://") || relative.starts_with("https://") {
            relative.to_owned()
        } else {
            format!("{}{relative}", self.server)
        }
    }

    pub async fn credentials(&self) -> Option<Credentials> {
        match &self.session {
            Some(session) => Some(session.lock().await.clone()),
            None => None,
        }
    }

    /// The access token to send now, refreshed first when it is about to expire.
    async fn access_token(&self) -> CliResult<Option<String>> {
        let Some(session) = &self.session else { return Ok(None) };
        let current = session.lock().await.clone();
        if current.access_expires - now_unix() > REFRESH_MARGIN_SECONDS {
            return Ok(Some(current.access_token));
        }
        self.refresh(&current.access_token).await.map(Some)
    }

    /// Trades the refresh token for a new pair, unless another request already did since
    /// `stale` was handed out; answers the access token to use.
    async fn refresh(&self, stale: &str) -> CliResult<String> {
        let Some(session) = &self.session else {
            return Err(CliError::auth_needed("the server wants a signed-in session"));
        };
        let mut credentials = session.lock().await;
        if credentials.access_token != stale {
            return Ok(credentials.access_token.clone());
        }
        // Another `nubo` process may have traded the same refresh token a moment ago: under the
        // lock, a stored pair newer than ours is taken instead of refreshing again.
        let _refreshing = Credentials::lock_for_refresh().await?;
        if let Some(stored) = Credentials::load()?
            && stored.server == credentials.server
            && stored.refresh_token != credentials.refresh_token
        {
            *credentials = stored;
            if credentials.access_token != stale && credentials.access_expires - now_unix() > REFRESH_MARGIN_SECONDS {
                return Ok(credentials.access_token.clone());
            }
        }
        if credentials.refresh_expires <= now_unix() {
            return Err(CliError::auth_needed("the session has expired"));
        }
        let response = self
            .http
            .post(self.url("/user/session/refresh"))
            .bearer_auth(&credentials.refresh_token)
            .send()
            .await
            .map_err(|e| CliError::network(&self.server, &e))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| CliError::network(&self.server, &e))?;
        if !status.is_success() {
            let mut error = CliError::from_answer(status.as_u16(), &body);
            if status == StatusCode::UNAUTHORIZED {
                error.message = format!("the session has ended ({})", error.message);
            }
            return Err(error);
        }
        let pair: Value = serde_json::from_str(&body).unwrap_or_default();
        let (Some(access), Some(refresh)) = (pair["access_token"].as_str(), pair["refresh_token"].as_str()) else {
            return Err(CliError::new(ExitKind::Failed, "the refresh answer carries no tokens"));
        };
        credentials.access_token = access.to_owned();
        credentials.refresh_token = refresh.to_owned();
        credentials.access_expires = pair["access_expires"].as_str().map_or(now_unix() + 3000, unix_of);
        credentials.refresh_expires = pair["refresh_expires"].as_str().map_or(now_unix() + 86_400, unix_of);
        credentials.save()?;
        Ok(credentials.access_token.clone())
    }

    /// Sends the request `build` makes (with the access token when signed in); a 401 refreshes
    /// the session once and sends it again. Error answers become errors.
    pub async fn send(&self, build: impl Fn(&reqwest::Client) -> RequestBuilder) -> CliResult<Response> {
        let mut token = self.access_token().await?;
        for attempt in 0..2 {
            let mut request = build(&self.http);
            if let Some(token) = &token {
                request = request.bearer_auth(token);
            }
            let response = request.send().await.map_err(|e| CliError::network(&self.server, &e))?;
            if response.status() == StatusCode::UNAUTHORIZED
                && attempt == 0
                && let Some(stale) = &token
            {
                token = Some(self.refresh(stale).await?);
                continue;
            }
            return checked(response).await;
        }
        unreachable!("the loop returns on its second pass")
    }

    /// [`Self::send`], tried again after transient failures (for idempotent requests).
    pub async fn send_retrying(&self, build: impl Fn(&reqwest::Client) -> RequestBuilder) -> CliResult<Response> {
        let mut attempt = 1;
        loop {
            match self.send(&build).await {
                Err(err) if err.is_transient() && attempt < ATTEMPTS => {
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// `method path` with an optional JSON body; the answer's JSON (`null` for 204).
    pub async fn json<T: DeserializeOwned>(&self, method: Method, path: &str, body: Option<&Value>) -> CliResult<T> {
        let url = self.url(path);
        let build = |http: &reqwest::Client| {
            let request = http.request(method.clone(), &url);
            match body {
                Some(body) => request.json(body),
                None => request,
            }
        };
        let response = if method == Method::GET { self.send_retrying(build).await? } else { self.send(build).await? };
        read_json(&self.server, response).await
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> CliResult<T> {
        self.json(Method::GET, path, None).await
    }
}

/// Waits before attempt `attempt + 1`: 0.5 s, 1 s, 2 s, 4 s.
pub fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(500 << (attempt - 1).min(4))
}

/// The response when it succeeded; its error body as an error otherwise.
pub async fn checked(response: Response) -> CliResult<Response> {
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status().as_u16();
    let site = response.url().origin().ascii_serialization();
    let html = is_html(&response);
    let body = response.text().await.unwrap_or_default();
    let mut error = CliError::from_answer(status, &body);
    if html || body.trim_start().starts_with('<') {
        error.message = format!("{site} answered HTTP {status} with a web page, not with Nubo's API");
        if matches!(status, 404 | 405) {
            error.hint = Some(CHECK_THE_ADDRESS.to_owned());
        }
    }
    Err(error)
}

/// What to check when a web page answers where the API should.
const CHECK_THE_ADDRESS: &str = "check the server address: it is the Nubo site's own address (`https://cloud.example.org`, \
     what the browser shows on its sign-in page), and nothing in between (a proxy's error page) must answer for it";

fn is_html(response: &Response) -> bool {
    let content_type = response.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    content_type.is_some_and(|value| value.trim_start().to_ascii_lowercase().starts_with("text/html"))
}

/// The JSON of a successful answer (`null` when it has no body).
pub async fn read_json<T: DeserializeOwned>(server: &str, response: Response) -> CliResult<T> {
    let html = is_html(&response);
    let bytes = response.bytes().await.map_err(|e| CliError::network(server, &e))?;
    let value = if bytes.is_empty() { Ok(Value::Null) } else { serde_json::from_slice::<Value>(&bytes) };
    if value.is_err() && (html || bytes.trim_ascii_start().starts_with(b"<")) {
        return Err(CliError::new(ExitKind::Failed, format!("{server} answered with a web page, not with Nubo's API"))
            .with_hint(CHECK_THE_ADDRESS));
    }
    value.and_then(serde_json::from_value).map_err(|e| {
        CliError::new(ExitKind::Failed, format!("the server's answer is not what this client expects: {e}"))
    })
}

/// `err`, a failed connection to an https address, said plainly when the same address answers
/// plain http: the client never switches to an unencrypted connection by itself (a password
/// would cross the network readable), the user chooses to.
pub async fn explain_https_failure(api: &Api, err: CliError) -> CliError {
    let Some(host) = api.server.strip_prefix("https://") else { return err };
    if err.kind != ExitKind::Network {
        return err;
    }
    // Only the address is asked for: nothing of the user's goes over plain http.
    let probe = api.http.get(format!("http://{host}/api/v1/")).timeout(Duration::from_secs(5)).send().await;
    if probe.is_err() {
        return err;
    }
    CliError::new(ExitKind::Network, format!("{host} speaks http, not https")).with_hint(format!(
        "use http://{host} (`nubo login http://{host}`) if the network between you is trusted: http is not \
         encrypted; otherwise ask its administrator to turn https on"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_addresses_become_base_urls() {
        assert_eq!(normalise_server("cloud.example.org/"), "https://cloud.example.org");
        assert_eq!(normalise_server("http://127.0.0.1:5212/api/v1"), "http://127.0.0.1:5212");
        assert_eq!(unix_of("1970-01-01T00:01:40Z"), 100);
        assert_eq!(unix_of("not a time"), 0);
    }
}
