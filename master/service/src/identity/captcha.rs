//! Captchas per scene: which provider guards which form, the built-in image captcha (made here,
//! its answer kept in the `KvStore` for five minutes and taken on first use), and the
//! server-side check of reCAPTCHA and Turnstile answers against their siteverify URLs.
//! Handlers never call [`verify`] themselves: `http::captcha` does, before they run.

use std::net::IpAddr;
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine;
use nubo_model::domain::captcha::{CaptchaProvider, CaptchaScene};
use nubo_model::domain::site_settings::{CaptchaKeys, CaptchaSettings};
use serde::Deserialize;

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::settings::site;

/// How long a built-in image may be answered.
const BUILTIN_LIFETIME: Duration = Duration::from_secs(5 * 60);
/// Characters of the built-in image: no 0/O, 1/I/L or 5/S that readers confuse.
const BUILTIN_CHARS: &[char] = &[
    'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'k', 'm', 'n', 'p', 'r', 't', 'u', 'v', 'w', 'x', 'y', '2', '3', '4', '6',
    '7', '8', '9',
];
/// How long a siteverify call may take before the provider counts as unreachable.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// A scene's captcha as the public site configuration describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct SceneCaptcha {
    pub provider: CaptchaProvider,
    /// The site key the provider's widget needs (reCAPTCHA, Turnstile).
    pub site_key: Option<String>,
}

/// The scenes that ask for a captcha, from the site's captcha settings.
pub fn scenes(settings: &CaptchaSettings) -> Vec<(CaptchaScene, SceneCaptcha)> {
    settings
        .scenes
        .iter()
        .filter(|(_, provider)| *provider != CaptchaProvider::None)
        .map(|&(scene, provider)| {
            let site_key = settings.keys(provider).map(|keys| keys.site_key.clone());
            (scene, SceneCaptcha { provider, site_key })
        })
        .collect()
}

/// The third-party providers some scene uses: the app's pages must load their scripts.
pub async fn page_providers(ctx: &Context) -> ServiceResult<Vec<CaptchaProvider>> {
    let settings = site::current(ctx).await?;
    let mut providers: Vec<_> = scenes(&settings.captcha).into_iter().map(|(_, captcha)| captcha.provider).collect();
    providers.dedup();
    providers.retain(|p| !p.page_sources().is_empty());
    providers.sort_by_key(|p| *p as u8);
    providers.dedup();
    Ok(providers)
}

/// A new built-in image: its id and the PNG as a `data:` URI.
#[derive(Debug, Clone)]
pub struct Challenge {
    pub id: String,
    pub image: String,
}

fn builtin_key(id: &str) -> String {
    format!("captcha:{id}")
}

/// What is stored for an image: its scene and lower-cased answer (`register:ab3xy`), so an
/// image made for one form never passes another.
fn stored_answer(scene: CaptchaScene, answer: &str) -> String {
    format!("{}:{}", scene.as_str(), answer.trim().to_lowercase())
}

/// Compares through hashes: `blake3::Hash` equality is constant-time.
fn answer_matches(stored: &str, scene: CaptchaScene, answer: &str) -> bool {
    blake3::hash(stored.as_bytes()) == blake3::hash(stored_answer(scene, answer).as_bytes())
}

/// Makes a built-in image for `scene`; refused when the scene's captcha is not the built-in one.
pub async fn challenge(ctx: &Context, scene: CaptchaScene) -> ServiceResult<Challenge> {
    if site::current(ctx).await?.captcha.provider(scene) != CaptchaProvider::Builtin {
        return Err(ServiceError::new(
            ErrorKind::NotFound,
            codes::CAPTCHA_NOT_BUILTIN,
            "this scene does not use the built-in captcha: see `captcha` in GET /site/config",
        ));
    }
    let (answer, png) = draw()?;
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 18]>());
    ctx.store().set(&builtin_key(&id), &stored_answer(scene, &answer), Some(BUILTIN_LIFETIME)).await?;
    let image = format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(png));
    Ok(Challenge { id, image })
}

/// Five characters, waved and speckled, 220 by 80 pixels.
fn draw() -> ServiceResult<(String, Vec<u8>)> {
    use captcha::filters::{Dots, Noise, Wave};
    let mut image = captcha::Captcha::new();
    image
        .set_chars(BUILTIN_CHARS)
        .add_chars(5)
        .apply_filter(Noise::new(0.2))
        .apply_filter(Wave::new(2.0, 16.0))
        .view(220, 80)
        .apply_filter(Dots::new(8));
    let answer = image.chars_as_string();
    let png = image.as_png().ok_or_else(|| ServiceError::internal(anyhow::anyhow!("captcha image not encoded")))?;
    Ok((answer, png))
}

