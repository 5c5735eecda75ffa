//! WOPI applications: the administrator's registry (`/admin/wopi`), their discovery (fetched
//! through the SSRF guard unless marked internal, parsed with quick-xml, refreshed
//! periodically), the action URL of a file (placeholders resolved as the discovery rules say)
//! and the proof-key check of every request such an application makes. Sessions and file
//! operations are `service::office::wopi`'s.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use nubo_common::guard::AddressGuard;
use nubo_model::db::wopi_apps::WopiAppRow;
use nubo_model::db::{self};
use nubo_model::domain::time::{Millis, now_ms, to_rfc3339};
use quick_xml::events::{BytesStart, Event};
use rsa::pkcs1v15::Pkcs1v15Sign;
use rsa::{BigUint, RsaPublicKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;

/// How often discovery is fetched again (applications rotate their proof keys now and then).
pub const REFRESH_EVERY: Duration = Duration::from_secs(12 * 3600);
/// Largest discovery document read (Microsoft's is about 300 KiB).
const MAX_DISCOVERY: usize = 4 * 1024 * 1024;
/// How long a fetch of discovery may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(15);
/// How old a request's `X-WOPI-TimeStamp` may be (the WOPI specification's 20 minutes).
pub const PROOF_MAX_AGE: Duration = Duration::from_secs(20 * 60);

/// One action of discovery: application `app` can `name` (`view`, `edit`, `editnew`, ...)
/// files of extension `ext` at `urlsrc` (placeholders unresolved).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WopiAction {
    pub app: String,
    pub name: String,
    /// Without the dot, lower case; empty for actions keyed by MIME type only.
    pub ext: String,
    pub urlsrc: String,
    /// The discovery's net zone (`external-https`, `internal-http`, ...).
    pub zone: String,
}

/// An RSA public key of discovery: big-endian modulus and exponent, base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProofKey {
    pub modulus: String,
    pub exponent: String,
}

/// The current proof key and the one before it (kept while clients still sign with it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProofKeys {
    pub current: ProofKey,
    pub old: Option<ProofKey>,
}

/// What a discovery document says, as kept.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct Discovery {
    pub actions: Vec<WopiAction>,
    pub proof: Option<ProofKeys>,
}

fn xml_error(why: impl std::fmt::Display) -> String {
    format!("the discovery is not valid XML: {why}")
}

fn attribute(element: &BytesStart, name: &str) -> Result<Option<String>, String> {
    for attr in element.attributes() {
        let attr = attr.map_err(xml_error)?;
        if attr.key.as_ref() == name.as_bytes() {
            let value = attr.normalized_value(quick_xml::XmlVersion::Implicit1_0).map_err(xml_error)?;
            return Ok(Some(value.into_owned()));
        }
    }
    Ok(None)
}

/// A key from discovery's `modulus`/`exponent` attributes, else from its `value` (a Windows
/// CryptoAPI `PUBLICKEYBLOB`, base64).
fn proof_key(element: &BytesStart, prefix: &str) -> Result<Option<ProofKey>, String> {
    let modulus = attribute(element, &format!("{prefix}modulus"))?.filter(|v| !v.is_empty());
    let exponent = attribute(element, &format!("{prefix}exponent"))?.filter(|v| !v.is_empty());
    if let (Some(modulus), Some(exponent)) = (modulus, exponent) {
        return Ok(Some(ProofKey { modulus, exponent }));
    }
    match attribute(element, &format!("{prefix}value"))?.filter(|v| !v.is_empty()) {
        Some(blob) => key_from_blob(&blob).map(Some),
        None => Ok(None),
    }
}

/// Reads a `PUBLICKEYBLOB`: an 8-byte header, `RSA1`, the bit length and the public exponent
/// (little-endian 32-bit), then the modulus, little-endian.
fn key_from_blob(blob: &str) -> Result<ProofKey, String> {
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = engine.decode(blob.trim()).map_err(|_| "a proof key value is not base64".to_owned())?;
    let bad = || "a proof key value is not an RSA public key blob".to_owned();
    if bytes.len() < 20 || &bytes[8..12] != b"RSA1" {
        return Err(bad());
    }
    let bits = u32::from_le_bytes(bytes[12..16].try_into().map_err(|_| bad())?) as usize;
    let exponent = u32::from_le_bytes(bytes[16..20].try_into().map_err(|_| bad())?);
    let modulus = bytes.get(20..20 + bits / 8).ok_or_else(bad)?;
    let modulus: Vec<u8> = modulus.iter().rev().copied().collect();
    let exponent: Vec<u8> = exponent.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
    Ok(ProofKey { modulus: engine.encode(modulus), exponent: engine.encode(exponent) })
}

