//! Captcha scenes (the forms a captcha may guard) and the providers an administrator may
//! choose for each, with the settings that hold the choice.

use serde::{Deserialize, Serialize};

/// A form a captcha may guard; each has its own setting `captcha_{scene}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CaptchaScene {
    Register,
    Login,
    MagicLink,
    PasswordReset,
    SharePassword,
    Report,
    Redeem,
}

impl CaptchaScene {
    pub const ALL: [CaptchaScene; 7] = [
        CaptchaScene::Register,
        CaptchaScene::Login,
        CaptchaScene::MagicLink,
        CaptchaScene::PasswordReset,
        CaptchaScene::SharePassword,
        CaptchaScene::Report,
        CaptchaScene::Redeem,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CaptchaScene::Register => "register",
            CaptchaScene::Login => "login",
            CaptchaScene::MagicLink => "magic_link",
            CaptchaScene::PasswordReset => "password_reset",
            CaptchaScene::SharePassword => "share_password",
            CaptchaScene::Report => "report",
            CaptchaScene::Redeem => "redeem",
        }
    }

    /// The setting naming this scene's provider.
    pub fn setting(self) -> &'static str {
        match self {
            CaptchaScene::Register => "captcha_register",
            CaptchaScene::Login => "captcha_login",
            CaptchaScene::MagicLink => "captcha_magic_link",
            CaptchaScene::PasswordReset => "captcha_password_reset",
            CaptchaScene::SharePassword => "captcha_share_password",
            CaptchaScene::Report => "captcha_report",
            CaptchaScene::Redeem => "captcha_redeem",
        }
    }
}

/// Who checks a scene's captcha; `none` asks for nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CaptchaProvider {
    None,
    /// An image made and checked by this server.
    Builtin,
    /// Google reCAPTCHA (v2 checkbox).
    Recaptcha,
    /// Cloudflare Turnstile.
    Turnstile,
}

/// The words `captcha_{scene}` settings take.
pub const CAPTCHA_PROVIDERS: &[&str] = &["none", "builtin", "recaptcha", "turnstile"];

impl CaptchaProvider {
    /// Reads a stored setting; anything unknown counts as `none` (writes are validated).
    pub fn parse(value: &str) -> CaptchaProvider {
        match value {
            "builtin" => CaptchaProvider::Builtin,
            "recaptcha" => CaptchaProvider::Recaptcha,
            "turnstile" => CaptchaProvider::Turnstile,
            _ => CaptchaProvider::None,
        }
    }

    /// The origins (with paths) the page must load the provider's script and frames from;
    /// none for the built-in image, which is a `data:` URI.
    pub fn page_sources(self) -> &'static [&'static str] {
        match self {
            CaptchaProvider::Recaptcha => &["https://www.google.com/recaptcha/", "https://www.gstatic.com/recaptcha/"],
            CaptchaProvider::Turnstile => &["https://challenges.cloudflare.com"],
            CaptchaProvider::None | CaptchaProvider::Builtin => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scene_has_a_known_setting_defaulting_to_none() {
        for scene in CaptchaScene::ALL {
            let setting = crate::domain::settings::known_setting(scene.setting()).unwrap();
            assert_eq!(setting.default, "none");
            assert_eq!(serde_json::to_value(scene).unwrap(), scene.as_str());
        }
    }

    #[test]
    fn stored_words_parse_to_providers() {
        for word in CAPTCHA_PROVIDERS {
            assert_eq!(serde_json::to_value(CaptchaProvider::parse(word)).unwrap(), *word);
        }
        assert_eq!(CaptchaProvider::parse("telepathy"), CaptchaProvider::None);
    }
}
