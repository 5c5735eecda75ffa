//! The activity log: who did what, recorded in the transaction of the change it describes.

pub mod activity;
