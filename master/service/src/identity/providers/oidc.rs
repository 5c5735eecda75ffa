//! The OpenID Connect side of the `oidc` OAuth provider: the issuer's discovery document
//! (`{issuer}/.well-known/openid-configuration`), its key set (JWKS), both fetched through the
//! SSRF guard unless `oidc_internal` allows private addresses and kept in memory, and checking
//! the ID token the token endpoint answers: its signature against the published keys
//! (`jsonwebtoken`, asymmetric algorithms only), `iss`, `aud` (and `azp`), `exp`/`nbf` and the
//! flow's `nonce`. Then the person it names: identity `{issuer}#{sub}`, the e-mail address unless
//! `email_verified` is false, and the values of the group claim. The flow itself (state, PKCE,
//! tickets) is `oauth`'s, the same as for the presets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use jsonwebtoken::errors::ErrorKind as JwtError;
use jsonwebtoken::jwk::{Jwk, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use nubo_common::guard::AddressGuard;
use reqwest::Url;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;

/// How long a fetched discovery document serves before it is fetched again.
const DISCOVERY_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// How long a fetched key set serves; an unknown key id fetches it again sooner.
const KEYS_LIFETIME: Duration = Duration::from_secs(60 * 60);
/// Each fetch from the provider.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// The largest discovery document or key set read.
const MAX_DOCUMENT: usize = 1024 * 1024;
/// Clock skew allowed between the provider and this server for `exp` and `nbf`.
const LEEWAY_SECONDS: u64 = 60;
/// The signature algorithms an ID token may use: asymmetric ones only, so a key published for
/// verifying can never be used as an HMAC secret.
const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Fetched documents by URL and guard setting, each with when it was fetched.
type Cache<T> = OnceLock<Mutex<HashMap<(String, bool), (Instant, Arc<T>)>>>;

/// What the site needs of the issuer's discovery document.
#[derive(Debug, Clone, Deserialize)]
pub struct Discovery {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    /// How the token endpoint takes the client's credentials; absent: `client_secret_basic`.
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
}

impl Discovery {
    /// Whether the client secret goes in the form (`client_secret_post`) rather than in HTTP
    /// Basic authentication, the specification's default.
    pub fn posts_client_secret(&self) -> bool {
        match &self.token_endpoint_auth_methods_supported {
            None => false,
            Some(methods) => {
                !methods.iter().any(|m| m == "client_secret_basic") && methods.iter().any(|m| m == "client_secret_post")
            }
        }
    }
}

/// The provider could not be reached or read: the log gets `detail`, the person a generic code.
pub fn discovery_failed(detail: impl std::fmt::Display) -> ServiceError {
    tracing::warn!(%detail, "OpenID Connect discovery or key set failed");
    ServiceError::new(
        ErrorKind::BadGateway,
        codes::AUTH_OIDC_DISCOVERY_FAILED,
        "the sign-in provider could not be reached or answered something unusable: ask an administrator",
    )
}

/// An HTTP client that obeys the SSRF guard (every address allowed when `internal`) and follows
/// no redirects: a token endpoint that redirects would carry the client secret elsewhere.
pub fn client(internal: bool) -> &'static reqwest::Client {
    static OPEN: OnceLock<reqwest::Client> = OnceLock::new();
    static GUARDED: OnceLock<reqwest::Client> = OnceLock::new();
    let cell = if internal { &OPEN } else { &GUARDED };
    cell.get_or_init(|| {
        let guard = AddressGuard { allow_private: internal };
        reqwest::Client::builder()
            .dns_resolver(Arc::new(guard.resolver()))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(CALL_TIMEOUT)
            .no_proxy()
            .user_agent(concat!("Nubo/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default()
    })
}

/// Checks a URL the provider or the administrator gave against the guard.
pub fn check_url(url: &str, internal: bool) -> Result<Url, String> {
    let parsed = Url::parse(url).map_err(|_| format!("{url:?} is not a URL"))?;
    AddressGuard { allow_private: internal }.check_url(&parsed).map_err(|refusal| refusal.to_string())?;
    Ok(parsed)
}

/// GETs a JSON document of at most [`MAX_DOCUMENT`] bytes.
async fn get_json<T: DeserializeOwned>(url: &str, internal: bool) -> Result<T, String> {
    let parsed = check_url(url, internal)?;
    let body = nubo_common::guard::get_bounded(client(internal), parsed, MAX_DOCUMENT).await?;
    serde_json::from_slice(&body).map_err(|e| format!("{url} answered no usable JSON: {e}"))
}

/// The issuer's discovery document, from memory while it is fresh. Its `issuer` must be the
/// configured one (a trailing slash aside), and its endpoints absolute http(s) URLs.
pub async fn discover(issuer: &str, internal: bool) -> ServiceResult<Arc<Discovery>> {
    static CACHE: Cache<Discovery> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (issuer.to_owned(), internal);
    if let Some((at, found)) = cache.lock().expect("discovery cache").get(&key)
        && at.elapsed() < DISCOVERY_LIFETIME
    {
        return Ok(found.clone());
    }
    let url = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
    let discovery: Discovery = get_json(&url, internal).await.map_err(discovery_failed)?;
    if discovery.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
        return Err(discovery_failed(format_args!(
            "the discovery document names issuer {:?}, not {issuer:?}",
            discovery.issuer
        )));
    }
    for endpoint in [&discovery.authorization_endpoint, &discovery.token_endpoint, &discovery.jwks_uri] {
        if !Url::parse(endpoint).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
            return Err(discovery_failed(format_args!("the discovery document's endpoint {endpoint:?} is not a URL")));
        }
    }
    let discovery = Arc::new(discovery);
    cache.lock().expect("discovery cache").insert(key, (Instant::now(), discovery.clone()));
    Ok(discovery)
}

