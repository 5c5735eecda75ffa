//! `nubo-bench events [--subscribers S] [--changes N]`: the change-event fan-out. S Server-Sent
//! Event subscribers (default 100) of one user follow `GET /events`; N folders (default 500) are
//! created through the API, 8 at a time; the figure is how long until every subscriber has every
//! change, as events delivered per second (N × S over that time), beside the rate of the writes
//! alone. Then the same subscribers reconnect with `since` = the cursor before the writes and
//! replay all N (delivery alone, not limited by the writes' pace). On SQLite with one in-process
//! master, then on PostgreSQL + Redis with the subscribers on a second master (the writes go
//! through the first), when those services are there.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use nubo_tests::{Backend, Session, TestApp};
use serde_json::json;

struct Options {
    subscribers: usize,
    changes: usize,
}

fn parse(args: &[String]) -> Options {
    let mut options = Options { subscribers: 100, changes: 500 };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value: usize = args.next().and_then(|v| v.parse().ok()).expect("a number after the flag");
        match flag.as_str() {
            "--subscribers" => options.subscribers = value,
            "--changes" => options.changes = value,
            other => panic!("unknown option {other}"),
        }
    }
    options
}

pub async fn run(args: &[String]) {
    let options = parse(args);
    println!(
        "change events: {} subscribers, {} changes (folders created 8 at a time)",
        options.subscribers, options.changes
    );
    println!(
        "| setup | writes/s | live: all delivered after s | live: events delivered/s | replay of all to all: s | replay: events/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    // All subscribers are one user's: lift the per-user cap on streams (8 by default).
    let uncapped = |config: &mut nubo_model::config::Config| config.max_event_streams_per_user = 0;
    let sqlite = TestApp::spawn_configured(Backend::Sqlite, uncapped).await.expect("SQLite needs no service");
    measure("SQLite, one master", &sqlite, None, &options).await;
    match TestApp::spawn_configured(Backend::Postgres, uncapped).await {
        Some(postgres) => {
            let peer = postgres.spawn_peer().await;
            let base = format!("http://{}", peer.addr);
            measure("PostgreSQL + Redis, subscribers on a second master", &postgres, Some(base), &options).await;
        }
        None => println!("| PostgreSQL + Redis | (no server: skipped) | | | | |"),
    }
}

async fn measure(label: &str, app: &TestApp, subscribe_at: Option<String>, options: &Options) {
    let user = app.register(&format!("bench-{}@example.com", uuid::Uuid::new_v4().simple()), "bench-password").await;
    let base = subscribe_at.unwrap_or_else(|| app.base_url.clone());
    let (subscribers, cursor) = subscribe(&base, &user.access, None, options).await;
    let root = app.root_id(&user).await;
    let started = Instant::now();
    write(app, &user, &root, options.changes).await;
    let written = started.elapsed();
    for subscriber in subscribers {
        subscriber.await.expect("subscriber task");
    }
    let delivered = started.elapsed();
    let replay_started = Instant::now();
    let (replaying, _) = subscribe(&base, &user.access, Some(cursor), options).await;
    for subscriber in replaying {
        subscriber.await.expect("subscriber task");
    }
    let replayed = replay_started.elapsed();
    let events = (options.changes * options.subscribers) as f64;
    println!(
        "| {label} | {:.0} | {:.2} | {:.0} | {:.2} | {:.0} |",
        options.changes as f64 / written.as_secs_f64(),
        delivered.as_secs_f64(),
        events / delivered.as_secs_f64(),
        replayed.as_secs_f64(),
        events / replayed.as_secs_f64(),
    );
}

/// Starts `options.subscribers` followers of the stream (from `since` when given), each
/// reading until it has `options.changes` changes; answers them once all are ready, with the
/// cursor their streams started from.
async fn subscribe(
    base: &str,
    token: &str,
    since: Option<i64>,
    options: &Options,
) -> (Vec<tokio::task::JoinHandle<()>>, i64) {
    let mut subscribers = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(options.subscribers);
    for _ in 0..options.subscribers {
        let (base, token, ready, expected) = (base.to_owned(), token.to_owned(), ready_tx.clone(), options.changes);
        subscribers.push(tokio::spawn(async move { follow(&base, &token, since, ready, expected).await }));
    }
    let mut cursor = i64::MAX;
    for _ in 0..options.subscribers {
        cursor = cursor.min(ready_rx.recv().await.expect("every subscriber is ready"));
    }
    (subscribers, cursor)
}

async fn write(app: &TestApp, user: &Session, root: &str, count: usize) {
    let names: Vec<String> = (0..count).map(|n| format!("folder-{n:05}")).collect();
    futures_util::stream::iter(names)
        .for_each_concurrent(8, |name| async move {
            let body = json!({"parent_id": root, "name": name});
            let response = app
                .client
                .post(format!("{}/api/v1/directory", app.base_url))
                .bearer_auth(&user.access)
                .json(&body)
                .send()
                .await
                .expect("create a folder");
            assert_eq!(response.status(), 201);
        })
        .await;
}

/// Reads the stream (from `since` when given) until `expected` change events arrived; sends
/// the `ready` cursor to `ready`.
async fn follow(base: &str, token: &str, since: Option<i64>, ready: tokio::sync::mpsc::Sender<i64>, expected: usize) {
    let query = since.map(|cursor| format!("?since={cursor}")).unwrap_or_default();
    let request = reqwest::Client::new().get(format!("{base}/api/v1/events{query}")).bearer_auth(token);
    let response = request.send().await.expect("subscribe");
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let (mut buffer, mut changes, mut announced) = (String::new(), 0, false);
    while changes < expected {
        let chunk = tokio::time::timeout(Duration::from_secs(60), body.next())
            .await
            .expect("events within a minute")
            .expect("the stream goes on")
            .expect("a chunk");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            if block.contains("event: ready") && !announced {
                announced = true;
                ready.send(ready_cursor(&block)).await.expect("the bench waits");
            } else if block.contains("event: change") {
                changes += 1;
            }
        }
    }
}

/// The cursor of a `ready` event block (`data: {"cursor": n}`).
fn ready_cursor(block: &str) -> i64 {
    let data = block.lines().find_map(|line| line.strip_prefix("data:")).expect("a data line");
    let value: serde_json::Value = serde_json::from_str(data.trim()).expect("JSON data");
    value["cursor"].as_i64().expect("a cursor")
}
