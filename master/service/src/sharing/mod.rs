//! Public shares of files and folders and the reports visitors file about them.

pub mod reports;
pub mod shares;
