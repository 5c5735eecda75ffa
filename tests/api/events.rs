//! Change events (`GET /events`, Server-Sent Events): every kind of change reaches the owner's
//! subscribers and nobody else's, a subscriber on one master hears writes made through another,
//! a reconnect with `since` replays exactly what was missed, a cursor older than the kept
//! events answers 410, one beyond the newest (a restored backup) 409, and on PostgreSQL a
//! transaction that commits long after a later one still has its events delivered.

use std::time::Duration;

use futures_util::StreamExt;
use nubo_model::domain::time::now_ms;
use nubo_service::tree::events;
use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    a_subscriber_hears_every_kind_of_change_of_its_own_tree,
    a_subscriber_on_another_master_resumes_with_since_and_misses_nothing,
    a_cursor_older_than_the_kept_events_answers_410,
    a_cursor_beyond_the_newest_answers_409_and_ready_names_the_epoch,
);

/// One Server-Sent Event.
#[derive(Debug)]
struct Sse {
    event: String,
    id: Option<i64>,
    data: Value,
}

/// A Server-Sent Events stream being read.
struct Stream {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: String,
}

impl Stream {
    async fn open(base: &str, user: &Session, since: Option<i64>) -> Self {
        let url = match since {
            Some(since) => format!("{base}/api/v1/events?since={since}"),
            None => format!("{base}/api/v1/events"),
        };
        let response = reqwest::Client::new().get(url).bearer_auth(&user.access).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
        Self { body: Box::pin(response.bytes_stream()), buffer: String::new() }
    }

    /// The next event (comments skipped); panics after `wait`.
    async fn next(&mut self, wait: Duration) -> Sse {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut event, mut id, mut data) = ("message".to_owned(), None, String::new());
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        event = value.trim().to_owned();
                    } else if let Some(value) = line.strip_prefix("id:") {
                        id = value.trim().parse().ok();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push_str(value.trim());
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                return Sse { event, id, data: serde_json::from_str(&data).unwrap_or(Value::String(data)) };
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next()).await.expect("an event in time");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk.expect("the stream goes on").unwrap()));
        }
    }

    /// The next `count` change events as (kind, name), with their cursors.
    async fn changes(&mut self, count: usize) -> (Vec<(String, String)>, Vec<i64>) {
        let (mut seen, mut cursors) = (Vec::new(), Vec::new());
        while seen.len() < count {
            let event = self.next(Duration::from_secs(10)).await;
            if event.event != "change" {
                continue;
            }
            assert_eq!(event.id, event.data["cursor"].as_i64(), "the SSE id is the cursor");
            seen.push((
                event.data["kind"].as_str().unwrap().to_owned(),
                event.data["name"].as_str().unwrap().to_owned(),
            ));
            cursors.push(event.id.unwrap());
        }
        (seen, cursors)
    }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, n)| ((*k).to_owned(), (*n).to_owned())).collect()
}

async fn a_subscriber_hears_every_kind_of_change_of_its_own_tree(app: TestApp) {
    let user = app.register("sam@example.com", "sam-password").await;
    let other = app.register("oz@example.com", "oz-password").await;
    let mut stream = Stream::open(&app.base_url, &user, None).await;
    let ready = stream.next(Duration::from_secs(10)).await;
    assert_eq!(ready.event, "ready");
    assert!(ready.data["cursor"].is_i64());

    let other_root = app.root_id(&other).await;
    app.mkdir(&other, &other_root, "not yours").await;
    let root = app.root_id(&user).await;
    let folder = app.mkdir(&user, &root, "docs").await;
    let file = app.upload(&user, &root, "a.txt", b"one").await["id"].as_str().unwrap().to_owned();
    let replaced =
        app.request(Method::PATCH, &format!("/file/content?id={file}")).bearer_auth(&user.access).body("two").send();
    assert_eq!(replaced.await.unwrap().status(), 200);
    let path = format!("/object/{file}");
    let renamed = app.call(Method::PATCH, &path, Some(&user.access), Some(json!({"name": "b.txt"}))).await;
    assert_eq!(renamed.status(), 200);
    let moved = json!({"src_ids": [file], "dst_id": folder});
    assert_eq!(app.call(Method::PATCH, "/object", Some(&user.access), Some(moved)).await.status(), 204);
    let ids = json!({"ids": [file]});
    assert!(app.call(Method::DELETE, "/object", Some(&user.access), Some(ids.clone())).await.status().is_success());
    assert!(
        app.call(Method::PATCH, "/trash/restore", Some(&user.access), Some(ids.clone())).await.status().is_success()
    );
    assert!(app.call(Method::DELETE, "/object", Some(&user.access), Some(ids.clone())).await.status().is_success());
    assert!(app.call(Method::DELETE, "/trash", Some(&user.access), Some(ids)).await.status().is_success());

    let (seen, cursors) = stream.changes(9).await;
    assert_eq!(
        seen,
        pairs(&[
            ("created", "docs"),
            ("created", "a.txt"),
            ("modified", "a.txt"),
            ("renamed", "b.txt"),
            ("moved", "b.txt"),
            ("trashed", "b.txt"),
            ("restored", "b.txt"),
            ("trashed", "b.txt"),
            ("deleted", "b.txt"),
        ]),
        "in order, and nothing of another user's"
    );
    assert!(cursors.windows(2).all(|pair| pair[0] < pair[1]), "cursors grow: {cursors:?}");

    // The token may come in the query (a browser's EventSource sends no header); none is 401.
    let query = format!("{}/api/v1/events?access_token={}", app.base_url, user.access);
    let response = app.client.get(query).send().await.unwrap();
    assert_eq!(response.status(), 200);
    drop(response);
    let anonymous = app.client.get(format!("{}/api/v1/events", app.base_url)).send().await.unwrap();
    assert_eq!(error_body(anonymous, 401).await["code"], "auth.missing_token");
}

