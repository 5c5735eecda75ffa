//! A scripted WOPI client: opens a session through the API as the web app would, then calls
//! the WOPI host as Collabora Online or OnlyOffice would (access token in the query, operations
//! in `X-WOPI-Override`).

use reqwest::{Method, RequestBuilder, Response};
use serde_json::{Value, json};

use crate::{Session, TestApp};

/// One WOPI session on one file, talking to the master at `base`.
#[derive(Debug, Clone)]
pub struct WopiClient {
    pub client: reqwest::Client,
    /// Where the WOPI host is reached (a master's address).
    pub base: String,
    pub file: String,
    pub token: String,
    /// `access_token_ttl` of the session (milliseconds since the epoch).
    pub ttl: i64,
}

impl TestApp {
    /// `POST /file/{file}/wopi_session` with `mode`; answers the response.
    pub async fn wopi_session(&self, session: &Session, file: &str, mode: &str) -> Response {
        self.call(
            Method::POST,
            &format!("/file/{file}/wopi_session"),
            Some(&session.access),
            Some(json!({"mode": mode})),
        )
        .await
    }

    /// A WOPI client for a session in `mode` (`view` or `edit`) on `file`.
    pub async fn wopi(&self, session: &Session, file: &str, mode: &str) -> WopiClient {
        let response = self.wopi_session(session, file, mode).await;
        assert_eq!(response.status(), 200, "wopi session: {}", response.text().await.unwrap_or_default());
        let body: Value = response.json().await.unwrap();
        WopiClient {
            client: self.client.clone(),
            base: self.base_url.clone(),
            file: file.to_owned(),
            token: body["access_token"].as_str().unwrap().to_owned(),
            ttl: body["access_token_ttl"].as_i64().unwrap(),
        }
    }
}

impl WopiClient {
    /// The same session on another file (a token used out of its scope).
    pub fn on_file(&self, file: &str) -> Self {
        Self { file: file.to_owned(), ..self.clone() }
    }

    /// The same session with another token.
    pub fn with_token(&self, token: &str) -> Self {
        Self { token: token.to_owned(), ..self.clone() }
    }

    /// The same session through another master.
    pub fn through(&self, base: &str) -> Self {
        Self { base: base.to_owned(), ..self.clone() }
    }

    pub fn url(&self, suffix: &str) -> String {
        format!("{}/wopi/files/{}{suffix}?access_token={}", self.base, self.file, self.token)
    }

    pub fn request(&self, method: Method, suffix: &str) -> RequestBuilder {
        self.client.request(method, self.url(suffix))
    }

    pub async fn check_file_info(&self) -> Response {
        self.request(Method::GET, "").send().await.unwrap()
    }

    /// CheckFileInfo, expected to succeed.
    pub async fn info(&self) -> Value {
        let response = self.check_file_info().await;
        assert_eq!(response.status(), 200, "CheckFileInfo");
        response.json().await.unwrap()
    }

    pub async fn get_file(&self) -> Response {
        self.request(Method::GET, "/contents").send().await.unwrap()
    }

    pub async fn put_file(&self, lock: Option<&str>, body: Vec<u8>) -> Response {
        let mut request = self.request(Method::POST, "/contents").header("X-WOPI-Override", "PUT");
        if let Some(lock) = lock {
            request = request.header("X-WOPI-Lock", lock);
        }
        request.body(body).send().await.unwrap()
    }

    /// `POST /wopi/files/{id}` with `X-WOPI-Override: operation` and `headers`.
    pub async fn operation(&self, operation: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Response {
        let mut request = self.request(Method::POST, "").header("X-WOPI-Override", operation);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(body).send().await.unwrap()
    }

    pub async fn lock(&self, lock: &str) -> Response {
        self.operation("LOCK", &[("X-WOPI-Lock", lock)], Vec::new()).await
    }

    pub async fn get_lock(&self) -> Response {
        self.operation("GET_LOCK", &[], Vec::new()).await
    }
}

/// The `X-WOPI-Lock` header of an answer (`None` when absent).
pub fn lock_header(response: &Response) -> Option<String> {
    response.headers().get("x-wopi-lock").map(|v| v.to_str().unwrap().to_owned())
}
