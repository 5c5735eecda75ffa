//! JSON Web Tokens: access tokens (HS256, one hour, carrying a snapshot of the group's
//! permissions) and refresh tokens (longer-lived, rotated on every use). The `typ` claim keeps
//! one kind from being accepted as the other.

use std::time::Duration;

use jsonwebtoken::errors::ErrorKind as JwtErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use nubo_common::secret::Secret;
use nubo_model::domain::group::GroupPermissions;
use nubo_model::domain::ids::{ObjectId, UserId};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{ErrorKind, ServiceError};
use crate::error_codes as codes;

/// Lifetime of an access token (fixed by the interface: one hour).
pub const ACCESS_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenType {
    Access,
    Refresh,
    Download,
    /// Opens a password-protected share for a while (see [`ShareGrantClaims`]).
    ShareGrant,
    /// A WOPI client's access to one file for one user (see [`WopiClaims`]).
    Wopi,
    /// A signed URL of one stored blob, where a public local policy redirects downloads (see
    /// [`BlobClaims`]).
    Blob,
    /// A reusable URL of one file's current content for media players (see [`MediaClaims`]).
    Media,
}

/// The snapshot of the user's group taken when the token was issued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupClaims {
    pub id: Uuid,
    pub name: String,
    /// Members may use `/admin`.
    pub admin: bool,
    /// Group storage capacity in bytes.
    pub max_storage: i64,
    pub permissions: GroupPermissions,
    /// When the group's claims last changed (milliseconds; 0: never). A token whose version is
    /// older than the group's current one is revoked (see `credentials::revocation`).
    #[serde(default)]
    pub version: i64,
}

/// Claims of an access token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename = "JWTPayload")]
pub struct JwtPayload {
    /// The user's id.
    pub sub: UserId,
    /// This token's id.
    pub jti: Uuid,
    /// Issued at, seconds since the epoch.
    pub iat: i64,
    /// Expires at, seconds since the epoch.
    pub exp: i64,
    pub typ: TokenType,
    pub group: GroupClaims,
    /// When the user last moved group (milliseconds; 0: never), checked like the group's version.
    #[serde(default)]
    pub user_version: i64,
}

/// Claims of a refresh token; `jti` names its row, `fam` the chain it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshClaims {
    pub sub: UserId,
    pub jti: Uuid,
    pub fam: Uuid,
    pub iat: i64,
    pub exp: i64,
    pub typ: TokenType,
}

/// Claims of a single-use download token: which object, for whom.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DownloadClaims {
    pub sub: UserId,
    pub jti: Uuid,
    /// The object to serve.
    pub obj: ObjectId,
    /// The share the object is reached through, when the downloader is a share's visitor
    /// (`sub` is then the object's owner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shr: Option<Uuid>,
    /// A version of the object to serve instead of its current content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ver: Option<String>,
    pub iat: i64,
    pub exp: i64,
    pub typ: TokenType,
}

/// Claims of a share grant: the visitor gave the password of share `sub`, whose hash had the
/// fingerprint `pwf` (a changed password ends every grant of the old one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareGrantClaims {
    pub sub: Uuid,
    pub pwf: String,
    pub iat: i64,
    pub exp: i64,
    pub typ: TokenType,
}

/// Claims of a WOPI access token: user `sub` may view (or, with `edit`, change) file `obj`
/// through the WOPI application `app` (none: a session opened without one). It is checked
/// again on every WOPI request (ban, account status, the file still there and reachable), so
/// banning the user or deleting the file revokes it at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WopiClaims {
    pub sub: UserId,
    pub jti: Uuid,
    pub obj: ObjectId,
    pub edit: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<Uuid>,
    pub iat: i64,
    pub exp: i64,
    pub typ: TokenType,
    /// The user's claims version when issued, as access tokens carry it: a token older than the
    /// user's current one (a password change, a move to another group) is refused.
    #[serde(default)]
    pub user_version: i64,
}

/// Claims of a signed blob URL: blob `sub` served under `name`, until `exp` (minutes away),
/// to whoever holds it, without the caller's token: the master's own stand-in for a presigned
/// S3 URL, for public policies on local disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobClaims {
    /// The blob (physical file) id.
    pub sub: String,
    /// The name the bytes are served under (`Content-Type`, `Content-Disposition`).
    pub name: String,
    /// The file's last change (milliseconds), for `Last-Modified`.
    pub modified: i64,
    pub iat: i64,
    pub exp: i64,
    pub typ: TokenType,
}

/// Claims of a media URL: file `obj`'s content `blob` for user `sub` (or, with `shr`, for the
/// visitors of that share; `sub` is then the owner), reusable until `exp` for every ranged
/// request a player makes. Checked again on every request: the user still active, not banned
/// and not signed out everywhere since `user_version`, the share still serving the file with
/// previews allowed, the file still live with that content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaClaims {
    pub sub: UserId,
    pub obj: ObjectId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shr: Option<Uuid>,
    /// The content (blob id) the URL serves: a replaced content ends it.
    pub blob: String,
    #[serde(default)]
    pub user_version: i64,
    pub iat: i64,
    pub exp: i64,
    pub typ: TokenType,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("token expired")]
    Expired,
    #[error("token invalid")]
    Invalid,
}

