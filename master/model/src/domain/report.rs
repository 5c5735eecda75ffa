//! Reports of shares as values: why a visitor reports a share and what an administrator does
//! about it.

use serde::{Deserialize, Serialize};

/// Why a share is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReportReason {
    Spam,
    Illegal,
    Copyright,
    Malware,
    Other,
}

impl ReportReason {
    pub const ALL: [ReportReason; 5] = [
        ReportReason::Spam,
        ReportReason::Illegal,
        ReportReason::Copyright,
        ReportReason::Malware,
        ReportReason::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReportReason::Spam => "spam",
            ReportReason::Illegal => "illegal",
            ReportReason::Copyright => "copyright",
            ReportReason::Malware => "malware",
            ReportReason::Other => "other",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|reason| reason.as_str() == text)
    }
}

/// What an administrator decides about a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReportAction {
    /// Nothing wrong: the share stays.
    Dismiss,
    /// The share is closed to visitors (404); its owner sees it as removed.
    RemoveShare,
    /// The share's owner is banned (every share of theirs closes with it).
    BanOwner,
}

impl ReportAction {
    pub const ALL: [ReportAction; 3] = [ReportAction::Dismiss, ReportAction::RemoveShare, ReportAction::BanOwner];

    pub fn as_str(self) -> &'static str {
        match self {
            ReportAction::Dismiss => "dismiss",
            ReportAction::RemoveShare => "remove_share",
            ReportAction::BanOwner => "ban_owner",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|action| action.as_str() == text)
    }
}

/// Whether a report still waits for an administrator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReportStatus {
    Open,
    Handled,
}

/// The longest description a reporter may write, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 2000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_and_actions_read_back_as_they_are_stored() {
        for reason in ReportReason::ALL {
            assert_eq!(ReportReason::parse(reason.as_str()), Some(reason));
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
        }
        for action in ReportAction::ALL {
            assert_eq!(ReportAction::parse(action.as_str()), Some(action));
            assert_eq!(serde_json::to_value(action).unwrap(), action.as_str());
        }
        assert_eq!(ReportReason::parse("boring"), None);
    }
}