/// Parses a discovery document (Microsoft's format, which Collabora Online and OnlyOffice
/// follow): `wopi-discovery/net-zone/app/action` and `proof-key`. quick-xml expands no DTD
/// entities, so a hostile document cannot blow up.
pub fn parse_discovery(xml: &str) -> Result<Discovery, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut zone, mut app) = (String::new(), String::new());
    let mut discovery = Discovery::default();
    let mut root_seen = false;
    loop {
        match reader.read_event().map_err(xml_error)? {
            Event::Start(element) | Event::Empty(element) => match element.name().as_ref() {
                b"wopi-discovery" => root_seen = true,
                b"net-zone" => zone = attribute(&element, "name")?.unwrap_or_default(),
                b"app" => app = attribute(&element, "name")?.unwrap_or_default(),
                b"action" => {
                    let (Some(name), Some(urlsrc)) = (attribute(&element, "name")?, attribute(&element, "urlsrc")?)
                    else {
                        continue;
                    };
                    let ext = attribute(&element, "ext")?.unwrap_or_default().trim_start_matches('.').to_lowercase();
                    discovery.actions.push(WopiAction { app: app.clone(), name, ext, urlsrc, zone: zone.clone() });
                }
                b"proof-key" => {
                    discovery.proof = proof_key(&element, "")?
                        .map(|current| Ok::<_, String>(ProofKeys { current, old: proof_key(&element, "old")? }))
                        .transpose()?;
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    if !root_seen {
        return Err("the document is not WOPI discovery (no wopi-discovery element)".to_owned());
    }
    if discovery.actions.is_empty() {
        return Err("the discovery lists no actions".to_owned());
    }
    Ok(discovery)
}

/// Zones in the order they are preferred when an extension has actions in several.
fn zone_rank(zone: &str) -> usize {
    ["external-https", "internal-https", "external-http", "internal-http"].iter().position(|z| *z == zone).unwrap_or(4)
}

impl Discovery {
    /// The action `name` for extension `ext` (without dot), from the preferred zone.
    pub fn action(&self, ext: &str, name: &str) -> Option<&WopiAction> {
        let ext = ext.to_lowercase();
        self.actions.iter().filter(|a| a.ext == ext && a.name == name).min_by_key(|a| zone_rank(&a.zone))
    }
}

/// Resolves `urlsrc` for a file at `wopi_src`, as discovery's rules say: each optional
/// placeholder `<name=PLACEHOLDER&>` becomes `name=value&` when Nubo knows the value, and is
/// dropped otherwise; `WOPISrc` is added (percent-encoded) unless a placeholder placed it.
pub fn action_url(urlsrc: &str, wopi_src: &str, language: &str) -> String {
    let encoded = percent_encoding::utf8_percent_encode(wopi_src, percent_encoding::NON_ALPHANUMERIC).to_string();
    let mut out = String::new();
    let mut rest = urlsrc;
    let mut placed_src = false;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('>') else {
            rest = &rest[open..];
            break;
        };
        let inner = &rest[open + 1..open + close];
        rest = &rest[open + close + 1..];
        let Some((name, placeholder)) = inner.split_once('=') else { continue };
        let value = match placeholder.trim_end_matches('&') {
            "UI_LLCC" | "DC_LLCC" => Some(language.to_owned()),
            "WOPI_SOURCE" => {
                placed_src = true;
                Some(encoded.clone())
            }
            _ => None,
        };
        if let Some(value) = value {
            out.push_str(&format!("{name}={value}&"));
        }
    }
    out.push_str(rest);
    let mut url = out.trim_end_matches('&').to_owned();
    if !placed_src {
        if !url.contains('?') {
            url.push('?');
        } else if !url.ends_with('?') {
            url.push('&');
        }
        url.push_str(&format!("WOPISrc={encoded}"));
    }
    url
}

/// .NET ticks (100 ns since 0001-01-01 UTC) of the Unix epoch, which `X-WOPI-TimeStamp` counts in.
const TICKS_AT_UNIX_EPOCH: i64 = 621_355_968_000_000_000;

/// `X-WOPI-TimeStamp` for a time in milliseconds since the Unix epoch.
pub fn ticks_of(ms: Millis) -> i64 {
    TICKS_AT_UNIX_EPOCH + ms * 10_000
}

/// The bytes a WOPI client signs: the access token, the request URL upper-cased and the
/// timestamp, each preceded by its length as a 4-byte big-endian integer (the timestamp is an
/// 8-byte big-endian integer).
pub fn expected_proof(access_token: &str, url: &str, timestamp: i64) -> Vec<u8> {
    let url = url.to_uppercase();
    let mut bytes = Vec::with_capacity(access_token.len() + url.len() + 20);
    bytes.extend_from_slice(&(access_token.len() as u32).to_be_bytes());
    bytes.extend_from_slice(access_token.as_bytes());
    bytes.extend_from_slice(&(url.len() as u32).to_be_bytes());
    bytes.extend_from_slice(url.as_bytes());
    bytes.extend_from_slice(&8u32.to_be_bytes());
    bytes.extend_from_slice(&timestamp.to_be_bytes());
    bytes
}

/// The proof headers of a request.
#[derive(Debug, Clone, Default)]
pub struct Proof {
    pub proof: Option<String>,
    pub proof_old: Option<String>,
    pub timestamp: Option<String>,
}

fn verifies(key: &ProofKey, message_hash: &[u8], signature: Option<&str>) -> bool {
    let engine = base64::engine::general_purpose::STANDARD;
    let Some(signature) = signature.and_then(|s| engine.decode(s.trim()).ok()) else { return false };
    let (Ok(modulus), Ok(exponent)) = (engine.decode(&key.modulus), engine.decode(&key.exponent)) else {
        return false;
    };
    let Ok(public) = RsaPublicKey::new(BigUint::from_bytes_be(&modulus), BigUint::from_bytes_be(&exponent)) else {
        return false;
    };
    public.verify(Pkcs1v15Sign::new::<Sha256>(), message_hash, &signature).is_ok()
}

/// Checks a request's proof as the WOPI specification says: a timestamp at most 20 minutes
/// off, and `X-WOPI-Proof` verifying with the current key, or `X-WOPI-ProofOld` with the
/// current key (the client rotated first), or `X-WOPI-Proof` with the old key (discovery
/// rotated first).
pub fn check_proof(keys: &ProofKeys, proof: &Proof, access_token: &str, url: &str, now: Millis) -> Result<(), String> {
    let timestamp: i64 = proof
        .timestamp
        .as_deref()
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| "X-WOPI-TimeStamp is missing".to_owned())?;
    let age_ticks = ticks_of(now) - timestamp;
    if age_ticks.unsigned_abs() > PROOF_MAX_AGE.as_millis() as u64 * 10_000 {
        return Err("X-WOPI-TimeStamp is more than 20 minutes off".to_owned());
    }
    let hash = Sha256::digest(expected_proof(access_token, url, timestamp));
    let current = &keys.current;
    let accepted = verifies(current, &hash, proof.proof.as_deref())
        || verifies(current, &hash, proof.proof_old.as_deref())
        || keys.old.as_ref().is_some_and(|old| verifies(old, &hash, proof.proof.as_deref()));
    if accepted { Ok(()) } else { Err("the proof does not verify with the application's keys".to_owned()) }
}

/// The proof check of one request by the application `app` (a session's token names it).
/// Without keys the request passes only when the administrator allows unsigned requests.
pub async fn check_request(
    ctx: &Context,
    app: Uuid,
    proof: &Proof,
    access_token: &str,
    url: &str,
) -> ServiceResult<()> {
    let row =
        db::wopi_apps::find(ctx.db(), app).await?.ok_or_else(|| proof_refused("the WOPI application was removed"))?;
    let discovery = stored_discovery(&row);
    match discovery.and_then(|d| d.proof) {
        Some(keys) => check_proof(&keys, proof, access_token, url, now_ms()).map_err(proof_refused),
        None if row.allow_unsigned => Ok(()),
        None => Err(proof_refused("the application publishes no proof key and unsigned requests are not allowed")),
    }
}

/// WOPI's answer to a request that is not properly signed: 500 (as the specification says).
pub fn proof_refused(why: impl Into<String>) -> ServiceError {
    let why = why.into();
    tracing::warn!(%why, "WOPI proof refused");
    ServiceError::new(ErrorKind::Internal, codes::WOPI_PROOF_INVALID, format!("the WOPI proof was refused: {why}"))
}

/// The origins (`https://office.example.com`) the application's action URLs are on: the web
/// app's pages post to them and frame them.
pub fn action_origins(row: &WopiAppRow) -> Vec<String> {
    let mut origins: Vec<String> = Vec::new();
    for action in stored_discovery(row).unwrap_or_default().actions {
        let Ok(url) = reqwest::Url::parse(&action.urlsrc) else { continue };
        let origin = url.origin().ascii_serialization();
        if url.origin().is_tuple() && !origins.contains(&origin) {
            origins.push(origin);
        }
    }
    origins
}

fn stored_discovery(row: &WopiAppRow) -> Option<Discovery> {
    row.discovery.as_deref().and_then(|json| serde_json::from_str(json).ok())
}

/// A WOPI application as the administrator sees it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WopiAppView {
    pub id: Uuid,
    pub name: String,
    pub discovery_url: String,
    /// The discovery may be fetched from a private address (the SSRF guard is off for it).
    pub internal: bool,
    /// Requests are accepted without proof when the application publishes no proof key.
    pub allow_unsigned: bool,
    /// Why the last fetch of discovery failed (null when it worked); the last good discovery
    /// stays in use.
    pub error: Option<String>,
    pub refreshed_at: Option<String>,
    /// Extensions with their actions (`view`, `edit`, `editnew`, ...).
    pub extensions: Vec<WopiExtension>,
    /// Whether discovery published a proof key (and an old one).
    pub proof_key: bool,
    pub old_proof_key: bool,
}