async fn a_subscriber_on_another_master_resumes_with_since_and_misses_nothing(app: TestApp) {
    let user = app.register("mia@example.com", "mia-password").await;
    let root = app.root_id(&user).await;
    let peer = app.spawn_peer().await;
    let peer_base = format!("http://{}", peer.addr);
    let mut stream = Stream::open(&peer_base, &user, None).await;
    let ready = stream.next(Duration::from_secs(10)).await;
    assert_eq!(ready.event, "ready");

    // Written through this master, heard through the peer.
    for name in ["one", "two", "three"] {
        app.mkdir(&user, &root, name).await;
    }
    let (seen, cursors) = stream.changes(3).await;
    assert_eq!(seen, pairs(&[("created", "one"), ("created", "two"), ("created", "three")]));
    let last = *cursors.last().unwrap();

    // Gone for a while: what happens meanwhile is replayed on return, then the stream goes on.
    drop(stream);
    for name in ["four", "five"] {
        app.mkdir(&user, &root, name).await;
    }
    let mut stream = Stream::open(&peer_base, &user, Some(last)).await;
    assert_eq!(stream.next(Duration::from_secs(10)).await.data["cursor"], last, "ready at the given cursor");
    app.mkdir(&user, &root, "six").await;
    let (seen, cursors) = stream.changes(3).await;
    assert_eq!(seen, pairs(&[("created", "four"), ("created", "five"), ("created", "six")]), "no gap, no repeat");
    assert!(cursors[0] > last);

    // Many writes at once, from both masters, all arrive once and in cursor order.
    let peer_app = |name: String| {
        let (client, base, access, root) = (app.client.clone(), peer_base.clone(), user.access.clone(), root.clone());
        async move {
            let body = json!({"parent_id": root, "name": name});
            let response =
                client.post(format!("{base}/api/v1/directory")).bearer_auth(access).json(&body).send().await.unwrap();
            assert_eq!(response.status(), 201);
        }
    };
    let mut writes = Vec::new();
    for n in 0..20 {
        let name = format!("burst-{n:02}");
        if n % 2 == 0 {
            writes.push(tokio::spawn(peer_app(name)));
        } else {
            let (client, base, access, root) =
                (app.client.clone(), app.base_url.clone(), user.access.clone(), root.clone());
            writes.push(tokio::spawn(async move {
                let body = json!({"parent_id": root, "name": name});
                let response = client
                    .post(format!("{base}/api/v1/directory"))
                    .bearer_auth(access)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 201);
            }));
        }
    }
    for write in writes {
        write.await.unwrap();
    }
    let (seen, cursors) = stream.changes(20).await;
    let mut names: Vec<String> = seen.into_iter().map(|(_, name)| name).collect();
    names.sort();
    assert_eq!(names, (0..20).map(|n| format!("burst-{n:02}")).collect::<Vec<_>>());
    assert!(cursors.windows(2).all(|pair| pair[0] < pair[1]), "{cursors:?}");
}

