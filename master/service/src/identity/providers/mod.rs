//! Sign-in providers: each turns what a person presents (an e-mail address and a password, an
//! OAuth or OpenID Connect code, a passkey assertion, a mailed magic link) into the user it
//! identifies, or nobody. Rate limits, the account's status and issuing tokens stay with the
//! sign-in use case (`sign_in`), the same for every provider.

pub mod magic_link;
pub mod oauth;
pub mod oidc;
pub mod passkey;
pub mod password;
