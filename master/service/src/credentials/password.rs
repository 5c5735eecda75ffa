//! Password hashing with argon2id. Hashing is CPU-heavy, so it runs on the blocking pool and at
//! most a few hashes run at once; a burst of logins queues instead of starving the runtime.
//! [`WaitingChecks`] keeps one share, account or address from filling that queue.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use nubo_common::secret::Secret;
use tokio::sync::Semaphore;

/// Concurrent hash computations; each takes ~19 MiB and one core for tens of milliseconds.
static HASHING_SLOTS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(4));

/// Password checks one subject (a share, an account, a client address) may have waiting for
/// or holding a hashing slot on one master at a time.
pub const WAITING_CHECKS_PER_SUBJECT: usize = 2;

/// The password checks waiting or running on this master, per subject guessed at. Beyond
/// [`WAITING_CHECKS_PER_SUBJECT`] a check is refused rather than queued, so a burst of guesses
/// at one share or account (or from one address) waits behind itself and never fills the
/// hashing slots ahead of everyone else's sign-in. Only this master's slots are at stake, so
/// the count is this master's (the failure budgets themselves are shared, in the `KvStore`).
#[derive(Debug, Default)]
pub struct WaitingChecks(Mutex<HashMap<String, usize>>);

impl WaitingChecks {
    /// Enters one check for each of `subjects`; `None` (nothing entered) when any of them
    /// already has its [`WAITING_CHECKS_PER_SUBJECT`]. The check leaves when the answer drops.
    pub fn enter(&self, subjects: &[String]) -> Option<WaitingCheck<'_>> {
        let mut waiting = self.lock();
        if subjects.iter().any(|subject| waiting.get(subject).is_some_and(|n| *n >= WAITING_CHECKS_PER_SUBJECT)) {
            return None;
        }
        for subject in subjects {
            *waiting.entry(subject.clone()).or_insert(0) += 1;
        }
        Some(WaitingCheck { checks: self, subjects: subjects.to_vec() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A check counted in [`WaitingChecks`] until dropped.
#[derive(Debug)]
pub struct WaitingCheck<'a> {
    checks: &'a WaitingChecks,
    subjects: Vec<String>,
}

impl Drop for WaitingCheck<'_> {
    fn drop(&mut self) {
        let mut waiting = self.checks.lock();
        for subject in &self.subjects {
            if let Some(count) = waiting.get_mut(subject) {
                *count -= 1;
                if *count == 0 {
                    waiting.remove(subject);
                }
            }
        }
    }
}

/// Shortest and longest accepted password, in bytes.
pub const MIN_PASSWORD_LEN: usize = 8;
pub const MAX_PASSWORD_LEN: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("password must be {MIN_PASSWORD_LEN} to {MAX_PASSWORD_LEN} bytes long")]
    Length,
    #[error("password hashing failed: {0}")]
    Hash(String),
}

/// A random 24-character password (letters and digits, ~142 bits) for generated credentials.
pub fn generate_password() -> Secret {
    use rand::Rng;
    use rand::distr::Alphanumeric;
    Secret::new(rand::rng().sample_iter(&Alphanumeric).take(24).map(char::from).collect::<String>())
}

/// Checks the length rule without hashing.
pub fn check_password_rules(password: &Secret) -> Result<(), PasswordError> {
    if (MIN_PASSWORD_LEN..=MAX_PASSWORD_LEN).contains(&password.len()) { Ok(()) } else { Err(PasswordError::Length) }
}

/// Hashes an account password into a PHC string (argon2id, random salt), within the rules.
pub async fn hash_password(password: &Secret) -> Result<String, PasswordError> {
    check_password_rules(password)?;
    hash_secret(password).await
}

/// Hashes a secret with rules of its caller's own (a share's password) as [`hash_password`] does.
pub async fn hash_secret(password: &Secret) -> Result<String, PasswordError> {
    let password = password.clone();
    let _slot = HASHING_SLOTS.acquire().await.map_err(|e| PasswordError::Hash(e.to_string()))?;
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default()
            .hash_password(password.expose().as_bytes(), &salt)
            .map(|hash| hash.to_string())
            .map_err(|e| PasswordError::Hash(e.to_string()))
    })
    .await
    .map_err(|e| PasswordError::Hash(e.to_string()))?
}

/// Verifies a password against a PHC string; the comparison inside argon2 is constant-time.
/// A malformed stored hash verifies as false rather than erroring out to the caller.
pub async fn verify_password(password: &Secret, phc: &str) -> bool {
    let password = password.clone();
    let phc = phc.to_owned();
    let Ok(_slot) = HASHING_SLOTS.acquire().await else {
        return false;
    };
    tokio::task::spawn_blocking(move || {
        PasswordHash::new(&phc)
            .map(|hash| Argon2::default().verify_password(password.expose().as_bytes(), &hash).is_ok())
            .unwrap_or(false)
    })
    .await
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_has_at_most_its_share_of_waiting_checks() {
        let checks = WaitingChecks::default();
        let share = |n: u32| vec![format!("share:{n}"), "addr:10.0.0.1".to_owned()];
        let first = checks.enter(&share(1)).expect("first");
        let second = checks.enter(&share(2)).expect("second");
        assert!(checks.enter(&share(3)).is_none(), "the address has two waiting");
        assert!(checks.enter(&["share:3".to_owned()]).is_some(), "a refused check entered nothing");
        drop(first);
        let third = checks.enter(&share(3)).expect("a slot came free");
        drop((second, third));
        assert!(checks.lock().is_empty(), "every check left");
    }

    #[tokio::test]
    async fn a_hash_verifies_its_password_only() {
        let hash = hash_password(&Secret::new("correct horse")).await.unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password(&Secret::new("correct horse"), &hash).await);
        assert!(!verify_password(&Secret::new("correct horsE"), &hash).await);
    }

    #[tokio::test]
    async fn the_same_password_hashes_differently_each_time() {
        let a = hash_password(&Secret::new("password1")).await.unwrap();
        let b = hash_password(&Secret::new("password1")).await.unwrap();
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn short_and_garbage_inputs_are_refused() {
        assert!(matches!(hash_password(&Secret::new("short")).await, Err(PasswordError::Length)));
        assert!(!verify_password(&Secret::new("whatever1"), "not-a-phc-string").await);
    }
}
