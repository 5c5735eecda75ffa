//! The one error vocabulary of the service layer: what went wrong ([`ErrorKind`]), a stable code
//! from [`crate::error_codes`] and a message safe to show. Each front end (the JSON API, WebDAV,
//! the node router) renders it in its own dialect; nothing here knows HTTP.

use std::borrow::Cow;
use std::fmt;

use nubo_model::db::DbError;

use crate::error_codes as codes;

/// What went wrong, in terms every front end can map to its own status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed (syntax, unreadable parameters).
    BadRequest,
    /// No valid credentials were presented.
    Unauthorized,
    /// The caller is known but may not do this.
    Forbidden,
    /// No such record, or not one the caller may see.
    NotFound,
    /// The method is not allowed on this resource.
    MethodNotAllowed,
    /// The request clashes with current state (name taken, cycle, token already used).
    Conflict,
    /// The body or file is larger than allowed.
    PayloadTooLarge,
    /// The body has a media type the operation does not take.
    UnsupportedMediaType,
    /// Well-formed but invalid values.
    Validation,
    /// Too many requests; try later.
    RateLimited,
    /// Something more must come with the request (the second factor of a sign-in).
    PreconditionRequired,
    /// The operation exists in the interface but is not built yet.
    NotImplemented,
    /// A dependency (storage node, database) is unreachable.
    Unavailable,
    /// A dependency answered, but with an error (storage misconfigured or failing).
    BadGateway,
    /// The record existed but is no longer available (an expired or used-up share).
    Gone,
    /// A requested range lies outside the content.
    RangeNotSatisfiable,
    /// The caller's storage quota does not allow this.
    QuotaExceeded,
    /// A fault of ours; details go to the log only.
    Internal,
}

/// The one error vocabulary of the service layer: a kind, a stable code (`area.snake_case`), a
/// message safe to show to the caller, the offending field when there is one, and, for the log
/// only, the underlying cause.
#[derive(Debug)]
pub struct ServiceError {
    pub kind: ErrorKind,
    pub code: Cow<'static, str>,
    pub message: Cow<'static, str>,
    pub field: Option<String>,
    /// Seconds after which asking again can succeed (`Retry-After`), when that is known.
    pub retry_after: Option<u64>,
    pub source: Option<anyhow::Error>,
}

pub type ServiceResult<T> = Result<T, ServiceError>;

impl ServiceError {
    pub fn new(kind: ErrorKind, code: impl Into<Cow<'static, str>>, message: impl Into<Cow<'static, str>>) -> Self {
        Self { kind, code: code.into(), message: message.into(), field: None, retry_after: None, source: None }
    }

    /// Tells the caller to ask again after `seconds` (a refusal that passes soon).
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// Names the request field the error is about.
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn not_found(code: &'static str, message: &'static str) -> Self {
        Self::new(ErrorKind::NotFound, code, message)
    }

    pub fn conflict(code: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::Conflict, code, message)
    }

    pub fn validation(field: &str, message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::Validation, codes::REQUEST_INVALID_FIELD, message).with_field(field)
    }

    /// A request body over the limit of where it goes.
    pub fn request_too_large() -> Self {
        Self::new(ErrorKind::PayloadTooLarge, codes::REQUEST_TOO_LARGE, "request body is too large")
    }

    /// The token's user was deleted: refused at every access level.
    pub fn user_not_found() -> Self {
        Self::new(ErrorKind::Unauthorized, codes::AUTH_USER_NOT_FOUND, "the token's user no longer exists")
    }

    /// A credential issued before a change that ends it (a ban, a sign-out everywhere, new
    /// privileges): 401, so the client asks for a new one.
    pub fn token_revoked(message: &'static str) -> Self {
        Self::new(ErrorKind::Unauthorized, codes::AUTH_TOKEN_REVOKED, message)
    }

    /// The user is banned or not active: refused at every access level and at sign-in.
    pub fn user_inactive() -> Self {
        Self::new(ErrorKind::Forbidden, codes::AUTH_USER_INACTIVE, "this account is not active")
    }

    /// A fault of ours: the caller sees a generic message, the log sees `cause`.
    pub fn internal(cause: impl Into<anyhow::Error>) -> Self {
        let mut err = Self::new(ErrorKind::Internal, codes::SERVER_INTERNAL, "internal server error");
        err.source = Some(cause.into());
        err
    }
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if let Some(source) = &self.source {
            write!(f, " ({source:#})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ServiceError {}

impl From<DbError> for ServiceError {
    fn from(err: DbError) -> Self {
        ServiceError::internal(err)
    }
}

impl From<nubo_common::storage::StorageError> for ServiceError {
    fn from(err: nubo_common::storage::StorageError) -> Self {
        use nubo_common::storage::StorageError as E;
        let (kind, code, message): (ErrorKind, &'static str, String) = match &err {
            E::LengthMismatch { expected, actual } => (
                ErrorKind::BadRequest,
                codes::UPLOAD_WRONG_LENGTH,
                format!("expected exactly {expected} bytes, got {actual}"),
            ),
            E::ChunkOutOfRange { .. } => (ErrorKind::Validation, codes::UPLOAD_CHUNK_OUT_OF_RANGE, err.to_string()),
            E::TooLarge { limit } => (
                ErrorKind::PayloadTooLarge,
                codes::FILE_TOO_LARGE,
                format!("the file is larger than the policy's limit of {limit} bytes"),
            ),
            E::SizeUnsupported { size, .. } => (
                ErrorKind::PayloadTooLarge,
                codes::FILE_TOO_LARGE,
                format!("the policy's storage cannot hold a file of {size} bytes"),
            ),
            E::Body(_) => (ErrorKind::BadRequest, codes::REQUEST_BODY_FAILED, "the request body broke off".to_owned()),
            E::Unavailable(_) => {
                (ErrorKind::Unavailable, codes::STORAGE_UNAVAILABLE, "storage is unavailable, try again".to_owned())
            }
            E::NotFound(_) | E::AlreadyExists(_) | E::InvalidKey(_) | E::Failed(_) => {
                return ServiceError::internal(anyhow::Error::new(err).context("storage"));
            }
        };
        let mut e = ServiceError::new(kind, code, message);
        e.source = Some(err.into());
        e
    }
}