/// The actions of one extension.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WopiExtension {
    pub ext: String,
    pub actions: Vec<String>,
}

pub fn view(row: &WopiAppRow) -> WopiAppView {
    let discovery = stored_discovery(row).unwrap_or_default();
    let mut extensions: Vec<WopiExtension> = Vec::new();
    for action in discovery.actions.iter().filter(|a| !a.ext.is_empty()) {
        match extensions.iter_mut().find(|e| e.ext == action.ext) {
            Some(entry) if entry.actions.contains(&action.name) => {}
            Some(entry) => entry.actions.push(action.name.clone()),
            None => extensions.push(WopiExtension { ext: action.ext.clone(), actions: vec![action.name.clone()] }),
        }
    }
    extensions.sort_by(|a, b| a.ext.cmp(&b.ext));
    WopiAppView {
        id: row.id,
        name: row.name.clone(),
        discovery_url: row.discovery_url.clone(),
        internal: row.internal,
        allow_unsigned: row.allow_unsigned,
        error: row.error.clone(),
        refreshed_at: row.refreshed_at.map(to_rfc3339),
        extensions,
        proof_key: discovery.proof.is_some(),
        old_proof_key: discovery.proof.as_ref().is_some_and(|p| p.old.is_some()),
    }
}

/// A WOPI application to add or the new settings of one.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WopiAppInput {
    /// 1 to 100 characters, unique.
    pub name: String,
    /// Where the application publishes discovery, e.g. `https://collabora.example.com/hosting/discovery`.
    pub discovery_url: String,
    #[serde(default)]
    pub internal: bool,
    #[serde(default)]
    pub allow_unsigned: bool,
}

