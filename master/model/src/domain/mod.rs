//! Pure types and rules of Nubo: enumerations, validated values, time. No I/O lives here.

pub mod activity;
pub mod captcha;
pub mod group;
pub mod ids;
pub mod naming;
pub mod node;
pub mod object;
pub mod policy;
pub mod report;
pub mod settings;
pub mod site_settings;
pub mod task;
pub mod theme;
pub mod time;
pub mod upload;
pub mod user;
pub mod viewer;
