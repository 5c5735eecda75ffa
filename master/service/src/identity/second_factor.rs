//! The second factor of a sign-in: time-based codes (RFC 6238 through `totp-rs`: HMAC-SHA-1,
//! six digits, 30-second steps, one step of clock skew either way) and single-use recovery
//! codes. A code counts once: the step it matched is remembered in the `KvStore` for as long as
//! the code could still be accepted. Rate limits and what enabling means stay with
//! `service::identity::two_factor`.

use std::time::Duration;

use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::now_ms;
use totp_rs::{Algorithm, Builder, Secret, Totp};

use crate::context::Context;
use crate::error::{ServiceError, ServiceResult};

/// How many recovery codes enabling makes.
pub const RECOVERY_CODES: usize = 10;
const DIGITS: u8 = 6;
const STEP_SECONDS: u64 = 30;
/// Steps either side of the current one still accepted (RFC 6238's recommendation).
const SKEW: u16 = 1;
/// A matched step is remembered until no clock could accept its code any more.
const USED_STEP_LIFETIME: Duration = Duration::from_secs(STEP_SECONDS * (2 * SKEW as u64 + 2));
/// Recovery codes: twelve characters of lowercase base32 (60 bits), shown in groups of four.
const RECOVERY_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567";
const RECOVERY_CHARS: usize = 12;

/// A fresh secret for an authenticator app.
#[derive(Debug)]
pub struct Enrolment {
    /// The secret, base32 without padding, for typing into an app by hand.
    pub secret: String,
    /// `otpauth://totp/...` with the secret, the issuer and the account, for a QR code.
    pub uri: String,
}

/// `:` separates issuer and account in the URI's label: neither may contain one.
fn label_part(text: &str, fallback: &str) -> String {
    let text = text.replace(':', " ");
    let text = text.trim();
    if text.is_empty() { fallback.to_owned() } else { text.to_owned() }
}

fn builder(secret: Secret) -> Builder {
    Builder::new()
        .with_algorithm(Algorithm::SHA1)
        .with_digits(DIGITS)
        .with_step_duration(STEP_SECONDS)
        .with_skew(SKEW)
        .with_secret(secret)
}

fn totp_of(secret_base32: &str) -> ServiceResult<Totp> {
    let secret = Secret::try_from_base32(secret_base32)
        .map_err(|_| ServiceError::internal(anyhow::anyhow!("a stored two-factor secret is not base32")))?;
    builder(secret).build().map_err(|e| ServiceError::internal(anyhow::anyhow!("two-factor secret: {e}")))
}

/// A new random secret (160 bits, the RFC's recommendation) for `account` at `issuer`.
pub fn enrol(issuer: &str, account: &str) -> ServiceResult<Enrolment> {
    let totp = builder(Secret::new_stack(rand::random::<[u8; 20]>()))
        .with_issuer(Some(label_part(issuer, "Nubo")))
        .with_account_name(label_part(account, "account"))
        .build()
        .map_err(|e| ServiceError::internal(anyhow::anyhow!("two-factor enrolment: {e}")))?;
    let uri = totp.to_url().map_err(|e| ServiceError::internal(anyhow::anyhow!("two-factor URI: {e}")))?;
    Ok(Enrolment { secret: totp.secret().to_base32(), uri })
}

/// What a presented code turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    /// Not the code of any step in the window (or not a code at all).
    Wrong,
    /// Right, but its step was already used: a replay, or a second sign-in in the same step.
    Replayed,
}

/// A six-digit code, spaces allowed; `None` for anything else (a recovery code, say).
pub fn as_totp_code(code: &str) -> Option<String> {
    let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    (code.len() == usize::from(DIGITS) && code.bytes().all(|b| b.is_ascii_digit())).then_some(code)
}

/// Checks `code` against the secret at the current time, and uses up the step it matches.
/// The comparison is `totp-rs`'s, in constant time.
pub async fn accept_code(ctx: &Context, user_id: UserId, secret_base32: &str, code: &str) -> ServiceResult<Verdict> {
    let Some(code) = as_totp_code(code) else { return Ok(Verdict::Wrong) };
    let now = u64::try_from(now_ms() / 1000).unwrap_or_default();
    let Some(step) = totp_of(secret_base32)?.check(&code, now) else { return Ok(Verdict::Wrong) };
    // set_if_absent is the single winner even across masters sharing a Redis.
    let fresh = ctx.store().set_if_absent(&format!("2fa:used:{user_id}:{step}"), "1", USED_STEP_LIFETIME).await?;
    Ok(if fresh { Verdict::Accepted } else { Verdict::Replayed })
}

/// Ten new recovery codes, as shown to the user (`abcd-efgh-ijkl`).
pub fn new_recovery_codes() -> Vec<String> {
    (0..RECOVERY_CODES)
        .map(|_| {
            let chars: Vec<char> = (0..RECOVERY_CHARS)
                .map(|_| char::from(RECOVERY_ALPHABET[rand::random_range(0..RECOVERY_ALPHABET.len())]))
                .collect();
            chars.chunks(4).map(|group| group.iter().collect::<String>()).collect::<Vec<_>>().join("-")
        })
        .collect()
}

/// How a recovery code is stored: the BLAKE3 hash of its normal form (lowercase, without the
/// dashes and spaces people type). The code is random enough that a salt adds nothing.
pub fn recovery_code_hash(code: &str) -> String {
    let normal: String =
        code.chars().filter(|c| !c.is_whitespace() && *c != '-').map(|c| c.to_ascii_lowercase()).collect();
    blake3::hash(normal.as_bytes()).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_enrolment_names_issuer_and_account_and_its_codes_check() {
        let enrolment = enrol("My: Cloud", "ann@example.com").unwrap();
        assert!(
            enrolment.uri.starts_with("otpauth://totp/My%20%20Cloud:ann%40example.com?secret="),
            "{}",
            enrolment.uri
        );
        assert_eq!(enrolment.secret.len(), 32, "20 bytes are 32 base32 characters");
        let totp = totp_of(&enrolment.secret).unwrap();
        let now = 1_800_000_000;
        let code = totp.generate(now).to_string();
        assert_eq!(totp.check(&code, now + STEP_SECONDS), Some(now / STEP_SECONDS), "one step of skew");
        assert_eq!(totp.check(&code, now + 2 * STEP_SECONDS), None, "two steps are too many");
    }

    #[test]
    fn only_six_digits_are_a_totp_code() {
        assert_eq!(as_totp_code(" 123 456 ").as_deref(), Some("123456"));
        assert_eq!(as_totp_code("12345"), None);
        assert_eq!(as_totp_code("abcd-efgh-ijkl"), None);
    }

    #[test]
    fn recovery_codes_are_distinct_and_hash_however_they_are_typed() {
        let codes = new_recovery_codes();
        assert_eq!(codes.len(), RECOVERY_CODES);
        assert!(codes.iter().all(|c| c.len() == 14 && c.matches('-').count() == 2), "{codes:?}");
        let unique: std::collections::HashSet<_> = codes.iter().collect();
        assert_eq!(unique.len(), RECOVERY_CODES);
        let code = &codes[0];
        assert_eq!(recovery_code_hash(code), recovery_code_hash(&code.to_uppercase().replace('-', " ")));
        assert_ne!(recovery_code_hash(code), recovery_code_hash(&codes[1]));
    }
}
