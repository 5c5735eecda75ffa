//! The OAuth 2.0 providers (authorization-code flow with PKCE S256 and `state`): the two
//! presets `github` (a code-hosting kind: token endpoint, then its `user` and `user/emails`
//! APIs) and `qq` (a messaging kind: token endpoint with `fmt=json`, then its OpenID endpoint
//! for openid/unionid and `get_user_info` for the nickname), and the generic OpenID Connect
//! provider `oidc` (endpoints from the issuer's discovery, a `nonce` kept with the state, and
//! the person read from the checked ID token: `identity::providers::oidc`). The flow's state waits in the
//! `KvStore` for ten minutes and one use; a finished flow leaves a sign-in ticket there (hashed,
//! two minutes, one use) that `POST /user/session` exchanges for tokens, so no token ever
//! travels in a URL. Linking and registering are `service::identity::identities`'.

use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine;
use nubo_model::domain::ids::{GroupId, UserId};
use nubo_model::domain::settings::AuthMethod;
use nubo_model::domain::site_settings::{OAuthClient, OidcClient};
use reqwest::Url;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::providers::oidc;
use crate::settings::site;

/// How long a started flow waits for its callback.
const FLOW_LIFETIME: Duration = Duration::from_secs(10 * 60);
/// How long the web app has to exchange a sign-in ticket.
const TICKET_LIFETIME: Duration = Duration::from_secs(2 * 60);
/// Each call to a provider; a provider that hangs fails the callback, not the server.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// An OAuth provider this site knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    Github,
    Qq,
    Oidc,
}

impl Provider {
    pub const ALL: [Provider; 3] = [Provider::Github, Provider::Qq, Provider::Oidc];

    /// The provider a path segment names; `auth.oauth_provider_unknown` (404) otherwise.
    pub fn parse(name: &str) -> ServiceResult<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name).ok_or_else(|| {
            ServiceError::not_found(
                codes::AUTH_OAUTH_PROVIDER_UNKNOWN,
                "no such OAuth provider: use github, qq or oidc",
            )
        })
    }

    /// The provider's name in paths, settings and `auth_identities`.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Github => "github",
            Provider::Qq => "qq",
            Provider::Oidc => "oidc",
        }
    }

    pub fn method(self) -> AuthMethod {
        match self {
            Provider::Github => AuthMethod::Github,
            Provider::Qq => AuthMethod::Qq,
            Provider::Oidc => AuthMethod::Oidc,
        }
    }

    pub fn from_method(method: AuthMethod) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.method() == method)
    }

    /// The scopes a preset asks for (`oidc` asks for its `oidc_scopes` setting).
    fn scope(self) -> &'static str {
        match self {
            Provider::Github => "read:user user:email",
            Provider::Qq => "get_user_info",
            Provider::Oidc => "openid",
        }
    }
}

/// What the `oidc` provider adds to its settings: the discovered endpoints and what reading
/// its ID tokens needs.
pub struct OidcSettings {
    pub discovery: std::sync::Arc<oidc::Discovery>,
    /// The issuer may be on a private address (`oidc_internal`).
    pub internal: bool,
    /// The claim whose values `group_map` maps (`oidc_group_claim`); empty: no mapping.
    pub group_claim: String,
    /// `oidc_group_map`, in order: a claim value and the group it puts a user in.
    pub group_map: Vec<(String, GroupId)>,
}

/// A provider's settings, checked to be usable.
pub struct ProviderSettings {
    pub provider: Provider,
    client_id: String,
    client_secret: String,
    authorize_url: String,
    token_url: String,
    api_url: String,
    /// `{site_url}/api/v1/user/oauth/{provider}/callback`, registered at the provider.
    redirect_uri: String,
    /// The scopes asked for, space-separated.
    scope: String,
    /// Set for `oidc` only.
    pub oidc: Option<OidcSettings>,
}

fn not_configured(what: &str) -> ServiceError {
    ServiceError::new(
        ErrorKind::Unavailable,
        codes::AUTH_OAUTH_NOT_CONFIGURED,
        format!("sign-in with this provider is not configured ({what}): ask an administrator"),
    )
}

