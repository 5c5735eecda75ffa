//! `nubo-bench cluster [--seconds N] [--concurrency C]`: requests/s through the balancer of the
//! process topology (`nubo_tests::topology`: nginx round-robin, PostgreSQL, Redis) with one
//! master behind it, then with two. Two loads each, N seconds from C keep-alive connections: the
//! sign-in-guarded listing of a folder of 20 files (`GET /directory`, bearer token), and a
//! 64 KiB file through its source link (`GET /f/...`). The file lives on a local policy in the
//! masters' shared data directory, so both loads measure the masters, not a node.
//!
//! The topology runs the binaries next to this one, in this one's profile: build them first
//! (`cargo build -p nubo-master -p nubo-slave -p nubo-tests -p nubo-bench --bins`, with
//! `--release` for release figures).

use std::time::Duration;

use nubo_tests::topology::{Topology, TopologyOptions};
use reqwest::Method;
use serde_json::{Value, json};

use crate::{Figures, load};

struct Options {
    seconds: u64,
    concurrency: usize,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options { seconds: 10, concurrency: 64 };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = value.parse::<u64>().map_err(|_| format!("{flag} takes a number"))?;
        match flag.as_str() {
            "--seconds" => options.seconds = number.max(1),
            "--concurrency" => options.concurrency = number.max(1) as usize,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(options)
}

const FILE_SIZE: usize = 64 * 1024;
const LISTED_FILES: usize = 20;

pub async fn run(args: &[String]) {
    let options = match parse(args) {
        Ok(options) => options,
        Err(err) => {
            eprintln!("{err}\nusage: nubo-bench cluster [--seconds N] [--concurrency C]");
            std::process::exit(2);
        }
    };
    let profile = if cfg!(debug_assertions) { "debug build" } else { "release build" };
    println!(
        "through nginx round-robin; PostgreSQL and Redis; {} s a load, concurrency {}; {profile}",
        options.seconds, options.concurrency
    );
    let mut rows = Vec::new();
    for masters in [1, 2] {
        let started = Topology::start_with(TopologyOptions { masters, nodes: 0, ..TopologyOptions::default() }).await;
        let Some(cluster) = started else {
            eprintln!("PostgreSQL, Redis or nginx is unavailable: nothing measured");
            std::process::exit(1);
        };
        let (listing, download) = prepare(&cluster).await;
        let duration = Duration::from_secs(options.seconds);
        // A short warm-up: connections to the balancer and from it to the masters are open.
        load("warm-up", &listing.0, Some(&listing.1), options.concurrency, Duration::from_secs(1)).await;
        let label = |what: &str| format!("{what}, {masters} master{}", if masters == 1 { "" } else { "s" });
        let figures =
            load(&label("GET /directory (signed in)"), &listing.0, Some(&listing.1), options.concurrency, duration)
                .await;
        report(&figures);
        rows.push(figures);
        let figures = load(&label("64 KiB source link"), &download, None, options.concurrency, duration).await;
        report(&figures);
        rows.push(figures);
        drop(cluster);
    }
    crate::print_table(&rows, options.concurrency);
    for what in 0..2 {
        let (one, two) = (&rows[what], &rows[what + 2]);
        let ratio = (two.requests as f64 / two.seconds) / (one.requests as f64 / one.seconds);
        println!("{}: two masters / one: {ratio:.2}x", ["listing", "64 KiB download"][what]);
    }
}

fn report(figures: &Figures) {
    eprintln!("{}: {:.0} req/s ({} errors)", figures.label, figures.requests as f64 / figures.seconds, figures.errors);
}

/// A user with a folder of [`LISTED_FILES`] files and a 64 KiB file with a source link, on a
/// local policy; answers the listing's URL and token, and the source link's URL.
async fn prepare(cluster: &Topology) -> ((String, String), String) {
    let app = &cluster.app;
    let admin = &cluster.admin;
    app.use_policy(admin, json!({"name": "local", "type": "local", "options": {"root": "bench"}})).await;
    let user = app.register("bench@example.com", "bench-password").await;
    let root = app.root_id(&user).await;
    let folder = app.mkdir(&user, &root, "listed").await;
    for i in 0..LISTED_FILES {
        app.upload(&user, &folder, &format!("file-{i:02}.txt"), format!("file {i}").as_bytes()).await;
    }
    let body: Vec<u8> = (0..FILE_SIZE).map(|i| (i * 7 % 251) as u8).collect();
    let file = app.upload(&user, &root, "hot.bin", &body).await;
    let id = file["id"].as_str().expect("file id");
    let source = app.call(Method::POST, &format!("/file/source/{id}"), Some(&user.access), None).await;
    assert!(source.status().is_success(), "source link: {}", source.status());
    let source: Value = source.json().await.expect("source link");
    let download = format!("{}{}", app.base_url, source["url"].as_str().expect("source url"));
    (((app.api("/directory/listed")), user.access), download)
}