async fn a_cursor_older_than_the_kept_events_answers_410(app: TestApp) {
    let user = app.register("old@example.com", "old-password").await;
    let root = app.root_id(&user).await;
    app.mkdir(&user, &root, "a").await;
    app.mkdir(&user, &root, "b").await;
    let pruned = events::prune(app.context(), now_ms() + 60_000, Duration::ZERO).await.unwrap();
    assert!(pruned >= 2, "{pruned}");
    let response = app.client.get(format!("{}/api/v1/events?since=0", app.base_url)).bearer_auth(&user.access);
    let body = error_body(response.send().await.unwrap(), 410).await;
    assert_eq!(body["code"], "events.cursor_expired");
    // From the floor on, the stream works again.
    let mut stream = Stream::open(&app.base_url, &user, None).await;
    let ready = stream.next(Duration::from_secs(10)).await;
    let floor = ready.data["cursor"].as_i64().unwrap();
    drop(stream);
    let mut resumed = Stream::open(&app.base_url, &user, Some(floor)).await;
    assert_eq!(resumed.next(Duration::from_secs(10)).await.event, "ready");
    app.mkdir(&user, &root, "c").await;
    assert_eq!(resumed.changes(1).await.0, pairs(&[("created", "c")]));
}

async fn a_cursor_beyond_the_newest_answers_409_and_ready_names_the_epoch(app: TestApp) {
    let user = app.register("ahead@example.com", "ahead-password").await;
    let root = app.root_id(&user).await;
    app.mkdir(&user, &root, "a").await;
    let (newest,): (i64,) =
        sqlx::query_as("SELECT MAX(seq) FROM change_events").fetch_one(app.context().db().reader()).await.unwrap();
    assert!(newest > 0);

    // The newest cursor itself is fine: nothing since.
    let mut stream = Stream::open(&app.base_url, &user, Some(newest)).await;
    let ready = stream.next(Duration::from_secs(10)).await;
    assert_eq!(ready.event, "ready");
    assert_eq!(ready.data["cursor"], newest);
    let epoch = ready.data["epoch"].as_str().expect("ready names the epoch").to_owned();
    assert_eq!(epoch.len(), 32, "a random id: {epoch}");
    drop(stream);

    // One beyond it comes from another history (a restored backup): refused, not "nothing since".
    for ahead in [newest + 1, newest + 1_000_000] {
        let response =
            app.client.get(format!("{}/api/v1/events?since={ahead}", app.base_url)).bearer_auth(&user.access);
        let body = error_body(response.send().await.unwrap(), 409).await;
        assert_eq!(body["code"], "events.cursor_ahead", "{body}");
    }

    // Pruned away, the floor still counts as handed out.
    events::prune(app.context(), now_ms() + 60_000, Duration::ZERO).await.unwrap();
    let mut stream = Stream::open(&app.base_url, &user, Some(newest)).await;
    assert_eq!(stream.next(Duration::from_secs(10)).await.event, "ready");
    drop(stream);

    // The epoch belongs to the database: the same after a restart.
    let mut app = app;
    app.restart().await;
    let mut stream = Stream::open(&app.base_url, &user, None).await;
    assert_eq!(stream.next(Duration::from_secs(10)).await.data["epoch"], epoch.as_str());
}

/// On PostgreSQL a cursor is handed out when the event is written, before its transaction
/// commits: a transaction that commits after a later one (a big copy, a large trash) leaves a
/// gap the hub must wait out, however long, rather than skip (it once skipped after 3 s, and
/// live subscribers never heard the change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_committed_after_a_later_one_reaches_live_subscribers_on_postgres() {
    let Some(app) = TestApp::spawn(nubo_tests::Backend::Postgres).await else { return };
    let user = app.register("gus@example.com", "gus-password").await;
    let root = app.root_id(&user).await;
    let mut stream = Stream::open(&app.base_url, &user, None).await;
    let ready = stream.next(Duration::from_secs(10)).await;
    let start = ready.data["cursor"].as_i64().unwrap();

    // A transaction writes a folder (its event takes the next cursor) and stays open.
    let mut slow = app.context().db().writer().begin().await.unwrap();
    let now = now_ms();
    sqlx::query(
        "INSERT INTO objects (id, owner_id, parent_id, name, kind, size, created_at, updated_at) VALUES ($1, $2, $3, 'slow', 'folder', 0, $4, $4)",
    )
    .bind(uuid::Uuid::new_v4().to_string())
    .bind(&user.user_id)
    .bind(&root)
    .bind(now)
    .execute(&mut *slow)
    .await
    .unwrap();
    // A later change commits first, and the slow one only well after the hub used to give up.
    app.mkdir(&user, &root, "quick").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    slow.commit().await.unwrap();

    let (seen, cursors) = stream.changes(2).await;
    assert_eq!(seen, pairs(&[("created", "slow"), ("created", "quick")]), "both, in cursor order");
    assert!(cursors[0] < cursors[1] && cursors[0] > start);
    // A reader resuming from before both gets them too.
    let mut resumed = Stream::open(&app.base_url, &user, Some(start)).await;
    let (replayed, _) = resumed.changes(2).await;
    assert_eq!(replayed, seen);
}