fn validated(input: &WopiAppInput) -> ServiceResult<()> {
    let name = input.name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(ServiceError::validation("name", "give a name of 1 to 100 characters"));
    }
    match reqwest::Url::parse(&input.discovery_url) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(()),
        _ => Err(ServiceError::validation("discovery_url", "give the http(s) address of the discovery document")),
    }
}

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::WOPI_APP_NOT_FOUND, "no such WOPI application")
}

fn name_taken(err: nubo_model::db::DbError) -> ServiceError {
    if err.is_unique_violation() {
        ServiceError::conflict(codes::WOPI_APP_NAME_TAKEN, "a WOPI application of that name exists")
    } else {
        err.into()
    }
}

pub async fn list(ctx: &Context) -> ServiceResult<Vec<WopiAppView>> {
    let db = ctx.db();
    Ok(db::wopi_apps::list(db).await?.iter().map(view).collect())
}

pub async fn get(ctx: &Context, id: Uuid) -> ServiceResult<WopiAppView> {
    let db = ctx.db();
    Ok(view(&db::wopi_apps::find(db, id).await?.ok_or_else(not_found)?))
}

/// Adds an application and fetches its discovery at once; a discovery that cannot be fetched
/// or read is reported in `error`, the application is kept (fix the address, or refresh).
pub async fn create(ctx: &Context, input: WopiAppInput) -> ServiceResult<WopiAppView> {
    validated(&input)?;
    let now = now_ms();
    let row = WopiAppRow {
        id: Uuid::new_v4(),
        name: input.name.trim().to_owned(),
        discovery_url: input.discovery_url,
        internal: input.internal,
        allow_unsigned: input.allow_unsigned,
        discovery: None,
        error: None,
        refreshed_at: None,
        created_at: now,
        updated_at: now,
    };
    db::wopi_apps::insert(ctx.db(), &row).await.map_err(name_taken)?;
    refresh(ctx, row.id).await
}