/// The provider's settings; 503 `auth.oauth_not_configured` while it lacks a client id, its
/// endpoints, or the site its callback URL is built on.
pub async fn settings(ctx: &Context, provider: Provider) -> ServiceResult<ProviderSettings> {
    let settings = site::current(ctx).await?;
    let client = match provider {
        Provider::Github => &settings.github,
        Provider::Qq => &settings.qq,
        Provider::Oidc => return oidc_settings(ctx).await,
    };
    let OAuthClient { client_id, client_secret, authorize_url, token_url, api_url } = client.clone();
    let site_url = &settings.site_url;
    if client_id.is_empty() {
        return Err(not_configured("no client id"));
    }
    for url in [&authorize_url, &token_url, &api_url] {
        if Url::parse(url).is_err() {
            return Err(not_configured("an endpoint is not an absolute URL"));
        }
    }
    if !site_url.starts_with("http") {
        return Err(not_configured("the site_url setting is empty"));
    }
    let redirect_uri = format!("{}{}", site_url.trim_end_matches('/'), (ctx.links().sign_in_callback)(provider.name()));
    Ok(ProviderSettings {
        provider,
        client_id,
        client_secret,
        authorize_url,
        token_url,
        api_url: api_url.trim_end_matches('/').to_owned(),
        redirect_uri,
        scope: provider.scope().to_owned(),
        oidc: None,
    })
}

/// The `oidc` provider's settings, its endpoints from the issuer's discovery document; 503
/// `auth.oauth_not_configured` without a client id, an issuer or `site_url`, 502
/// `auth.oidc_discovery_failed` when the discovery cannot be had.
async fn oidc_settings(ctx: &Context) -> ServiceResult<ProviderSettings> {
    let settings = site::current(ctx).await?;
    let OidcClient { issuer, internal, client_id, client_secret, scopes, group_claim, group_map, .. } =
        settings.oidc.clone();
    let site_url = &settings.site_url;
    if client_id.is_empty() {
        return Err(not_configured("no client id"));
    }
    if issuer.is_empty() {
        return Err(not_configured("no issuer"));
    }
    if !site_url.starts_with("http") {
        return Err(not_configured("the site_url setting is empty"));
    }
    let discovery = oidc::discover(&issuer, internal).await?;
    // `openid` makes it an OpenID Connect request; the rest is the administrator's choice.
    let mut scope: Vec<&str> = scopes.split_whitespace().collect();
    if !scope.contains(&"openid") {
        scope.insert(0, "openid");
    }
    let redirect_uri =
        format!("{}{}", site_url.trim_end_matches('/'), (ctx.links().sign_in_callback)(Provider::Oidc.name()));
    Ok(ProviderSettings {
        provider: Provider::Oidc,
        client_id,
        client_secret,
        authorize_url: discovery.authorization_endpoint.clone(),
        token_url: discovery.token_endpoint.clone(),
        api_url: String::new(),
        redirect_uri,
        scope: scope.join(" "),
        oidc: Some(OidcSettings { discovery, internal, group_claim, group_map }),
    })
}

fn random_token() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

/// The PKCE S256 challenge of a verifier (RFC 7636 4.2).
fn code_challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// What a started flow remembers until its callback.
#[derive(Debug, Serialize, Deserialize)]
pub struct Flow {
    pub provider: Provider,
    /// The PKCE code verifier (43 base64url characters).
    verifier: String,
    /// The signed-in user who asked to link the provider; `None` for a sign-in.
    pub link_user: Option<UserId>,
    /// The OpenID Connect `nonce` sent with the authorization request; its ID token must carry
    /// it. Taken with the state, so it serves once.
    #[serde(default)]
    nonce: Option<String>,
}

fn flow_key(provider: Provider, state: &str) -> String {
    format!("oauth:state:{}:{state}", provider.name())
}

/// Starts a flow: remembers its state and verifier, and answers the provider's authorize URL.
pub async fn begin(ctx: &Context, settings: &ProviderSettings, link_user: Option<UserId>) -> ServiceResult<String> {
    let state = random_token();
    let nonce = settings.oidc.is_some().then(random_token);
    let flow = Flow { provider: settings.provider, verifier: random_token(), link_user, nonce };
    let mut url = Url::parse(&settings.authorize_url).map_err(ServiceError::internal)?;
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &settings.client_id)
        .append_pair("redirect_uri", &settings.redirect_uri)
        .append_pair("scope", &settings.scope)
        .append_pair("state", &state)
        .append_pair("code_challenge", &code_challenge(&flow.verifier))
        .append_pair("code_challenge_method", "S256");
    if let Some(nonce) = &flow.nonce {
        url.query_pairs_mut().append_pair("nonce", nonce);
    }
    let text = serde_json::to_string(&flow).map_err(ServiceError::internal)?;
    ctx.store().set(&flow_key(settings.provider, &state), &text, Some(FLOW_LIFETIME)).await?;
    Ok(url.into())
}