/// Checks the captcha a request carries for `scene`; `Ok` when the scene asks for none.
/// The built-in answer is `{id}:{text}`; reCAPTCHA and Turnstile answers are their widget's token.
pub async fn verify(ctx: &Context, scene: CaptchaScene, answer: Option<&str>, address: IpAddr) -> ServiceResult<()> {
    let settings = site::current(ctx).await?;
    let provider = settings.captcha.provider(scene);
    if provider == CaptchaProvider::None {
        return Ok(());
    }
    let Some(answer) = answer.map(str::trim).filter(|a| !a.is_empty()) else {
        return Err(ServiceError::new(
            ErrorKind::Validation,
            codes::CAPTCHA_REQUIRED,
            "this form asks for a captcha: solve it and send its answer in `captcha`",
        )
        .with_field("captcha"));
    };
    let passed = match provider {
        CaptchaProvider::None => true,
        CaptchaProvider::Builtin => verify_builtin(ctx, scene, answer).await?,
        CaptchaProvider::Recaptcha => siteverify("recaptcha", &settings.captcha.recaptcha, answer, address).await?,
        CaptchaProvider::Turnstile => siteverify("turnstile", &settings.captcha.turnstile, answer, address).await?,
    };
    if passed {
        Ok(())
    } else {
        Err(ServiceError::new(
            ErrorKind::Forbidden,
            codes::CAPTCHA_INVALID,
            "the captcha answer is wrong or expired: solve a new one",
        )
        .with_field("captcha"))
    }
}

async fn verify_builtin(ctx: &Context, scene: CaptchaScene, answer: &str) -> ServiceResult<bool> {
    let Some((id, text)) = answer.split_once(':') else { return Ok(false) };
    // Taken whatever the answer: one guess per image.
    let Some(stored) = ctx.store().take(&builtin_key(id)).await? else { return Ok(false) };
    Ok(answer_matches(&stored, scene, text))
}

/// The part of a siteverify answer we read (both providers answer this shape).
#[derive(Debug, Deserialize)]
struct SiteverifyAnswer {
    success: bool,
}

/// Asks the provider whether `response` is a solved challenge; unreachable, failing or
/// unconfigured providers are 502 so the form's user learns it is not their answer.
async fn siteverify(name: &str, keys: &CaptchaKeys, response: &str, address: IpAddr) -> ServiceResult<bool> {
    let (url, secret) = (keys.verify_url.as_str(), keys.secret.as_str());
    let unavailable = |detail: String| {
        tracing::warn!(provider = name, %detail, "captcha provider unavailable");
        ServiceError::new(
            ErrorKind::BadGateway,
            codes::CAPTCHA_UNAVAILABLE,
            "the captcha service could not be reached: try again later",
        )
    };
    if secret.is_empty() || url.is_empty() {
        return Err(unavailable(format!("captcha_{name}_secret or captcha_{name}_verify_url is not set")));
    }
    let remote = address.to_string();
    let form = [("secret", secret), ("response", response), ("remoteip", remote.as_str())];
    let answer = http().post(url).form(&form).send().await.map_err(|e| unavailable(e.to_string()))?;
    if !answer.status().is_success() {
        return Err(unavailable(format!("siteverify answered {}", answer.status())));
    }
    let answer: SiteverifyAnswer = answer.json().await.map_err(|e| unavailable(e.to_string()))?;
    Ok(answer.success)
}

fn http() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .timeout(VERIFY_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("Nubo/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_compare_case_insensitively_and_per_scene() {
        let stored = stored_answer(CaptchaScene::Register, "ab3xy");
        assert!(answer_matches(&stored, CaptchaScene::Register, " AB3Xy "));
        assert!(!answer_matches(&stored, CaptchaScene::Login, "ab3xy"));
        assert!(!answer_matches(&stored, CaptchaScene::Register, "ab3xz"));
    }

    #[test]
    fn the_image_is_a_png_of_five_known_characters() {
        let (answer, png) = draw().unwrap();
        assert_eq!(answer.chars().count(), 5);
        assert!(answer.chars().all(|c| BUILTIN_CHARS.contains(&c)), "{answer}");
        assert!(png.starts_with(b"\x89PNG"));
    }
}
