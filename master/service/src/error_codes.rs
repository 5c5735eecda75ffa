//! Every stable error code the master answers, one constant each, and the list [`ALL`]:
//! `docs/src/errors.md` lists exactly these codes, and call sites name the constants (tests below
//! check both; the second scans `master/src` for `"area.snake_case"` literals). Storage
//! nodes' own codes are the node's (`slave/src/error.rs`); a response with a status that has
//! no code of its own reads `http.<status>` (see `http::error`).

/// Declares each code as a constant and collects them all in [`ALL`], in the documents' order.
macro_rules! codes {
    ($($name:ident = $code:literal;)*) => {
        $(#[doc = concat!("`", $code, "`")] pub const $name: &str = $code;)*
        /// Every code above, in the order `docs/src/errors.md` lists them.
        pub const ALL: &[&str] = &[$($code),*];
    };
}

codes! {
    ROUTE_NOT_FOUND = "route.not_found";
    ROUTE_METHOD_NOT_ALLOWED = "route.method_not_allowed";
    ROUTE_NOT_IMPLEMENTED = "route.not_implemented";
    WEB_NOT_BUILT = "web.not_built";
    SITE_UNHEALTHY = "site.unhealthy";

    REQUEST_MALFORMED_JSON = "request.malformed_json";
    REQUEST_UNREADABLE_BODY = "request.unreadable_body";
    REQUEST_INVALID_QUERY = "request.invalid_query";
    REQUEST_INVALID_PATH = "request.invalid_path";
    REQUEST_UNSUPPORTED_MEDIA_TYPE = "request.unsupported_media_type";
    REQUEST_TOO_LARGE = "request.too_large";
    REQUEST_INVALID_BODY = "request.invalid_body";
    REQUEST_INVALID_FIELD = "request.invalid_field";
    REQUEST_TIMEOUT = "request.timeout";
    REQUEST_TOO_MANY_CONNECTIONS = "request.too_many_connections";
    REQUEST_SERVER_BUSY = "request.server_busy";

    AUTH_MISSING_TOKEN = "auth.missing_token";
    AUTH_INVALID_TOKEN = "auth.invalid_token";
    AUTH_TOKEN_EXPIRED = "auth.token_expired";
    AUTH_TOKEN_REVOKED = "auth.token_revoked";
    AUTH_USER_NOT_FOUND = "auth.user_not_found";
    AUTH_USER_INACTIVE = "auth.user_inactive";
    AUTH_ADMIN_REQUIRED = "auth.admin_required";
    AUTH_INVALID_CREDENTIALS = "auth.invalid_credentials";
    AUTH_RATE_LIMITED = "auth.rate_limited";
    AUTH_PROVIDER_DISABLED = "auth.provider_disabled";
    AUTH_REGISTRATION_UNSUPPORTED = "auth.registration_unsupported";
    AUTH_REFRESH_TOKEN_INVALID = "auth.refresh_token_invalid";
    AUTH_REFRESH_TOKEN_REUSED = "auth.refresh_token_reused";
    AUTH_PASSKEY_CHALLENGE_INVALID = "auth.passkey_challenge_invalid";
    AUTH_PASSKEY_REJECTED = "auth.passkey_rejected";
    AUTH_PASSKEY_SITE_URL = "auth.passkey_site_url";
    AUTH_PASSKEY_EXISTS = "auth.passkey_exists";
    AUTH_PASSKEY_NOT_FOUND = "auth.passkey_not_found";
    AUTH_LAST_SIGN_IN_METHOD = "auth.last_sign_in_method";
    AUTH_TWO_FACTOR_REQUIRED = "auth.two_factor_required";
    AUTH_TWO_FACTOR_INVALID = "auth.two_factor_invalid";
    AUTH_MAGIC_LINK_INVALID = "auth.magic_link_invalid";
    AUTH_MAGIC_LINK_USED = "auth.magic_link_used";
    AUTH_RESET_TOKEN_INVALID = "auth.reset_token_invalid";
    AUTH_RESET_TOKEN_USED = "auth.reset_token_used";
    AUTH_VERIFY_TOKEN_INVALID = "auth.verify_token_invalid";
    AUTH_VERIFY_TOKEN_USED = "auth.verify_token_used";
    AUTH_OAUTH_PROVIDER_UNKNOWN = "auth.oauth_provider_unknown";
    AUTH_OAUTH_NOT_CONFIGURED = "auth.oauth_not_configured";
    AUTH_OAUTH_STATE_INVALID = "auth.oauth_state_invalid";
    AUTH_OAUTH_EXCHANGE_FAILED = "auth.oauth_exchange_failed";
    AUTH_OAUTH_NO_EMAIL = "auth.oauth_no_email";
    AUTH_OAUTH_EMAIL_TAKEN = "auth.oauth_email_taken";
    AUTH_OAUTH_TICKET_INVALID = "auth.oauth_ticket_invalid";
    AUTH_OIDC_DISCOVERY_FAILED = "auth.oidc_discovery_failed";
    AUTH_OIDC_SIGNATURE_INVALID = "auth.oidc_signature_invalid";
    AUTH_OIDC_ISSUER_INVALID = "auth.oidc_issuer_invalid";
    AUTH_OIDC_AUDIENCE_INVALID = "auth.oidc_audience_invalid";
    AUTH_OIDC_TOKEN_EXPIRED = "auth.oidc_token_expired";
    AUTH_OIDC_NONCE_INVALID = "auth.oidc_nonce_invalid";
    AUTH_IDENTITY_LINKED_ELSEWHERE = "auth.identity_linked_elsewhere";
    AUTH_IDENTITY_ALREADY_LINKED = "auth.identity_already_linked";
    AUTH_IDENTITY_NOT_FOUND = "auth.identity_not_found";
    CAPTCHA_REQUIRED = "captcha.required";
    CAPTCHA_INVALID = "captcha.invalid";
    CAPTCHA_UNAVAILABLE = "captcha.unavailable";
    CAPTCHA_NOT_BUILTIN = "captcha.not_builtin";

    USER_EMAIL_TAKEN = "user.email_taken";
    USER_REGISTRATION_CLOSED = "user.registration_closed";
    USER_NO_REGISTRATION_GROUP = "user.no_registration_group";
    USER_WRONG_PASSWORD = "user.wrong_password";
    USER_NO_PASSWORD = "user.no_password";
    USER_UNKNOWN_SETTING = "user.unknown_setting";
    USER_NOT_FOUND = "user.not_found";
    USER_CANNOT_BAN_SELF = "user.cannot_ban_self";
    USER_CANNOT_DELETE_SELF = "user.cannot_delete_self";
    USER_TWO_FACTOR_ENABLED = "user.two_factor_enabled";
    USER_TWO_FACTOR_NOT_ENABLED = "user.two_factor_not_enabled";
    USER_TWO_FACTOR_NO_SETUP = "user.two_factor_no_setup";
    USER_TWO_FACTOR_WRONG_CODE = "user.two_factor_wrong_code";
    USER_AVATAR_NOT_IMAGE = "user.avatar_not_image";
    USER_AVATAR_TOO_LARGE = "user.avatar_too_large";
    USER_AVATAR_TOO_MANY_PIXELS = "user.avatar_too_many_pixels";
    USER_AVATAR_NOT_FOUND = "user.avatar_not_found";

    GROUP_NOT_FOUND = "group.not_found";
    GROUP_NAME_TAKEN = "group.name_taken";
    GROUP_HAS_USERS = "group.has_users";
    GROUP_LAST_ADMINISTRATOR = "group.last_administrator";

    THEME_NOT_FOUND = "theme.not_found";
    THEME_NAME_TAKEN = "theme.name_taken";
    THEME_AMBIGUOUS = "theme.ambiguous";

    OBJECT_NOT_FOUND = "object.not_found";
    OBJECT_NAME_TAKEN = "object.name_taken";
    OBJECT_CHANGED = "object.changed";
    OBJECT_NOT_A_FOLDER = "object.not_a_folder";
    OBJECT_NOT_A_FILE = "object.not_a_file";
    OBJECT_ROOT = "object.root";
    OBJECT_MOVE_CYCLE = "object.move_cycle";
    OBJECT_COPY_CYCLE = "object.copy_cycle";
    OBJECT_UPLOAD_IN_PROGRESS = "object.upload_in_progress";

    TRASH_NOT_FOUND = "trash.not_found";
    TRASH_PARENT_TRASHED = "trash.parent_trashed";

    POLICY_NOT_FOUND = "policy.not_found";
    POLICY_NOT_ALLOWED = "policy.not_allowed";
    POLICY_NAME_TAKEN = "policy.name_taken";
    POLICY_IN_USE = "policy.in_use";
    POLICY_UNREACHABLE = "policy.unreachable";

    FILE_TOO_LARGE = "file.too_large";

    STORAGE_QUOTA_EXCEEDED = "storage.quota_exceeded";
    STORAGE_UNAVAILABLE = "storage.unavailable";

    UPLOAD_NOT_FOUND = "upload.not_found";
    UPLOAD_EXPIRED = "upload.expired";
    UPLOAD_NOT_OPEN = "upload.not_open";
    UPLOAD_CHUNK_BUSY = "upload.chunk_busy";
    UPLOAD_FINISHING = "upload.finishing";
    UPLOAD_WRONG_LENGTH = "upload.wrong_length";
    UPLOAD_CHUNK_OUT_OF_RANGE = "upload.chunk_out_of_range";
    UPLOAD_INCOMPLETE = "upload.incomplete";
    UPLOAD_DIRECT_ONLY = "upload.direct_only";

    DOWNLOAD_TOKEN_USED = "download.token_used";
    DOWNLOAD_RANGE_NOT_SATISFIABLE = "download.range_not_satisfiable";
    MEDIA_CONTENT_CHANGED = "media.content_changed";

    ARCHIVE_NOT_FOUND = "archive.not_found";
    ARCHIVE_TOKEN_USED = "archive.token_used";

    SOURCE_NOT_FOUND = "source.not_found";

    METADATA_READ_ONLY = "metadata.read_only";

    PROPERTY_NOT_FOUND = "property.not_found";
    PROPERTY_NAME_TAKEN = "property.name_taken";

    TASK_NOT_FOUND = "task.not_found";
    TASK_FINISHED = "task.finished";
    IMPORT_SOURCE_UNSUPPORTED = "import.source_unsupported";
    IMPORT_DESTINATION_IS_FILE = "import.destination_is_file";

    THUMBNAIL_SIZE_UNSUPPORTED = "thumbnail.size_unsupported";
    THUMBNAIL_NOT_IMAGE = "thumbnail.not_image";
    THUMBNAIL_TOO_MANY_PIXELS = "thumbnail.too_many_pixels";
    THUMBNAIL_TOO_LARGE = "thumbnail.too_large";
    THUMBNAIL_TIMEOUT = "thumbnail.timeout";
    THUMBNAIL_FAILED = "thumbnail.failed";

    NODE_NOT_FOUND = "node.not_found";
    NODE_NAME_TAKEN = "node.name_taken";
    NODE_IN_USE = "node.in_use";
    NODE_REFUSED = "node.refused";
    NODE_UNREACHABLE = "node.unreachable";

    FETCH_NOT_ALLOWED = "fetch.not_allowed";
    FETCH_WRONG_KEY = "fetch.wrong_key";

    WEBDAV_NOT_ALLOWED = "webdav.not_allowed";
    WEBDAV_NAME_TAKEN = "webdav.name_taken";
    WEBDAV_ACCOUNT_NOT_FOUND = "webdav.account_not_found";

    AUTH_MISSING_CREDENTIALS = "auth.missing_credentials";

    TAG_NOT_FOUND = "tag.not_found";
    TAG_NAME_TAKEN = "tag.name_taken";
    TAG_AUTOMATIC = "tag.automatic";

    SHARE_NOT_FOUND = "share.not_found";
    SHARE_NOT_ALLOWED = "share.not_allowed";
    SHARE_EXPIRED = "share.expired";
    SHARE_DOWNLOAD_LIMIT_REACHED = "share.download_limit_reached";
    SHARE_PASSWORD_REQUIRED = "share.password_required";
    SHARE_PASSWORD_WRONG = "share.password_wrong";
    SHARE_RATE_LIMITED = "share.rate_limited";
    SHARE_PATH_INVALID = "share.path_invalid";
    SHARE_SAVE_NOT_ALLOWED = "share.save_not_allowed";
    SHARE_PREVIEW_NOT_ALLOWED = "share.preview_not_allowed";

    REPORT_NOT_FOUND = "report.not_found";
    REPORT_RATE_LIMITED = "report.rate_limited";
    REPORT_ALREADY_HANDLED = "report.already_handled";
    REPORT_SHARE_GONE = "report.share_gone";
    REPORT_OWNER_GONE = "report.owner_gone";
    STORAGE_PACK_NOT_FOUND = "storage.pack_not_found";

    REDEEM_NOT_FOUND = "redeem.not_found";
    REDEEM_INVALID_CODE = "redeem.invalid_code";
    REDEEM_USED_UP = "redeem.used_up";
    REDEEM_ALREADY_USED = "redeem.already_used";
    REDEEM_NOT_APPLICABLE = "redeem.not_applicable";
    REDEEM_RATE_LIMITED = "redeem.rate_limited";

    WEBDAV_READ_ONLY = "webdav.read_only";
    WEBDAV_ROOT_MISSING = "webdav.root_missing";

    DAV_BAD_REQUEST = "dav.bad_request";
    DAV_FORBIDDEN = "dav.forbidden";
    DAV_CONFLICT = "dav.conflict";
    DAV_METHOD_NOT_ALLOWED = "dav.method_not_allowed";
    DAV_PRECONDITION_FAILED = "dav.precondition_failed";
    DAV_RANGE_NOT_SATISFIABLE = "dav.range_not_satisfiable";
    DAV_LOCKED = "dav.locked";
    DAV_TOO_MANY_LOCKS = "dav.too_many_locks";
    DAV_LOCK_OWNER_TOO_LARGE = "dav.lock_owner_too_large";
    DAV_DESTINATION_OUTSIDE = "dav.destination_outside";
    DAV_STORAGE_UNAVAILABLE = "dav.storage_unavailable";
    DAV_NOT_IMPLEMENTED = "dav.not_implemented";

    NODE_UNAVAILABLE = "node.unavailable";

    REQUEST_BODY_FAILED = "request.body_failed";

    SETTINGS_UNKNOWN = "settings.unknown";
    SETTINGS_EMPTY = "settings.empty";

    MAIL_NOT_CONFIGURED = "mail.not_configured";
    MAIL_SEND_FAILED = "mail.send_failed";

    STORE_UNAVAILABLE = "store.unavailable";

    WOPI_READ_ONLY = "wopi.read_only";
    WOPI_BAD_LOCK = "wopi.bad_lock";
    WOPI_LOCK_MISMATCH = "wopi.lock_mismatch";
    WOPI_INVALID_NAME = "wopi.invalid_name";
    WOPI_TARGET_EXISTS = "wopi.target_exists";
    WOPI_NOT_SUPPORTED = "wopi.not_supported";
    WOPI_TOO_LARGE = "wopi.too_large";
    WOPI_PROOF_INVALID = "wopi.proof_invalid";
    WOPI_NO_ACTION = "wopi.no_action";
    WOPI_APP_NOT_FOUND = "wopi.app_not_found";
    WOPI_APP_NAME_TAKEN = "wopi.app_name_taken";

    VERSION_NOT_FOUND = "version.not_found";

    EVENTS_CURSOR_EXPIRED = "events.cursor_expired";
    EVENTS_CURSOR_AHEAD = "events.cursor_ahead";
    EVENTS_UNAVAILABLE = "events.unavailable";
    EVENTS_TOO_MANY_STREAMS = "events.too_many_streams";

    SERVER_INTERNAL = "server.internal";
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    use super::ALL;

    /// Code-shaped literals in the source that are not codes (file and host names in tests).
    const NOT_CODES: &[&str] = &[
        "a.tar",
        "a.txt",
        "archive.zip",
        "existing.db",
        "group.group_id",
        "index.html",
        "inline.db",
        "nubo.db",
        "nubo.example",
        "nubo.toml",
        "plain.docx",
        "report.docx",
        "report.pdf",
        "same.txt",
        "secret.txt",
        "source.path_or_prefix",
        "tar.gz",
    ];

    fn is_code_shaped(text: &str) -> bool {
        let Some((area, name)) = text.split_once('.') else { return false };
        let lower = |s: &str, extra: fn(char) -> bool| {
            s.starts_with(|c: char| c.is_ascii_lowercase()) && s.chars().all(|c| c.is_ascii_lowercase() || extra(c))
        };
        lower(area, |c| c.is_ascii_digit()) && lower(name, |c| c.is_ascii_digit() || c == '_')
    }

    /// The codes in the first column of `docs/src/errors.md`'s table (several per row allowed).
    fn documented() -> Vec<String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/errors.md");
        let text = std::fs::read_to_string(&path).expect("docs/src/errors.md");
        let mut codes = Vec::new();
        for row in text.lines().filter(|line| line.starts_with("| `")) {
            let first = row.split('|').nth(1).unwrap_or_default();
            codes.extend(first.split('`').skip(1).step_by(2).filter(|c| is_code_shaped(c)).map(str::to_owned));
        }
        codes
    }

    fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("source directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                rust_files(&path, found);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                found.push(path);
            }
        }
    }

    /// Every `"area.snake_case"` string literal in `text`: a small lexer that skips comments,
    /// raw strings and the `'"'` character literal, so an escaped or quoted `"` cannot shift it.
    fn code_literals(text: &str) -> Vec<&str> {
        let bytes = text.as_bytes();
        let mut found = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let rest = &text[at..];
            if rest.starts_with("//") {
                at += rest.find('\n').unwrap_or(rest.len());
            } else if let Some(raw) = rest.strip_prefix("r#\"") {
                at += raw.find("\"#").map_or(rest.len(), |end| end + 5);
            } else if rest.starts_with("'\"'") || rest.starts_with("'\\\"'") {
                at += rest[1..].find('\'').map_or(rest.len(), |end| end + 2);
            } else if bytes[at] == b'"' {
                let mut end = at + 1;
                while end < bytes.len() && bytes[end] != b'"' {
                    end += if bytes[end] == b'\\' { 2 } else { 1 };
                }
                let literal = &text[at + 1..end.min(bytes.len())];
                if is_code_shaped(literal) {
                    found.push(literal);
                }
                at = end + 1;
            } else {
                at += rest.chars().next().map_or(1, char::len_utf8);
            }
        }
        found
    }

    #[test]
    fn codes_are_unique_and_area_snake_case() {
        let unique: BTreeSet<_> = ALL.iter().collect();
        assert_eq!(unique.len(), ALL.len(), "a code is listed twice");
        assert!(ALL.iter().all(|code| is_code_shaped(code)), "{ALL:?}");
    }

    #[test]
    fn the_document_lists_exactly_these_codes() {
        let documented: BTreeSet<String> = documented().into_iter().collect();
        let known: BTreeSet<String> = ALL.iter().map(|c| (*c).to_owned()).collect();
        let undocumented: Vec<_> = known.difference(&documented).collect();
        let unknown: Vec<_> = documented.difference(&known).collect();
        assert!(undocumented.is_empty(), "codes missing from docs/src/errors.md: {undocumented:?}");
        assert!(unknown.is_empty(), "docs/src/errors.md lists codes the master does not have: {unknown:?}");
    }

    #[test]
    fn call_sites_name_the_constants_and_no_code_escapes_the_list() {
        // Every floor of the master: the model below this crate, this crate, the front ends and
        // the binary above it.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for floor in ["model/src", "service/src", "http/src", "src"] {
            rust_files(&root.join(floor), &mut files);
        }
        assert!(files.len() > 50, "the scan found the source tree");
        // The activity log's action names are dotted words too, of their own vocabulary.
        let skipped = [root.join("service/src/error_codes.rs"), root.join("model/src/domain/activity.rs")];
        let (mut unknown, mut spelled_out) = (Vec::new(), Vec::new());
        for file in files.iter().filter(|file| !skipped.contains(file)) {
            let text = std::fs::read_to_string(file).expect("source file");
            let shown = file.strip_prefix(&root).unwrap_or(file).display().to_string();
            for literal in code_literals(&text) {
                if ALL.contains(&literal) {
                    spelled_out.push(format!("{shown}: {literal}"));
                } else if !NOT_CODES.contains(&literal) {
                    unknown.push(format!("{shown}: {literal}"));
                }
            }
        }
        assert!(unknown.is_empty(), "add these codes to error_codes.rs and docs/src/errors.md: {unknown:?}");
        assert!(spelled_out.is_empty(), "name the error_codes constant instead: {spelled_out:?}");
    }

    #[test]
    fn the_scan_sees_codes_and_skips_other_strings() {
        let source = r#"x("object.not_found", "a message.", "v1.2", "Nubo.toml") // "auth.not_a_code"
            let q = '"'; y("say \"hi\"", "dav.locked")"#;
        assert_eq!(code_literals(source), ["object.not_found", "dav.locked"]);
    }
}
