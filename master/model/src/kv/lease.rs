//! Leases: a key of the store held by one holder for a while, so that every master agrees who
//! holds a thing (a chunk being sent, an event stream's place). Given back when the holder ends,
//! also when it is dropped; a holder that died (a killed master) lets it lapse.

use std::future::Future;
use std::time::Duration;

use uuid::Uuid;

use super::{SharedStore, StoreResult};

/// One holder's hold on `key`.
pub struct Lease {
    store: SharedStore,
    key: String,
    holder: String,
    lifetime: Duration,
}

impl Lease {
    /// Takes `key` for `lifetime` when nobody holds it; `None` when somebody does.
    pub async fn take(store: SharedStore, key: String, lifetime: Duration) -> StoreResult<Option<Self>> {
        let holder = Uuid::new_v4().simple().to_string();
        Ok(store.set_if_absent(&key, &holder, lifetime).await?.then_some(Self { store, key, holder, lifetime }))
    }

    /// Extends the lease by its lifetime; a lease the store lost (a flushed Redis) is taken again.
    pub async fn renew(&self) -> StoreResult<()> {
        let renewal = Some((self.holder.as_str(), self.lifetime));
        if self.store.swap_if(&self.key, &self.holder, renewal).await?.is_none() {
            self.store.set_if_absent(&self.key, &self.holder, self.lifetime).await?;
        }
        Ok(())
    }

    /// Runs `work`, renewing the lease every third of its lifetime until it ends, so a short
    /// lifetime bounds how long a dead holder keeps the key without cutting off a slow live one.
    pub async fn hold_while<F: Future>(&self, work: F) -> F::Output {
        let mut work = std::pin::pin!(work);
        let period = self.lifetime / 3;
        let mut renewals = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            tokio::select! {
                done = &mut work => return done,
                _ = renewals.tick() => {
                    if let Err(error) = self.renew().await {
                        tracing::warn!(key = %self.key, %error, "could not renew a lease; it may lapse");
                    }
                }
            }
        }
    }

    /// Gives the lease back now, while this holder still holds it.
    pub async fn release(mut self) {
        let (key, holder) = (std::mem::take(&mut self.key), std::mem::take(&mut self.holder));
        give_back(&self.store, &key, &holder).await;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.key.is_empty() {
            return;
        }
        // Outside a runtime (the process is ending) the lifetime frees the key.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (store, key, holder) =
            (self.store.clone(), std::mem::take(&mut self.key), std::mem::take(&mut self.holder));
        runtime.spawn(async move { give_back(&store, &key, &holder).await });
    }
}

/// Removes `key` while `holder` holds it; a failure leaves it to lapse.
async fn give_back(store: &SharedStore, key: &str, holder: &str) {
    if let Err(error) = store.swap_if(key, holder, None).await {
        tracing::debug!(%key, %error, "could not give a lease back; it lapses");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::kv::MemoryStore;

    #[tokio::test]
    async fn a_held_lease_is_renewed_and_a_dropped_one_is_free_at_once() {
        let store: SharedStore = Arc::new(MemoryStore::new());
        let lifetime = Duration::from_millis(300);
        let lease = Lease::take(store.clone(), "k".into(), lifetime).await.unwrap().expect("free");
        assert!(Lease::take(store.clone(), "k".into(), lifetime).await.unwrap().is_none(), "held");
        // Work several lifetimes long keeps it held throughout.
        lease.hold_while(tokio::time::sleep(lifetime * 4)).await;
        assert!(Lease::take(store.clone(), "k".into(), lifetime).await.unwrap().is_none(), "renewed");
        drop(lease);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(Lease::take(store.clone(), "k".into(), lifetime).await.unwrap().is_some(), "given back");
        // One nobody renews lapses.
        let _lapsing = Lease::take(store.clone(), "j".into(), lifetime).await.unwrap().expect("free");
        tokio::time::sleep(lifetime * 2).await;
        assert!(Lease::take(store.clone(), "j".into(), lifetime).await.unwrap().is_some(), "lapsed");
    }
}
