//! More room and other groups for a user: storage packs and redeemable codes.

pub mod redeem;
pub mod storage_packs;
