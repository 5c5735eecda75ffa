//! Users as values: account status and e-mail addresses.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Account status. Only `ACTIVE` may use the service; every other value is refused at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum UserStatus {
    /// May sign in and use the service.
    Active,
    /// Registered but not yet allowed in (e.g. awaiting e-mail confirmation).
    Inactive,
    /// Banned by an administrator.
    Banned,
}

impl UserStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            UserStatus::Active => "ACTIVE",
            UserStatus::Inactive => "INACTIVE",
            UserStatus::Banned => "BANNED",
        }
    }
}

impl FromStr for UserStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ACTIVE" => Ok(UserStatus::Active),
            "INACTIVE" => Ok(UserStatus::Inactive),
            "BANNED" => Ok(UserStatus::Banned),
            other => Err(format!("unknown user status {other:?}")),
        }
    }
}

/// A syntactically plausible e-mail address, trimmed and lower-cased so that one mailbox maps
/// to one account. Deliverability is proven by mail, not by parsing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Email(String);

impl Email {
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let email = raw.trim().to_lowercase();
        if email.len() > 254 {
            return Err("e-mail address is longer than 254 characters");
        }
        let Some((local, domain)) = email.rsplit_once('@') else {
            return Err("e-mail address needs an @");
        };
        if local.is_empty() || domain.is_empty() || !domain.contains('.') {
            return Err("e-mail address needs a name and a domain");
        }
        if domain.starts_with('.') || domain.ends_with('.') || domain.contains("..") {
            return Err("e-mail domain is malformed");
        }
        if email.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("e-mail address contains white space");
        }
        Ok(Self(email))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Filters of the administrators' user list; `None` means no restriction.
#[derive(Debug, Default, Clone)]
pub struct UserFilter {
    pub group_id: Option<String>,
    pub status: Option<String>,
    pub email_contains: Option<String>,
    pub nickname_contains: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips_through_text() {
        for status in [UserStatus::Active, UserStatus::Inactive, UserStatus::Banned] {
            assert_eq!(status.as_str().parse::<UserStatus>().unwrap(), status);
        }
        assert!("active".parse::<UserStatus>().is_err());
    }

    #[test]
    fn emails_are_normalised() {
        assert_eq!(Email::parse("  Alice@Example.COM ").unwrap().as_str(), "alice@example.com");
    }

    #[test]
    fn malformed_emails_are_refused() {
        for bad in ["", "alice", "@example.com", "alice@", "alice@localhost", "a b@example.com", "a@.com", "a@b..com"] {
            assert!(Email::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