pub fn state_invalid() -> ServiceError {
    ServiceError::new(
        ErrorKind::Unauthorized,
        codes::AUTH_OAUTH_STATE_INVALID,
        "this sign-in link is unknown, expired or already used: start again",
    )
}

/// The flow `state` names, taken so that it cannot serve twice.
pub async fn take_flow(ctx: &Context, provider: Provider, state: &str) -> ServiceResult<Flow> {
    if state.is_empty() || state.len() > 128 {
        return Err(state_invalid());
    }
    let text = ctx.store().take(&flow_key(provider, state)).await?.ok_or_else(state_invalid)?;
    serde_json::from_str(&text).map_err(ServiceError::internal)
}

/// The person the provider vouches for.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The provider's stable user id (GitHub's numeric id; QQ's unionid, else openid).
    pub identifier: String,
    /// What the person is called there (GitHub login, QQ nickname).
    pub display: String,
    /// A verified e-mail address, when the provider gives one (QQ never does).
    pub email: Option<String>,
    /// The values of the group claim (`oidc` with `oidc_group_claim` set; empty otherwise).
    pub groups: Vec<String>,
}

/// The provider failed or refused: the log gets `detail`, the person a generic message.
pub fn exchange_failed(provider: Provider, detail: impl std::fmt::Display) -> ServiceError {
    tracing::warn!(provider = provider.name(), %detail, "OAuth provider refused or failed");
    ServiceError::new(
        ErrorKind::BadGateway,
        codes::AUTH_OAUTH_EXCHANGE_FAILED,
        "the provider did not complete the sign-in: try again",
    )
}

fn http() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("Nubo/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default()
    })
}

/// Sends a provider call and reads its JSON answer; anything else fails the flow.
async fn call<T: DeserializeOwned>(
    provider: Provider,
    what: &str,
    request: reqwest::RequestBuilder,
) -> ServiceResult<T> {
    let response = request.send().await.map_err(|e| exchange_failed(provider, format_args!("{what}: {e}")))?;
    let status = response.status();
    let body = response.text().await.map_err(|e| exchange_failed(provider, format_args!("{what}: {e}")))?;
    if !status.is_success() {
        return Err(exchange_failed(provider, format_args!("{what} answered {status}: {body:.500}")));
    }
    serde_json::from_str(&body).map_err(|e| exchange_failed(provider, format_args!("{what} answered {body:.500}: {e}")))
}

