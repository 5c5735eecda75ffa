//! The activity log's vocabulary: the actions recorded, each a stable dotted name
//! that the API filters on and clients show. (Their dotted names are not error codes: the
//! error-code scan of `error_codes` skips this file.)

use serde::{Deserialize, Serialize};

/// A state-changing action the activity log records, named by a stable dotted word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum Action {
    /// A sign-in succeeded (any provider; `detail.provider`).
    #[serde(rename = "user.sign_in")]
    SignIn,
    /// A sign-in was refused: the actor is the account the e-mail address names, if any;
    /// `detail` has the provider, the refusal's code and, for a password, the address tried.
    #[serde(rename = "user.sign_in_failed")]
    SignInFailed,
    /// A new account registered itself.
    #[serde(rename = "user.register")]
    Register,
    /// The caller changed their password.
    #[serde(rename = "user.password_change")]
    PasswordChange,
    /// The caller changed one of their settings (`detail.option`, never its value).
    #[serde(rename = "user.settings_update")]
    SettingsUpdate,
    /// A chunked upload became a file.
    #[serde(rename = "file.upload")]
    FileUpload,
    /// A file was written outside an upload session (`PATCH`/`POST /file/content`, WebDAV
    /// `PUT`, a WOPI save): `detail.replaced` says whether it got new content.
    #[serde(rename = "file.write")]
    FileWrite,
    /// A folder was created.
    #[serde(rename = "folder.create")]
    FolderCreate,
    /// An object was renamed (`detail.from`: the old name).
    #[serde(rename = "object.rename")]
    ObjectRename,
    /// Objects moved to another folder (`detail.count`, `detail.ids`, `detail.to`).
    #[serde(rename = "object.move")]
    ObjectMove,
    /// Objects were copied (`detail.count`, `detail.ids` of the originals, `detail.to`).
    #[serde(rename = "object.copy")]
    ObjectCopy,
    /// Objects went to the trash (`detail.count`, `detail.ids`).
    #[serde(rename = "object.trash")]
    ObjectTrash,
    /// Objects came back from the trash.
    #[serde(rename = "object.restore")]
    ObjectRestore,
    /// Objects were deleted for good.
    #[serde(rename = "object.delete")]
    ObjectDelete,
    #[serde(rename = "share.create")]
    ShareCreate,
    #[serde(rename = "share.update")]
    ShareUpdate,
    #[serde(rename = "share.delete")]
    ShareDelete,
    /// A redeem code was used (`detail.kind`).
    #[serde(rename = "redeem.use")]
    Redeem,
    #[serde(rename = "admin.user_create")]
    AdminUserCreate,
    /// An administrator changed a user (`detail.fields`: the names of what changed).
    #[serde(rename = "admin.user_update")]
    AdminUserUpdate,
    /// An administrator banned a user (also through a report's `ban_owner`).
    #[serde(rename = "admin.ban")]
    AdminBan,
    #[serde(rename = "admin.user_delete")]
    AdminUserDelete,
    /// An administrator changed site settings (`detail.names`, never the values).
    #[serde(rename = "admin.settings_update")]
    AdminSettingsUpdate,
    #[serde(rename = "admin.group_create")]
    AdminGroupCreate,
    #[serde(rename = "admin.group_update")]
    AdminGroupUpdate,
    #[serde(rename = "admin.group_delete")]
    AdminGroupDelete,
    #[serde(rename = "admin.policy_create")]
    AdminPolicyCreate,
    #[serde(rename = "admin.policy_update")]
    AdminPolicyUpdate,
    #[serde(rename = "admin.policy_delete")]
    AdminPolicyDelete,
    /// An administrator decided on a report (`detail.action`).
    #[serde(rename = "admin.report_decision")]
    AdminReportDecision,
    /// An administrator removed a share from the share list.
    #[serde(rename = "admin.share_delete")]
    AdminShareDelete,
}

impl Action {
    pub const ALL: &'static [Action] = &[
        Action::SignIn,
        Action::SignInFailed,
        Action::Register,
        Action::PasswordChange,
        Action::SettingsUpdate,
        Action::FileUpload,
        Action::FileWrite,
        Action::FolderCreate,
        Action::ObjectRename,
        Action::ObjectMove,
        Action::ObjectCopy,
        Action::ObjectTrash,
        Action::ObjectRestore,
        Action::ObjectDelete,
        Action::ShareCreate,
        Action::ShareUpdate,
        Action::ShareDelete,
        Action::Redeem,
        Action::AdminUserCreate,
        Action::AdminUserUpdate,
        Action::AdminBan,
        Action::AdminUserDelete,
        Action::AdminSettingsUpdate,
        Action::AdminGroupCreate,
        Action::AdminGroupUpdate,
        Action::AdminGroupDelete,
        Action::AdminPolicyCreate,
        Action::AdminPolicyUpdate,
        Action::AdminPolicyDelete,
        Action::AdminReportDecision,
        Action::AdminShareDelete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::SignIn => "user.sign_in",
            Action::SignInFailed => "user.sign_in_failed",
            Action::Register => "user.register",
            Action::PasswordChange => "user.password_change",
            Action::SettingsUpdate => "user.settings_update",
            Action::FileUpload => "file.upload",
            Action::FileWrite => "file.write",
            Action::FolderCreate => "folder.create",
            Action::ObjectRename => "object.rename",
            Action::ObjectMove => "object.move",
            Action::ObjectCopy => "object.copy",
            Action::ObjectTrash => "object.trash",
            Action::ObjectRestore => "object.restore",
            Action::ObjectDelete => "object.delete",
            Action::ShareCreate => "share.create",
            Action::ShareUpdate => "share.update",
            Action::ShareDelete => "share.delete",
            Action::Redeem => "redeem.use",
            Action::AdminUserCreate => "admin.user_create",
            Action::AdminUserUpdate => "admin.user_update",
            Action::AdminBan => "admin.ban",
            Action::AdminUserDelete => "admin.user_delete",
            Action::AdminSettingsUpdate => "admin.settings_update",
            Action::AdminGroupCreate => "admin.group_create",
            Action::AdminGroupUpdate => "admin.group_update",
            Action::AdminGroupDelete => "admin.group_delete",
            Action::AdminPolicyCreate => "admin.policy_create",
            Action::AdminPolicyUpdate => "admin.policy_update",
            Action::AdminPolicyDelete => "admin.policy_delete",
            Action::AdminReportDecision => "admin.report_decision",
            Action::AdminShareDelete => "admin.share_delete",
        }
    }
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
        assert_eq!(Action::parse("nothing"), None);
    }
}