/// A key set's usable signing keys (encryption keys and keys this library cannot read are left
/// out, so one odd key does not lose the others).
fn signing_keys(set: serde_json::Value) -> Vec<Jwk> {
    let keys = set.get("keys").and_then(serde_json::Value::as_array).cloned().unwrap_or_default();
    keys.into_iter()
        .filter(|key| key.get("use").and_then(serde_json::Value::as_str).is_none_or(|u| u == "sig"))
        .filter_map(|key| serde_json::from_value::<Jwk>(key).ok())
        .collect()
}

/// The provider's signing keys; `refresh` fetches them again whatever the cache holds (a
/// token named a key id the cached set lacks: the provider rotated its keys).
async fn keys(jwks_uri: &str, internal: bool, refresh: bool) -> ServiceResult<Arc<Vec<Jwk>>> {
    static CACHE: Cache<Vec<Jwk>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (jwks_uri.to_owned(), internal);
    if !refresh
        && let Some((at, found)) = cache.lock().expect("key cache").get(&key)
        && at.elapsed() < KEYS_LIFETIME
    {
        return Ok(found.clone());
    }
    let set: serde_json::Value = get_json(jwks_uri, internal).await.map_err(discovery_failed)?;
    let found = Arc::new(signing_keys(set));
    cache.lock().expect("key cache").insert(key, (Instant::now(), found.clone()));
    Ok(found)
}

/// The claims of an ID token this site reads.
#[derive(Debug, Clone, Deserialize)]
pub struct IdClaims {
    pub sub: String,
    #[serde(default)]
    pub nonce: Option<String>,
    #[serde(default)]
    pub azp: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    /// Absent (Azure AD sends none): the address counts as the provider's word.
    #[serde(default)]
    pub email_verified: Option<serde_json::Value>,
    #[serde(default)]
    pub preferred_username: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    /// Every claim, for the group claim an administrator names.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

impl IdClaims {
    /// The e-mail address, unless the provider says it is not verified (`email_verified`
    /// false, or `"false"` as some providers send it).
    pub fn verified_email(&self) -> Option<String> {
        let unverified = matches!(&self.email_verified, Some(serde_json::Value::Bool(false)))
            || matches!(&self.email_verified, Some(serde_json::Value::String(s)) if s == "false");
        self.email.clone().filter(|e| !e.is_empty() && !unverified)
    }

    /// What the person is called at the provider.
    pub fn display(&self) -> String {
        [&self.preferred_username, &self.name, &self.email]
            .into_iter()
            .flatten()
            .find(|v| !v.trim().is_empty())
            .cloned()
            .unwrap_or_else(|| self.sub.clone())
    }

