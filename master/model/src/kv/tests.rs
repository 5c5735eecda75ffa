//! The same behaviour checks for both stores; the Redis half needs the server of this machine
//! (skipped when absent unless `NUBO_TEST_REQUIRE_SERVICES=1`).

use std::time::Duration;

use super::*;

async fn redis_store() -> Option<RedisStore> {
    let url = std::env::var("NUBO_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("nubo-unit-{}:", uuid::Uuid::new_v4().simple());
    match RedisStore::connect(&url, &prefix).await {
        Ok(store) => Some(store),
        Err(err) if std::env::var("NUBO_TEST_REQUIRE_SERVICES").is_ok_and(|v| v == "1") => {
            panic!("Redis is required but unavailable: {err}")
        }
        Err(err) => {
            eprintln!("skipped: Redis unavailable: {err}");
            None
        }
    }
}

async fn behaves_as_a_store(store: &dyn KvStore) {
    assert_eq!(store.get("a").await.unwrap(), None);
    store.set("a", "1", None).await.unwrap();
    assert_eq!(store.get("a").await.unwrap().as_deref(), Some("1"));
    store.set("a", "2", None).await.unwrap();
    assert_eq!(store.get("a").await.unwrap().as_deref(), Some("2"));
    store.set("b", "3", None).await.unwrap();
    let keys = ["b".to_owned(), "missing".to_owned(), "a".to_owned()];
    assert_eq!(store.get_many(&keys).await.unwrap(), vec![Some("3".to_owned()), None, Some("2".to_owned())]);
    assert_eq!(store.get_many(&[]).await.unwrap(), Vec::<Option<String>>::new());

    assert!(store.set_if_absent("once", "x", Duration::from_secs(60)).await.unwrap());
    assert!(!store.set_if_absent("once", "y", Duration::from_secs(60)).await.unwrap());
    assert_eq!(store.get("once").await.unwrap().as_deref(), Some("x"));

    assert_eq!(store.take("once").await.unwrap().as_deref(), Some("x"));
    assert_eq!(store.take("once").await.unwrap(), None, "take answers once");

    assert!(store.delete("a").await.unwrap());
    assert!(!store.delete("a").await.unwrap());

    let minute = Duration::from_secs(60);
    assert_eq!(store.swap_if("lock", "L1", Some(("L2", minute))).await.unwrap(), None, "nothing to swap");
    assert_eq!(store.get("lock").await.unwrap(), None);
    store.set("lock", "L1", Some(minute)).await.unwrap();
    assert_eq!(store.swap_if("lock", "other", Some(("L2", minute))).await.unwrap().as_deref(), Some("L1"));
    assert_eq!(store.get("lock").await.unwrap().as_deref(), Some("L1"), "a mismatch changes nothing");
    assert_eq!(store.swap_if("lock", "L1", Some(("L2", minute))).await.unwrap().as_deref(), Some("L1"));
    assert_eq!(store.get("lock").await.unwrap().as_deref(), Some("L2"));
    assert_eq!(store.swap_if("lock", "L2", None).await.unwrap().as_deref(), Some("L2"));
    assert_eq!(store.get("lock").await.unwrap(), None, "a matching swap to nothing removes");

    for expected in 1..=3 {
        assert_eq!(store.increment("counter", Duration::from_secs(60)).await.unwrap(), expected);
    }

    let budget = [("by-address".to_owned(), 2), ("by-share".to_owned(), 3)];
    let keys: Vec<String> = budget.iter().map(|(key, _)| key.clone()).collect();
    assert!(store.charge(&budget, minute).await.unwrap());
    assert!(store.charge(&budget, minute).await.unwrap());
    assert!(!store.charge(&budget, minute).await.unwrap(), "the address has used its two");
    let counts = store.get_many(&keys).await.unwrap();
    assert_eq!(counts, vec![Some("2".to_owned()), Some("2".to_owned())], "a refused charge counts nothing");
    store.refund(&keys).await.unwrap();
    assert!(store.charge(&budget, minute).await.unwrap(), "a refund gives the attempt back");
    let share = [("by-share".to_owned(), 3)];
    assert!(store.charge(&share, minute).await.unwrap(), "the share has one of its three left");
    assert!(!store.charge(&share, minute).await.unwrap(), "the share has used its three");
    store.refund(&["never-counted".to_owned()]).await.unwrap();
    assert_eq!(store.get("never-counted").await.unwrap(), None, "a refund never makes a counter");

    store.set("short", "v", Some(Duration::from_millis(50))).await.unwrap();
    assert!(store.charge(&[("short-budget".to_owned(), 1)], Duration::from_millis(50)).await.unwrap());
    assert!(store.set_if_absent("short-claim", "v", Duration::from_millis(50)).await.unwrap());
    assert_eq!(store.increment("short-counter", Duration::from_millis(50)).await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(store.get("short").await.unwrap(), None, "expired value is gone");
    assert!(store.set_if_absent("short-claim", "v", Duration::from_secs(5)).await.unwrap(), "expired claim is free");
    assert_eq!(store.increment("short-counter", Duration::from_secs(5)).await.unwrap(), 1, "window restarted");
    store.refund(&["short-budget".to_owned()]).await.unwrap();
    assert_eq!(store.get("short-budget").await.unwrap(), None, "a refund after the window revives nothing");
    assert!(store.charge(&[("short-budget".to_owned(), 1)], Duration::from_secs(5)).await.unwrap(), "window restarted");
}

#[tokio::test]
async fn memory_store_behaves_as_a_store() {
    behaves_as_a_store(&MemoryStore::new()).await;
}

#[tokio::test]
async fn redis_store_behaves_as_a_store() {
    if let Some(store) = redis_store().await {
        behaves_as_a_store(&store).await;
    }
}

#[tokio::test]
async fn concurrent_claims_have_exactly_one_winner() {
    let memory: SharedStore = Arc::new(MemoryStore::new());
    let mut stores = vec![memory];
    if let Some(redis) = redis_store().await {
        stores.push(Arc::new(redis));
    }
    for store in stores {
        let attempts = (0..32).map(|i| {
            let store = store.clone();
            tokio::spawn(
                async move { store.set_if_absent("race", &i.to_string(), Duration::from_secs(30)).await.unwrap() },
            )
        });
        let winners =
            futures_util::future::join_all(attempts).await.into_iter().filter(|r| *r.as_ref().unwrap()).count();
        assert_eq!(winners, 1);
    }
}

#[tokio::test]
async fn concurrent_charges_never_pass_a_limit() {
    let memory: SharedStore = Arc::new(MemoryStore::new());
    let mut stores = vec![memory];
    if let Some(redis) = redis_store().await {
        stores.push(Arc::new(redis));
    }
    for store in stores {
        let attempts = (0..40).map(|_| {
            let store = store.clone();
            tokio::spawn(
                async move { store.charge(&[("guesses".to_owned(), 5)], Duration::from_secs(30)).await.unwrap() },
            )
        });
        let charged =
            futures_util::future::join_all(attempts).await.into_iter().filter(|r| *r.as_ref().unwrap()).count();
        assert_eq!(charged, 5);
    }
}