#[derive(Debug, Deserialize)]
struct TokenAnswer {
    access_token: Option<String>,
    id_token: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// What the token endpoint hands over.
pub struct Tokens {
    access_token: String,
    /// The OpenID Connect ID token (`oidc`).
    id_token: Option<String>,
}

/// The form key and value of RFC 6749's `application/x-www-form-urlencoded` encoding, which
/// HTTP Basic client authentication applies before Base64 (RFC 6749 2.3.1).
fn form_encoded(text: &str) -> String {
    reqwest::Url::parse_with_params("x:", [("v", text)])
        .ok()
        .and_then(|url| url.query().and_then(|q| q.strip_prefix("v=")).map(str::to_owned))
        .unwrap_or_default()
}

/// Exchanges the authorization code (with the flow's verifier) for the provider's tokens.
pub async fn exchange(settings: &ProviderSettings, flow: &Flow, code: &str) -> ServiceResult<Tokens> {
    let params = [
        ("grant_type", "authorization_code"),
        ("client_id", settings.client_id.as_str()),
        ("client_secret", settings.client_secret.as_str()),
        ("code", code),
        ("redirect_uri", settings.redirect_uri.as_str()),
        ("code_verifier", flow.verifier.as_str()),
    ];
    let request = match (settings.provider, &settings.oidc) {
        (Provider::Oidc, Some(oidc)) => {
            oidc::check_url(&settings.token_url, oidc.internal)
                .map_err(|why| exchange_failed(settings.provider, format_args!("token endpoint: {why}")))?;
            let request = oidc::client(oidc.internal)
                .post(&settings.token_url)
                .header(reqwest::header::ACCEPT, "application/json");
            let [grant, id, secret, code, redirect, verifier] = params;
            if settings.client_secret.is_empty() {
                // A public client: PKCE is its proof.
                request.form(&[grant, id, code, redirect, verifier])
            } else if oidc.discovery.posts_client_secret() {
                request.form(&[grant, id, secret, code, redirect, verifier])
            } else {
                request
                    .basic_auth(form_encoded(&settings.client_id), Some(form_encoded(&settings.client_secret)))
                    .form(&[grant, code, redirect, verifier])
            }
        }
        (Provider::Oidc, None) => return Err(not_configured("no discovery")),
        // GitHub answers form-encoded unless asked for JSON.
        (Provider::Github, _) => {
            http().post(&settings.token_url).header(reqwest::header::ACCEPT, "application/json").form(&params)
        }
        // QQ's token endpoint is a GET with the parameters in the query.
        (Provider::Qq, _) => http().get(&settings.token_url).query(&params).query(&[("fmt", "json")]),
    };
    let answer: TokenAnswer = call(settings.provider, "token endpoint", request).await?;
    match answer {
        TokenAnswer { access_token: Some(access_token), id_token, error: None, .. } if !access_token.is_empty() => {
            Ok(Tokens { access_token, id_token })
        }
        TokenAnswer { error, error_description, .. } => Err(exchange_failed(
            settings.provider,
            format_args!("token endpoint: {} {}", error.unwrap_or_default(), error_description.unwrap_or_default()),
        )),
    }
}

/// Who the tokens' owner is: asked of the presets' APIs, read from the checked ID token for
/// `oidc` (the token must answer this flow's nonce).
pub async fn profile(settings: &ProviderSettings, flow: &Flow, tokens: &Tokens) -> ServiceResult<Profile> {
    match (settings.provider, &settings.oidc) {
        (Provider::Github, _) => github_profile(settings, &tokens.access_token).await,
        (Provider::Qq, _) => qq_profile(settings, &tokens.access_token).await,
        (Provider::Oidc, Some(oidc)) => oidc_profile(settings, oidc, flow, tokens).await,
        (Provider::Oidc, None) => Err(not_configured("no discovery")),
    }
}

async fn oidc_profile(
    settings: &ProviderSettings,
    oidc: &OidcSettings,
    flow: &Flow,
    tokens: &Tokens,
) -> ServiceResult<Profile> {
    let id_token = tokens
        .id_token
        .as_deref()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| exchange_failed(Provider::Oidc, "the token endpoint answered no id_token"))?;
    let claims =
        oidc::verify_id_token(&oidc.discovery, oidc.internal, &settings.client_id, flow.nonce.as_deref(), id_token)
            .await?;
    let groups = if oidc.group_claim.is_empty() { Vec::new() } else { claims.values_of(&oidc.group_claim) };
    Ok(Profile {
        // `sub` is unique only within its issuer.
        identifier: format!("{}#{}", oidc.discovery.issuer, claims.sub),
        display: claims.display(),
        email: claims.verified_email(),
        groups,
    })
}

#[derive(Debug, Deserialize)]
struct GithubUser {
    id: i64,
    login: String,
}

#[derive(Debug, Deserialize)]
struct GithubEmail {
    email: String,
    primary: bool,
    verified: bool,
}

async fn github_profile(settings: &ProviderSettings, access_token: &str) -> ServiceResult<Profile> {
    let get = |path: &str| {
        http()
            .get(format!("{}/{path}", settings.api_url))
            .bearer_auth(access_token)
            .header(reqwest::header::ACCEPT, "application/vnd.github+json")
    };
    let user: GithubUser = call(Provider::Github, "user API", get("user")).await?;
    let emails: Vec<GithubEmail> = call(Provider::Github, "user/emails API", get("user/emails")).await?;
    // Only an address GitHub verified says the person owns it; the primary one is theirs to choose.
    let email = emails.into_iter().find(|e| e.primary && e.verified).map(|e| e.email);
    Ok(Profile { identifier: user.id.to_string(), display: user.login, email, groups: Vec::new() })
}

#[derive(Debug, Deserialize)]
struct QqMe {
    openid: Option<String>,
    unionid: Option<String>,
    error: Option<serde_json::Value>,
    error_description: Option<String>,
}

#[derive(Debug, Deserialize)]
struct QqUserInfo {
    ret: i64,
    #[serde(default)]
    msg: String,
    #[serde(default)]
    nickname: String,
}

async fn qq_profile(settings: &ProviderSettings, access_token: &str) -> ServiceResult<Profile> {
    let me_request = http().get(format!("{}/oauth2.0/me", settings.api_url)).query(&[
        ("access_token", access_token),
        ("unionid", "1"),
        ("fmt", "json"),
    ]);
    let me: QqMe = call(Provider::Qq, "OpenID endpoint", me_request).await?;
    let Some(openid) = me.openid.filter(|id| !id.is_empty() && me.error.is_none()) else {
        return Err(exchange_failed(
            Provider::Qq,
            format_args!("OpenID endpoint: {:?} {}", me.error, me.error_description.unwrap_or_default()),
        ));
    };
    let info_request = http().get(format!("{}/user/get_user_info", settings.api_url)).query(&[
        ("access_token", access_token),
        ("oauth_consumer_key", settings.client_id.as_str()),
        ("openid", openid.as_str()),
    ]);
    let info: QqUserInfo = call(Provider::Qq, "get_user_info", info_request).await?;
    if info.ret != 0 {
        return Err(exchange_failed(Provider::Qq, format_args!("get_user_info: {} {}", info.ret, info.msg)));
    }
    // The unionid is the same for every app of one developer; the openid is this app's only.
    let identifier = me.unionid.filter(|id| !id.is_empty()).unwrap_or(openid);
    Ok(Profile { identifier, display: info.nickname, email: None, groups: Vec::new() })
}

