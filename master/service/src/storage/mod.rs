//! Where bytes live: storage policies and the storage nodes behind them.

pub mod nodes;
pub mod policies;
