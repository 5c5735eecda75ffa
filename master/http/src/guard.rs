//! The three access levels as axum extractors (the tokens and revocation they check live in
//! `auth`):
//! - [`JwtRequired`]: a valid access token (and no ban), no database lookup;
//! - [`AdminRequired`]: the same plus the admin flag of the token's group claims, no database lookup;
//! - [`AuthRequired`]: the same as `JwtRequired` plus the user loaded from the database, which must be `ACTIVE`.
//!
//! Missing, malformed, expired or wrongly signed tokens answer 401 with `WWW-Authenticate: Bearer`.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use crate::error::ApiError;
use nubo_service::context::Context;
use nubo_service::credentials::revocation;
use nubo_service::credentials::token::{JwtPayload, token_error};
use nubo_service::error::{ErrorKind, ServiceError, ServiceResult};
use nubo_service::error_codes as codes;
use nubo_service::identity::accounts::{self, ActiveUser};

/// The bearer token of the request, if it carries one.
pub fn bearer_token(parts: &Parts) -> ServiceResult<&str> {
    let header = parts.headers.get(AUTHORIZATION).ok_or_else(|| {
        ServiceError::new(ErrorKind::Unauthorized, codes::AUTH_MISSING_TOKEN, "an access token is required")
    })?;
    header
        .to_str()
        .ok()
        .and_then(|value| value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")))
        .map(str::trim)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| {
            ServiceError::new(
                ErrorKind::Unauthorized,
                codes::AUTH_INVALID_TOKEN,
                "expected an Authorization: Bearer token",
            )
        })
}

/// `jwt_required`: a valid, unrevoked access token.
#[derive(Debug, Clone)]
pub struct JwtRequired(pub JwtPayload);

impl FromRequestParts<Context> for JwtRequired {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Context) -> Result<Self, Self::Rejection> {
        let claims = state.tokens().verify_access(bearer_token(parts)?).map_err(token_error)?;
        revocation::check(state.store(), &claims).await?;
        Ok(Self(claims))
    }
}

/// `admin_required`: a valid access token whose group claims grant administration.
#[derive(Debug, Clone)]
pub struct AdminRequired(pub JwtPayload);

impl FromRequestParts<Context> for AdminRequired {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Context) -> Result<Self, Self::Rejection> {
        let JwtRequired(claims) = JwtRequired::from_request_parts(parts, state).await?;
        if !claims.group.admin {
            return Err(
                ServiceError::new(ErrorKind::Forbidden, codes::AUTH_ADMIN_REQUIRED, "administrators only").into()
            );
        }
        Ok(Self(claims))
    }
}

/// `auth_required`: a valid access token and an `ACTIVE` user, loaded from the database.
#[derive(Debug, Clone)]
pub struct AuthRequired {
    pub claims: JwtPayload,
    pub user: ActiveUser,
}

impl FromRequestParts<Context> for AuthRequired {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Context) -> Result<Self, Self::Rejection> {
        let JwtRequired(claims) = JwtRequired::from_request_parts(parts, state).await?;
        let user = accounts::load_active_user(state, claims.sub).await?;
        Ok(Self { claims, user })
    }
}

/// [`AuthRequired`] for streams a browser opens with `EventSource`, which cannot send headers:
/// the access token comes in the `Authorization` header or, failing that, in the
/// `access_token` query parameter.
#[derive(Debug, Clone)]
pub struct StreamAuth(pub AuthRequired);

impl FromRequestParts<Context> for StreamAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Context) -> Result<Self, Self::Rejection> {
        if parts.headers.contains_key(AUTHORIZATION) {
            return Ok(Self(AuthRequired::from_request_parts(parts, state).await?));
        }
        let query = axum::extract::Query::<std::collections::HashMap<String, String>>::try_from_uri(&parts.uri).ok();
        let token = query
            .and_then(|axum::extract::Query(mut query)| query.remove("access_token"))
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                ServiceError::new(ErrorKind::Unauthorized, codes::AUTH_MISSING_TOKEN, "an access token is required")
            })?;
        let claims = state.tokens().verify_access(&token).map_err(token_error)?;
        revocation::check(state.store(), &claims).await?;
        let user = accounts::load_active_user(state, claims.sub).await?;
        Ok(Self(AuthRequired { claims, user }))
    }
}

/// No access level, but who is asking when the request carries an access token: `None` without
/// one; a token that is sent must be valid (401 as for [`JwtRequired`]).
#[derive(Debug, Clone)]
pub struct MaybeSignedIn(pub Option<JwtPayload>);

impl FromRequestParts<Context> for MaybeSignedIn {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Context) -> Result<Self, Self::Rejection> {
        if !parts.headers.contains_key(AUTHORIZATION) {
            return Ok(Self(None));
        }
        let JwtRequired(claims) = JwtRequired::from_request_parts(parts, state).await?;
        Ok(Self(Some(claims)))
    }
}