/// What a sign-in ticket stands for.
#[derive(Debug, Serialize, Deserialize)]
struct Ticket {
    provider: Provider,
    user_id: UserId,
}

fn ticket_key(ticket: &str) -> String {
    // Hashed: whoever reads the store cannot sign in with what they read.
    format!(
        "oauth:ticket:{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(ticket.as_bytes()))
    )
}

/// Leaves a ticket that signs `user_id` in once through `provider`; answers the ticket.
pub async fn issue_ticket(ctx: &Context, provider: Provider, user_id: UserId) -> ServiceResult<String> {
    let ticket = random_token();
    let text = serde_json::to_string(&Ticket { provider, user_id }).map_err(ServiceError::internal)?;
    ctx.store().set(&ticket_key(&ticket), &text, Some(TICKET_LIFETIME)).await?;
    Ok(ticket)
}

fn ticket_invalid() -> ServiceError {
    ServiceError::new(
        ErrorKind::Unauthorized,
        codes::AUTH_OAUTH_TICKET_INVALID,
        "this sign-in ticket is unknown, expired or already used: sign in again",
    )
}

/// The user a live ticket of `provider` signs in; `take` spends it, otherwise it stays live
/// (the sign-in may still ask for the account's second factor).
async fn ticket_user(ctx: &Context, provider: Provider, ticket: &str, take: bool) -> ServiceResult<UserId> {
    if ticket.is_empty() || ticket.len() > 128 {
        return Err(ticket_invalid());
    }
    let key = ticket_key(ticket);
    let text = if take { ctx.store().take(&key).await? } else { ctx.store().get(&key).await? };
    let stored: Ticket = serde_json::from_str(&text.ok_or_else(ticket_invalid)?).map_err(ServiceError::internal)?;
    if stored.provider != provider {
        return Err(ticket_invalid());
    }
    Ok(stored.user_id)
}

/// The user a ticket signs in (the `login` arm of the OAuth providers); [`use_up_ticket`]
/// spends it once the sign-in passed every other check.
pub async fn redeem_ticket(ctx: &Context, provider: Provider, ticket: &str) -> ServiceResult<UserId> {
    ticket_user(ctx, provider, ticket, false).await
}

/// Spends the ticket for `user`'s sign-in; of two sign-ins racing with one ticket, one wins.
pub async fn use_up_ticket(ctx: &Context, provider: Provider, ticket: &str, user: UserId) -> ServiceResult<()> {
    if ticket_user(ctx, provider, ticket, true).await? != user {
        return Err(ticket_invalid());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636s_s256() {
        // RFC 7636, appendix B.
        assert_eq!(
            code_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn providers_parse_by_name_only() {
        assert_eq!(Provider::parse("github").unwrap(), Provider::Github);
        assert_eq!(Provider::parse("qq").unwrap(), Provider::Qq);
        assert_eq!(Provider::parse("oidc").unwrap(), Provider::Oidc);
        assert_eq!(Provider::from_method(AuthMethod::Oidc), Some(Provider::Oidc));
        for other in ["GitHub", "passkey", "email_password", ""] {
            assert_eq!(Provider::parse(other).unwrap_err().code, codes::AUTH_OAUTH_PROVIDER_UNKNOWN);
        }
        assert_eq!(Provider::from_method(AuthMethod::Qq), Some(Provider::Qq));
        assert_eq!(Provider::from_method(AuthMethod::Passkey), None);
    }

    #[test]
    fn basic_credentials_are_form_encoded_first() {
        assert_eq!(form_encoded("plain-id_1.2"), "plain-id_1.2");
        assert_eq!(form_encoded("a b:c/d"), "a+b%3Ac%2Fd");
    }

    #[test]
    fn verifiers_are_valid_pkce_verifiers() {
        let verifier = random_token();
        // RFC 7636 4.1: 43 to 128 unreserved characters.
        assert_eq!(verifier.len(), 43);
        assert!(verifier.chars().all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c)));
    }
}
