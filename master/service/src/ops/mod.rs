//! Running the site: the admin's summary and user detail, health, metrics and maintenance.

pub mod health;
pub mod maintenance;
pub mod metrics;
pub mod summary;
pub mod user_detail;