    /// The values of claim `path` (`groups`, or a dotted path such as `realm_access.roles`): a
    /// string or the strings of a list; nothing when the claim is absent or `path` is empty.
    pub fn values_of(&self, path: &str) -> Vec<String> {
        let mut parts = path.split('.').filter(|p| !p.is_empty());
        let Some(first) = parts.next() else { return Vec::new() };
        let mut value = self.other.get(first);
        for part in parts {
            value = value.and_then(|v| v.get(part));
        }
        match value {
            Some(serde_json::Value::String(s)) => vec![s.clone()],
            Some(serde_json::Value::Array(items)) => {
                items.iter().filter_map(serde_json::Value::as_str).map(str::to_owned).collect()
            }
            _ => Vec::new(),
        }
    }
}

fn refused(code: &'static str, message: &'static str, detail: impl std::fmt::Display) -> ServiceError {
    tracing::warn!(code, %detail, "OpenID Connect ID token refused");
    ServiceError::new(ErrorKind::Unauthorized, code, message)
}

fn signature_invalid(detail: impl std::fmt::Display) -> ServiceError {
    refused(
        codes::AUTH_OIDC_SIGNATURE_INVALID,
        "the provider's ID token is not signed with its published keys: try again, or ask an administrator",
        detail,
    )
}

fn audience_invalid(detail: impl std::fmt::Display) -> ServiceError {
    refused(codes::AUTH_OIDC_AUDIENCE_INVALID, "the provider's ID token is meant for another application", detail)
}

fn issuer_invalid(detail: impl std::fmt::Display) -> ServiceError {
    refused(codes::AUTH_OIDC_ISSUER_INVALID, "the provider's ID token comes from another issuer", detail)
}

fn expired(detail: impl std::fmt::Display) -> ServiceError {
    refused(
        codes::AUTH_OIDC_TOKEN_EXPIRED,
        "the provider's ID token has expired (or is not valid yet): check the clocks, then try again",
        detail,
    )
}

/// A failed check of `jsonwebtoken`, as this site's code.
fn jwt_refusal(err: jsonwebtoken::errors::Error) -> ServiceError {
    match err.kind() {
        JwtError::ExpiredSignature | JwtError::ImmatureSignature => expired(err),
        JwtError::InvalidIssuer => issuer_invalid(err),
        JwtError::InvalidAudience => audience_invalid(err),
        JwtError::MissingRequiredClaim(claim) => match claim.as_str() {
            "aud" => audience_invalid(err),
            "exp" | "nbf" => expired(err),
            _ => issuer_invalid(err),
        },
        _ => signature_invalid(err),
    }
}

/// Checks `id_token` as the answer to the flow that sent `nonce`: signed by one of the issuer's
/// published keys (fetched again once when it names a key id the cached set lacks), issued by
/// the discovery document's issuer, for `client_id`, not expired, and carrying `nonce`.
pub async fn verify_id_token(
    discovery: &Discovery,
    internal: bool,
    client_id: &str,
    nonce: Option<&str>,
    id_token: &str,
) -> ServiceResult<IdClaims> {
    let header = jsonwebtoken::decode_header(id_token).map_err(signature_invalid)?;
    if !ALGORITHMS.contains(&header.alg) {
        return Err(signature_invalid(format_args!("algorithm {:?} is not accepted", header.alg)));
    }
    let mut keys = keys(&discovery.jwks_uri, internal, false).await?;
    if let Some(kid) = &header.kid
        && !keys.iter().any(|k| k.common.key_id.as_deref() == Some(kid))
    {
        // The only refetch a token can cause: tokens come from the provider's token endpoint
        // over the back channel, so nobody else can make the site fetch keys in a loop.
        keys = self::keys(&discovery.jwks_uri, internal, true).await?;
    }
    let candidates: Vec<&Jwk> = keys
        .iter()
        .filter(|k| header.kid.is_none() || k.common.key_id == header.kid)
        .filter(|k| k.common.key_algorithm.is_none_or(|alg| key_algorithm_matches(alg, header.alg)))
        .collect();
    if candidates.is_empty() {
        return Err(signature_invalid(format_args!("no published key has id {:?} for {:?}", header.kid, header.alg)));
    }
    let mut validation = Validation::new(header.alg);
    validation.algorithms = vec![header.alg];
    validation.set_issuer(&[&discovery.issuer]);
    validation.set_audience(&[client_id]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.leeway = LEEWAY_SECONDS;
    validation.validate_nbf = true;
    let mut last = None;
    let mut claims = None;
    for jwk in candidates {
        let key = match DecodingKey::from_jwk(jwk) {
            Ok(key) => key,
            Err(err) => {
                last = Some(err);
                continue;
            }
        };
        match jsonwebtoken::decode::<IdClaims>(id_token, &key, &validation) {
            Ok(data) => {
                claims = Some(data.claims);
                break;
            }
            // Without a key id, another key may be the one; any other refusal is final.
            Err(err) if header.kid.is_none() && is_signature_error(&err) => last = Some(err),
            Err(err) => return Err(jwt_refusal(err)),
        }
    }
    let claims = match (claims, last) {
        (Some(claims), _) => claims,
        (None, Some(err)) => return Err(jwt_refusal(err)),
        (None, None) => return Err(signature_invalid("no key verified the token")),
    };
    if claims.azp.as_deref().is_some_and(|azp| azp != client_id) {
        return Err(audience_invalid(format_args!("azp is {:?}", claims.azp)));
    }
    if claims.sub.is_empty() {
        return Err(issuer_invalid("the token names no subject"));
    }
    match (nonce, claims.nonce.as_deref()) {
        (Some(sent), Some(got)) if sent == got => Ok(claims),
        _ => Err(refused(
            codes::AUTH_OIDC_NONCE_INVALID,
            "the provider's ID token does not belong to this sign-in: start again",
            "the nonce is missing or not this flow's",
        )),
    }
}

fn is_signature_error(err: &jsonwebtoken::errors::Error) -> bool {
    matches!(
        err.kind(),
        JwtError::InvalidSignature
            | JwtError::InvalidKeyFormat
            | JwtError::InvalidEcdsaKey
            | JwtError::InvalidRsaKey(_)
            | JwtError::InvalidAlgorithm
    )
}

/// Whether a key published for `published` may verify a token signed with `used`.
fn key_algorithm_matches(published: KeyAlgorithm, used: Algorithm) -> bool {
    let name = format!("{published:?}");
    name == format!("{used:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(value: serde_json::Value) -> IdClaims {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn an_address_marked_unverified_is_none() {
        let base = json!({"sub": "1", "email": "a@example.com"});
        assert_eq!(claims(base.clone()).verified_email().as_deref(), Some("a@example.com"));
        let mut verified = base.clone();
        verified["email_verified"] = json!(true);
        assert!(claims(verified).verified_email().is_some());
        for no in [json!(false), json!("false")] {
            let mut unverified = base.clone();
            unverified["email_verified"] = no;
            assert_eq!(claims(unverified).verified_email(), None);
        }
    }

    #[test]
    fn group_claims_read_strings_lists_and_dotted_paths() {
        let c = claims(json!({"sub": "1", "groups": ["/admins", 5, "staff"], "role": "boss",
            "realm_access": {"roles": ["editor"]}}));
        assert_eq!(c.values_of("groups"), ["/admins", "staff"]);
        assert_eq!(c.values_of("role"), ["boss"]);
        assert_eq!(c.values_of("realm_access.roles"), ["editor"]);
        assert!(c.values_of("missing").is_empty());
        assert!(c.values_of("").is_empty());
    }

    #[test]
    fn the_display_name_prefers_the_username() {
        assert_eq!(claims(json!({"sub": "s", "name": "N", "preferred_username": "u"})).display(), "u");
        assert_eq!(claims(json!({"sub": "s", "name": "N"})).display(), "N");
        assert_eq!(claims(json!({"sub": "s"})).display(), "s");
    }

    #[test]
    fn encryption_and_unreadable_keys_are_left_out() {
        let set = json!({"keys": [
            {"kty": "RSA", "use": "enc", "kid": "enc", "n": "AQAB", "e": "AQAB"},
            {"kty": "XYZ", "kid": "odd"},
            {"kty": "RSA", "use": "sig", "kid": "sig", "alg": "RS256", "n": "AQAB", "e": "AQAB"},
        ]});
        let keys = signing_keys(set);
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].common.key_id.as_deref(), Some("sig"));
        assert!(key_algorithm_matches(KeyAlgorithm::RS256, Algorithm::RS256));
        assert!(!key_algorithm_matches(KeyAlgorithm::RS256, Algorithm::ES256));
    }

    #[test]
    fn credentials_go_in_basic_authentication_unless_only_post_is_offered() {
        let discovery = |methods: Option<Vec<&str>>| Discovery {
            issuer: "https://id.example".into(),
            authorization_endpoint: "https://id.example/a".into(),
            token_endpoint: "https://id.example/t".into(),
            jwks_uri: "https://id.example/k".into(),
            token_endpoint_auth_methods_supported: methods.map(|m| m.into_iter().map(String::from).collect()),
        };
        assert!(!discovery(None).posts_client_secret());
        assert!(!discovery(Some(vec!["client_secret_post", "client_secret_basic"])).posts_client_secret());
        assert!(discovery(Some(vec!["client_secret_post"])).posts_client_secret());
    }
}
