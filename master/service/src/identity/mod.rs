//! People and how they sign in: accounts, users and groups, every sign-in provider, passkeys, two-
//! factor, mailed links, captchas, avatars and WebDAV accounts.

pub mod accounts;
pub mod avatars;
pub mod bootstrap;
pub mod captcha;
pub mod dav_accounts;
pub mod groups;
pub mod identities;
pub mod mail_links;
pub mod mailed_token;
pub mod passkeys;
pub mod providers;
pub mod second_factor;
pub mod sign_in;
pub mod two_factor;
pub mod users;