/// Changes an application's settings and fetches its discovery again.
pub async fn update(ctx: &Context, id: Uuid, input: WopiAppInput) -> ServiceResult<WopiAppView> {
    validated(&input)?;
    let mut row = db::wopi_apps::find(ctx.db(), id).await?.ok_or_else(not_found)?;
    row.name = input.name.trim().to_owned();
    row.discovery_url = input.discovery_url;
    row.internal = input.internal;
    row.allow_unsigned = input.allow_unsigned;
    row.updated_at = now_ms();
    if !db::wopi_apps::update(ctx.db(), &row).await.map_err(name_taken)? {
        return Err(not_found());
    }
    refresh(ctx, id).await
}

pub async fn delete(ctx: &Context, id: Uuid) -> ServiceResult<()> {
    if !db::wopi_apps::delete(ctx.db(), id).await? {
        return Err(not_found());
    }
    crate::settings::site::settings_changed(ctx).await
}

/// Fetches and parses the application's discovery now; a failure is recorded in `error`
/// (never a panic, never an error answer: the administrator reads it in the view).
pub async fn refresh(ctx: &Context, id: Uuid) -> ServiceResult<WopiAppView> {
    let row = db::wopi_apps::find(ctx.db(), id).await?.ok_or_else(not_found)?;
    let fetched = fetch(&row.discovery_url, row.internal).await.and_then(|xml| parse_discovery(&xml));
    match fetched {
        Ok(discovery) => {
            let json = serde_json::to_string(&discovery).map_err(ServiceError::internal)?;
            db::wopi_apps::record_fetch(ctx.db(), id, Some(&json), None, now_ms()).await?;
        }
        Err(why) => db::wopi_apps::record_fetch(ctx.db(), id, None, Some(&why), now_ms()).await?,
    }
    // The viewers of its extensions (and the pages' frame sources) may have changed.
    crate::settings::site::settings_changed(ctx).await?;
    get(ctx, id).await
}

/// Refreshes every application whose discovery is older than [`REFRESH_EVERY`] (the periodic
/// job); answers how many were fetched.
pub async fn refresh_due(ctx: &Context) -> ServiceResult<usize> {
    let due = now_ms() - REFRESH_EVERY.as_millis() as i64;
    let mut count = 0;
    for row in db::wopi_apps::list(ctx.db()).await? {
        if row.refreshed_at.is_none_or(|at| at < due) {
            refresh(ctx, row.id).await?;
            count += 1;
        }
    }
    Ok(count)
}

