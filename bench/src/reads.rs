//! `nubo-bench reads [--requests N] [--rounds R] [--concurrency C]`: one 64 KiB file read three
//! ways from one `nubo-master` process (release build, SQLite, local policy), side by side:
//! WebDAV `GET` (Basic auth), its public source link, and single-use download tokens
//! (`GET /file/download/{token}`, one new token per request, all created before the round).
//! Each round sends N requests each way from C keep-alive connections, the order of the ways
//! rotating; the table gives the median requests/s of the rounds and each way's ratio to
//! WebDAV's (the target: the REST ways within 20% of WebDAV).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::json;

use crate::files::start_signed_in;

const FILE_SIZE: usize = 64 * 1024;
/// The WebDAV login of the account this command creates for the bench user, and its password.
const DAV_LOGIN: (&str, &str) = ("bench@example.com/reads", "reads-dav-password");

struct Options {
    requests: usize,
    rounds: usize,
    concurrency: usize,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options { requests: 60_000, rounds: 3, concurrency: 64 };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = value.parse::<usize>().map_err(|_| format!("{flag} takes a number"))?;
        match flag.as_str() {
            "--requests" => options.requests = number.max(1),
            "--rounds" => options.rounds = number.max(1),
            "--concurrency" => options.concurrency = number.max(1),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(options)
}

/// How a request of one way is addressed.
#[derive(Clone)]
enum Way {
    /// The same URL each time, with Basic credentials when given.
    Fixed { url: String, basic: Option<(&'static str, &'static str)> },
    /// A new URL each time (single-use download tokens), taken in order.
    Each(Arc<Vec<String>>),
}

const WAYS: [&str; 3] = ["WebDAV GET", "source link", "download token"];

pub async fn run(args: &[String]) {
    let options = match parse(args) {
        Ok(options) => options,
        Err(err) => {
            eprintln!("{err}\nusage: nubo-bench reads [--requests N] [--rounds R] [--concurrency C]");
            std::process::exit(2);
        }
    };
    let (bench, _) = start_signed_in().await;
    let body: Vec<u8> = (0..FILE_SIZE).map(|i| (i * 7 % 251) as u8).collect();
    let created = bench
        .client
        .post(format!("{}/file/content?parent_id={}&name=hot.bin", bench.server.base, bench.root))
        .bearer_auth(&bench.token)
        .body(body)
        .send()
        .await
        .expect("upload");
    assert!(created.status().is_success(), "upload: {}", created.status());
    let file: serde_json::Value = created.json().await.expect("object");
    let id = file["id"].as_str().expect("id").to_owned();
    let account = json!({"name": "reads", "password": DAV_LOGIN.1});
    bench.json(reqwest::Method::POST, "/webdav/accounts", Some(account)).await;
    let site = bench.server.base.trim_end_matches("/api/v1").to_owned();
    let source = bench.json(reqwest::Method::POST, &format!("/file/source/{id}"), None).await;
    let source_url = format!("{site}{}", source["url"].as_str().expect("source url"));
    let dav_url = format!("{site}/dav/hot.bin");

    println!("one 64 KiB file, {} requests a way a round, concurrency {}", options.requests, options.concurrency);
    let mut figures: Vec<Vec<f64>> = vec![Vec::new(); WAYS.len()];
    for round in 0..options.rounds {
        let tokens = Arc::new(download_urls(&bench, &site, &id, options.requests).await);
        for step in 0..WAYS.len() {
            let which = (round + step) % WAYS.len();
            let way = match which {
                0 => Way::Fixed { url: dav_url.clone(), basic: Some(DAV_LOGIN) },
                1 => Way::Fixed { url: source_url.clone(), basic: None },
                _ => Way::Each(tokens.clone()),
            };
            let per_second = drive(&way, options.requests, options.concurrency).await;
            println!("round {}: {}: {per_second:.0} req/s", round + 1, WAYS[which]);
            figures[which].push(per_second);
        }
    }
    let medians: Vec<f64> = figures.iter_mut().map(|samples| median(samples)).collect();
    println!("\n| way | requests/s (median of {}) | / WebDAV |", options.rounds);
    println!("|---|---:|---:|");
    for (which, label) in WAYS.iter().enumerate() {
        println!("| {label} | {:.0} | {:.2}x |", medians[which], medians[which] / medians[0]);
    }
    println!("\ntarget: the REST ways within 20% of WebDAV (at least 0.80x)");
}

/// `count` single-use download URLs of file `id`, created 64 at a time.
async fn download_urls(bench: &crate::files::Bench, site: &str, id: &str, count: usize) -> Vec<String> {
    let started = Instant::now();
    let path = format!("/file/download/{id}");
    let mut urls = Vec::with_capacity(count);
    while urls.len() < count {
        let batch = (count - urls.len()).min(64);
        let requests = (0..batch).map(|_| bench.json(reqwest::Method::POST, &path, None));
        for token in futures_util::future::join_all(requests).await {
            urls.push(format!("{site}{}", token["url"].as_str().expect("download url")));
        }
    }
    eprintln!("created {count} download tokens in {:.1} s", started.elapsed().as_secs_f64());
    urls
}

/// Sends `total` GETs the `way` says from `concurrency` keep-alive connections; answers
/// requests per second. Every answer must be the whole file.
async fn drive(way: &Way, total: usize, concurrency: usize) -> f64 {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().expect("client");
            let (way, next) = (way.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= total {
                        return;
                    }
                    let request = match &way {
                        Way::Fixed { url, basic } => {
                            let request = client.get(url);
                            match basic {
                                Some((user, password)) => request.basic_auth(user, Some(password)),
                                None => request,
                            }
                        }
                        Way::Each(urls) => client.get(&urls[index]),
                    };
                    let response = request.send().await.expect("request");
                    let status = response.status();
                    let bytes = response.bytes().await.expect("body");
                    assert!(status.is_success() && bytes.len() == FILE_SIZE, "{status}: {} bytes", bytes.len());
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("worker");
    }
    total as f64 / started.elapsed().as_secs_f64()
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}