/// Issues and verifies tokens with the configured signing secret.
#[derive(Clone)]
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl TokenKeys {
    pub fn new(secret: &Secret) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp", "iat", "sub"]);
        Self {
            encoding: EncodingKey::from_secret(secret.expose().as_bytes()),
            decoding: DecodingKey::from_secret(secret.expose().as_bytes()),
            validation,
        }
    }

    pub fn sign<T: Serialize>(&self, claims: &T) -> String {
        // HS256 over serialisable claims cannot fail.
        encode(&Header::new(Algorithm::HS256), claims, &self.encoding).unwrap_or_default()
    }

    fn verify<T: DeserializeOwned>(&self, token: &str) -> Result<T, TokenError> {
        decode::<T>(token, &self.decoding, &self.validation).map(|data| data.claims).map_err(|e| match e.kind() {
            JwtErrorKind::ExpiredSignature => TokenError::Expired,
            _ => TokenError::Invalid,
        })
    }

    pub fn verify_access(&self, token: &str) -> Result<JwtPayload, TokenError> {
        let claims: JwtPayload = self.verify(token)?;
        if claims.typ == TokenType::Access { Ok(claims) } else { Err(TokenError::Invalid) }
    }

    pub fn verify_download(&self, token: &str) -> Result<DownloadClaims, TokenError> {
        let claims: DownloadClaims = self.verify(token)?;
        if claims.typ == TokenType::Download { Ok(claims) } else { Err(TokenError::Invalid) }
    }

    pub fn verify_wopi(&self, token: &str) -> Result<WopiClaims, TokenError> {
        let claims: WopiClaims = self.verify(token)?;
        if claims.typ == TokenType::Wopi { Ok(claims) } else { Err(TokenError::Invalid) }
    }

    pub fn verify_blob(&self, token: &str) -> Result<BlobClaims, TokenError> {
        let claims: BlobClaims = self.verify(token)?;
        if claims.typ == TokenType::Blob { Ok(claims) } else { Err(TokenError::Invalid) }
    }

    pub fn verify_media(&self, token: &str) -> Result<MediaClaims, TokenError> {
        let claims: MediaClaims = self.verify(token)?;
        if claims.typ == TokenType::Media { Ok(claims) } else { Err(TokenError::Invalid) }
    }

    pub fn verify_share_grant(&self, token: &str) -> Result<ShareGrantClaims, TokenError> {
        let claims: ShareGrantClaims = self.verify(token)?;
        if claims.typ == TokenType::ShareGrant { Ok(claims) } else { Err(TokenError::Invalid) }
    }

    pub fn verify_refresh(&self, token: &str) -> Result<RefreshClaims, TokenError> {
        let claims: RefreshClaims = self.verify(token)?;
        if claims.typ == TokenType::Refresh { Ok(claims) } else { Err(TokenError::Invalid) }
    }
}

/// A token that does not verify, as the 401 every front end answers.
pub fn token_error(err: TokenError) -> ServiceError {
    match err {
        TokenError::Expired => {
            ServiceError::new(ErrorKind::Unauthorized, codes::AUTH_TOKEN_EXPIRED, "token has expired")
        }
        TokenError::Invalid => {
            ServiceError::new(ErrorKind::Unauthorized, codes::AUTH_INVALID_TOKEN, "token is invalid")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> TokenKeys {
        TokenKeys::new(&Secret::new("0123456789abcdef0123456789abcdef"))
    }

    fn access(iat: i64, exp: i64) -> JwtPayload {
        JwtPayload {
            sub: UserId::random(),
            jti: Uuid::new_v4(),
            iat,
            exp,
            typ: TokenType::Access,
            group: GroupClaims {
                id: Uuid::new_v4(),
                name: "Users".into(),
                admin: false,
                max_storage: 5 * 1024 * 1024 * 1024,
                permissions: GroupPermissions::default(),
                version: 0,
            },
            user_version: 0,
        }
    }

    fn now() -> i64 {
        time::OffsetDateTime::now_utc().unix_timestamp()
    }

    #[test]
    fn access_token_round_trips_with_group_claims() {
        let claims = access(now(), now() + 3600);
        let token = keys().sign(&claims);
        assert_eq!(keys().verify_access(&token).unwrap(), claims);
    }

    #[test]
    fn expired_tampered_and_foreign_tokens_are_refused() {
        let expired = keys().sign(&access(now() - 7200, now() - 1));
        assert_eq!(keys().verify_access(&expired), Err(TokenError::Expired));

        let token = keys().sign(&access(now(), now() + 3600));
        let (rest, signature) = token.rsplit_once('.').unwrap();
        let flipped = if signature.starts_with('A') { "B" } else { "A" };
        assert_eq!(keys().verify_access(&format!("{rest}.{flipped}{}", &signature[1..])), Err(TokenError::Invalid));

        let other = TokenKeys::new(&Secret::new("another-secret-another-secret-xx"));
        assert_eq!(other.verify_access(&token), Err(TokenError::Invalid));
        assert_eq!(keys().verify_access("not.a.jwt"), Err(TokenError::Invalid));
    }

    #[test]
    fn a_refresh_token_is_not_an_access_token_and_back() {
        let refresh = RefreshClaims {
            sub: UserId::random(),
            jti: Uuid::new_v4(),
            fam: Uuid::new_v4(),
            iat: now(),
            exp: now() + 60,
            typ: TokenType::Refresh,
        };
        let token = keys().sign(&refresh);
        assert_eq!(keys().verify_access(&token), Err(TokenError::Invalid));
        assert_eq!(keys().verify_refresh(&token).unwrap(), refresh);
        let access = keys().sign(&access(now(), now() + 60));
        assert_eq!(keys().verify_refresh(&access), Err(TokenError::Invalid));
    }

    #[test]
    fn the_none_algorithm_is_refused() {
        use base64::Engine;
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header = engine.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let body = engine.encode(serde_json::to_vec(&access(now(), now() + 60)).unwrap());
        assert_eq!(keys().verify_access(&format!("{header}.{body}.")), Err(TokenError::Invalid));
    }
}