/// Reads the discovery document at `url`, through the SSRF guard unless `internal`.
async fn fetch(url: &str, internal: bool) -> Result<String, String> {
    let guard = AddressGuard { allow_private: internal };
    let parsed = reqwest::Url::parse(url).map_err(|_| "the discovery URL is not a URL".to_owned())?;
    guard.check_url(&parsed).map_err(|refusal| refusal.to_string())?;
    let client = reqwest::Client::builder()
        .dns_resolver(Arc::new(guard.resolver()))
        .redirect(guard.redirect_policy())
        .timeout(FETCH_TIMEOUT)
        .no_proxy()
        .user_agent(concat!("nubo-master/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("no HTTP client: {e}"))?;
    let bytes = nubo_common::guard::get_bounded(&client, parsed, MAX_DISCOVERY).await?;
    String::from_utf8(bytes).map_err(|_| "the discovery document is not UTF-8".to_owned())
}

/// The action URL of a file of extension `ext` with application `app`, for `edit` or viewing
/// (an edit session falls back to `view` when the application cannot edit the extension; a
/// view session to `edit` when it can only edit it, as some applications list).
pub async fn action_for(ctx: &Context, app: Uuid, ext: &str, edit: bool, wopi_src: &str) -> ServiceResult<String> {
    let row = db::wopi_apps::find(ctx.db(), app).await?.ok_or_else(not_found)?;
    let discovery = stored_discovery(&row).ok_or_else(|| {
        ServiceError::conflict(codes::WOPI_NO_ACTION, "the application's discovery has not been fetched yet")
    })?;
    let order: &[&str] = if edit { &["edit"] } else { &["view", "embedview", "edit"] };
    let action = order.iter().find_map(|name| discovery.action(ext, name)).ok_or_else(|| {
        ServiceError::conflict(codes::WOPI_NO_ACTION, "the application has no such action for this file type")
    })?;
    Ok(action_url(&action.urlsrc, wopi_src, "en-US"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLLABORA: &str = include_str!("../../../../tests/support/wopi/collabora-discovery.xml");
    const ONLYOFFICE: &str = include_str!("../../../../tests/support/wopi/onlyoffice-discovery.xml");

    #[test]
    fn collabora_discovery_parses() {
        let discovery = parse_discovery(COLLABORA).unwrap();
        let edit = discovery.action("odt", "edit").unwrap();
        assert_eq!(edit.app, "writer");
        assert!(discovery.action("DOCX", "edit").is_some(), "extensions match without case");
        let keys = discovery.proof.clone().unwrap();
        assert!(keys.old.is_some());
        let url = action_url(&edit.urlsrc, "https://cloud.example/wopi/files/1", "en-US");
        assert_eq!(
            url,
            "https://collabora.example.com/browser/0b27e85/cool.html?WOPISrc=https%3A%2F%2Fcloud%2Eexample%2Fwopi%2Ffiles%2F1"
        );
    }

    #[test]
    fn onlyoffice_discovery_parses_with_placeholders() {
        let discovery = parse_discovery(ONLYOFFICE).unwrap();
        let edit = discovery.action("docx", "edit").unwrap();
        let url = action_url(&edit.urlsrc, "http://nubo/wopi/files/2", "de-DE");
        assert_eq!(
            url,
            "https://onlyoffice.example.com/hosting/wopi/word/edit?ui=de-DE&rs=de-DE&WOPISrc=http%3A%2F%2Fnubo%2Fwopi%2Ffiles%2F2"
        );
        assert!(discovery.action("xlsx", "view").is_some());
        assert!(discovery.action("docx", "editnew").is_some());
        assert!(discovery.proof.is_some());
    }

    #[test]
    fn broken_discovery_is_an_error_not_a_panic() {
        assert!(parse_discovery("<html>nope</html>").is_err());
        assert!(parse_discovery("<wopi-discovery><net-zone></wopi-discovery>").is_err());
        assert!(parse_discovery("").is_err());
        assert!(parse_discovery("<wopi-discovery/>").unwrap_err().contains("no actions"));
    }

    #[test]
    fn a_wopisrc_placeholder_is_filled_in_place() {
        let url = action_url("https://o.example/x?<wopisrc=WOPI_SOURCE&><unknown=THING&>a=1", "http://h/w", "en-US");
        assert_eq!(url, "https://o.example/x?wopisrc=http%3A%2F%2Fh%2Fw&a=1");
    }

    #[test]
    fn the_proof_bytes_follow_the_specification() {
        let bytes = expected_proof("tok", "https://h/wopi/files/1?access_token=tok", 0x0102);
        assert_eq!(&bytes[..4], &[0, 0, 0, 3]);
        assert_eq!(&bytes[4..7], b"tok", "the token as it is");
        assert_eq!(&bytes[7..11], &[0, 0, 0, 39]);
        assert_eq!(&bytes[11..50], b"HTTPS://H/WOPI/FILES/1?ACCESS_TOKEN=TOK");
        assert_eq!(&bytes[50..54], &[0, 0, 0, 8]);
        assert_eq!(&bytes[54..], &[0, 0, 0, 0, 0, 0, 1, 2]);
    }

    #[test]
    fn a_csp_blob_gives_the_same_key_as_modulus_and_exponent() {
        // A 64-bit toy key: modulus 0x0102030405060708, exponent 65537.
        let mut blob = vec![6, 2, 0, 0, 0, 0xa4, 0, 0];
        blob.extend_from_slice(b"RSA1");
        blob.extend_from_slice(&64u32.to_le_bytes());
        blob.extend_from_slice(&65537u32.to_le_bytes());
        blob.extend_from_slice(&[8, 7, 6, 5, 4, 3, 2, 1]);
        let engine = base64::engine::general_purpose::STANDARD;
        let key = key_from_blob(&engine.encode(blob)).unwrap();
        assert_eq!(engine.decode(key.modulus).unwrap(), [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(engine.decode(key.exponent).unwrap(), [1, 0, 1]);
    }
}
