//! The activity log's vocabulary: the actions recorded, each a stable dotted name
//! (`user.sign_in`, `admin.ban`) that the API filters on and clients show.

use serde::{Deserialize, Serialize};

macro_rules! actions {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// A state-changing action the activity log records.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
        pub enum Action {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)*
        }

        impl Action {
            pub const ALL: &'static [Action] = &[$(Action::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Action::$variant => $name,)*
                }
            }
        }
    };
}

actions! {
    /// A sign-in succeeded (any provider; `detail.provider`).
    SignIn = "user.sign_in",
    /// A sign-in was refused: the actor is the account the e-mail address names, if any;
    /// `detail` has the provider, the refusal's code and, for a password, the address tried.
    SignInFailed = "user.sign_in_failed",
    /// A new account registered itself.
    Register = "user.register",
    /// The caller changed their password.
    PasswordChange = "user.password_change",
    /// The caller changed one of their settings (`detail.option`, never its value).
    SettingsUpdate = "user.settings_update",
    /// A chunked upload became a file.
    FileUpload = "file.upload",
    /// Objects went to the trash (`detail.count`, `detail.ids`).
    ObjectTrash = "object.trash",
    /// Objects came back from the trash.
    ObjectRestore = "object.restore",
    /// Objects were deleted for good.
    ObjectDelete = "object.delete",
    ShareCreate = "share.create",
    ShareUpdate = "share.update",
    ShareDelete = "share.delete",
    /// A redeem code was used (`detail.kind`).
    Redeem = "redeem.use",
    AdminUserCreate = "admin.user_create",
    /// An administrator changed a user (`detail.fields`: the names of what changed).
    AdminUserUpdate = "admin.user_update",
    /// An administrator banned a user (also through a report's `ban_owner`).
    AdminBan = "admin.ban",
    AdminUserDelete = "admin.user_delete",
    /// An administrator changed site settings (`detail.names`, never the values).
    AdminSettingsUpdate = "admin.settings_update",
    AdminGroupCreate = "admin.group_create",
    AdminGroupUpdate = "admin.group_update",
    AdminGroupDelete = "admin.group_delete",
    AdminPolicyCreate = "admin.policy_create",
    AdminPolicyUpdate = "admin.policy_update",
    AdminPolicyDelete = "admin.policy_delete",
    /// An administrator decided on a report (`detail.action`).
    AdminReportDecision = "admin.report_decision",
    /// An administrator removed a share from the share list.
    AdminShareDelete = "admin.share_delete",
}

impl Action {
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|action| action.as_str() == text)
    }
}

/// What kind of record an activity is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    User,
    Object,
    Share,
    Group,
    Policy,
    Settings,
    Report,
    Redeem,
}

impl TargetKind {
    pub const ALL: [TargetKind; 8] = [
        TargetKind::User,
        TargetKind::Object,
        TargetKind::Share,
        TargetKind::Group,
        TargetKind::Policy,
        TargetKind::Settings,
        TargetKind::Report,
        TargetKind::Redeem,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::User => "user",
            TargetKind::Object => "object",
            TargetKind::Share => "share",
            TargetKind::Group => "group",
            TargetKind::Policy => "policy",
            TargetKind::Settings => "settings",
            TargetKind::Report => "report",
            TargetKind::Redeem => "redeem",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_name_is_dotted_unique_and_round_trips() {
        let mut seen = std::collections::HashSet::new();
        for &action in Action::ALL {
            let name = action.as_str();
            assert!(
                name.split('.').count() == 2 && name.chars().all(|c| c.is_ascii_lowercase() || c == '.' || c == '_')
            );
            assert!(seen.insert(name), "{name} twice");
            assert_eq!(Action::parse(name), Some(action));
            assert_eq!(serde_json::to_value(action).unwrap(), serde_json::Value::String(name.to_owned()));
        }
        assert_eq!(Action::parse("user.unknown"), None);
    }
}
