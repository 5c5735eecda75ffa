//! `nubo-bench`: throughput and latency figures for Nubo, printed as a table. Not a test: run
//! it in release mode on a quiet machine and compare figures measured in the same run.
//!
//! `nubo-bench files` runs the file workloads against a `nubo-master` process (see `files.rs`);
//! `nubo-bench nodes` compares uploads straight to a `nubo-slave` process with uploads through
//! the master (see `nodes.rs`); `nubo-bench reads` reads one small file through WebDAV, a source
//! link and download tokens side by side (see `reads.rs`); `nubo-bench search` times searches
//! over 100,000 objects on SQLite and PostgreSQL (see `search.rs`); `nubo-bench archive` streams
//! a ZIP of a 5 GiB folder while sampling the master's memory (see `archive.rs`);
//! `nubo-bench summary` times `GET /admin/summary` on a site of 1,000,000 objects on SQLite and
//! PostgreSQL (see `summary.rs`); `nubo-bench thumbnails` makes thumbnails of 12-megapixel
//! JPEGs and reads the master's peak memory while two are made at once (see `thumbnails.rs`);
//! `nubo-bench events` measures the fan-out of change events to 100 subscribers (see
//! `events.rs`); `nubo-bench cluster` measures requests/s through nginx with one master behind
//! it and with two (see `cluster.rs`); `nubo-bench cli` times the `nubo` client's `put`
//! against `rclone copy` over WebDAV, through the master and straight to a node (see `cli.rs`);
//! `nubo-bench sync` times `nubo sync` against `rclone bisync` over WebDAV (see `sync.rs`).
//!
//! `nubo-bench auth [--seconds N] [--concurrency C] [--static-url URL]` starts a master on
//! SQLite (in-memory store), signs in, then drives a `jwt_required` endpoint
//! (`GET /user/session`) and an `auth_required` one (`GET /user/me`) with C concurrent
//! keep-alive connections for N seconds each. With `--static-url` it measures that URL (e.g. a
//! tiny file served by nginx) the same way, as the yardstick.
//!
//! `nubo-bench metrics [--seconds N] [--concurrency C]` measures the same way two masters in one
//! process, one with metrics off and one with them on, in turns.
//!
//! `nubo-bench login [--seconds N] [--concurrency C] [--users U]` measures sign-ins per second
//! with the password alone and with a TOTP code as well (see `login.rs`).
//!
//! `auth` and `login` run their master in-process (the `nubo-tests` harness); the other commands start the
//! `nubo-master` and `nubo-slave` binaries found next to this one, which `cargo run -p
//! nubo-bench` does not build: build them in the same profile first
//! (`cargo build --release --workspace --bins`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nubo_tests::{Backend, TestApp};

mod archive;
mod cli;
mod cluster;
mod dav;
mod events;
mod files;
mod import;
mod login;
mod migrate;
mod nodes;
mod reads;
mod search;
mod summary;
mod sync;
mod sync_growth;
mod thumbnails;
mod uploads;

struct Options {
    seconds: u64,
    concurrency: usize,
    static_url: Option<String>,
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut options = Options { seconds: 10, concurrency: 64, static_url: None };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut value = || iter.next().cloned().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--seconds" => options.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--concurrency" => options.concurrency = value()?.parse().map_err(|e| format!("--concurrency: {e}"))?,
            "--static-url" => options.static_url = Some(value()?),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

/// Figures of one load run.
struct Figures {
    label: String,
    requests: usize,
    errors: usize,
    seconds: f64,
    p50_ms: f64,
    p99_ms: f64,
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[index]) / 1000.0
}

/// Sends GET `url` from `concurrency` workers for `duration`; each worker keeps its connection.
async fn load(label: &str, url: &str, token: Option<&str>, concurrency: usize, duration: Duration) -> Figures {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().expect("client");
            let url = url.to_owned();
            let token = token.map(str::to_owned);
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(100_000);
                let mut errors = 0;
                while !stop.load(Ordering::Relaxed) {
                    let begin = Instant::now();
                    let mut request = client.get(&url);
                    if let Some(token) = &token {
                        request = request.bearer_auth(token);
                    }
                    match request.send().await {
                        Ok(response) if response.status().is_success() => {
                            let _ = response.bytes().await;
                            latencies.push(begin.elapsed().as_micros() as u32);
                        }
                        _ => errors += 1,
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    let mut errors = 0;
    for worker in workers {
        let (mut l, e) = worker.await.expect("worker");
        latencies.append(&mut l);
        errors += e;
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    Figures {
        label: label.to_owned(),
        requests: latencies.len(),
        errors,
        seconds,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
    }
}

fn print_table(rows: &[Figures], concurrency: usize) {
    println!("\n| endpoint | requests/s | p50 ms | p99 ms | errors | concurrency |");
    println!("|---|---:|---:|---:|---:|---:|");
    for row in rows {
        println!(
            "| {} | {:.0} | {:.2} | {:.2} | {} | {} |",
            row.label,
            row.requests as f64 / row.seconds,
            row.p50_ms,
            row.p99_ms,
            row.errors,
            concurrency
        );
    }
}

/// Starts servers on a runtime of their own (two workers, like the machine's two cores), so
/// the load generator does not starve them of executor time. `start` makes them and answers
/// what the load needs beside what must live as long as they serve; the returned function
/// stops them.
fn serve_apart<T, K, F>(start: impl FnOnce() -> F + Send + 'static) -> (T, impl FnOnce())
where
    T: Send + 'static,
    K: 'static,
    F: std::future::Future<Output = (T, K)>,
{
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        runtime.block_on(async move {
            let (ready, serving) = start().await;
            ready_tx.send(ready).expect("the bench waits");
            let _ = stop_rx.await;
            drop(serving);
        });
    });
    let ready = ready_rx.recv().expect("the servers start");
    let stop = move || {
        let _ = stop_tx.send(());
        let _ = server.join();
    };
    (ready, stop)
}

async fn bench_auth(options: Options) {
    let ((base, token), stop) = serve_apart(|| async {
        let app = TestApp::spawn(Backend::Sqlite).await.expect("SQLite needs no service");
        let admin = app.login_admin().await;
        ((app.api(""), admin.access), app)
    });
    let duration = Duration::from_secs(options.seconds);
    let mut rows = Vec::new();
    if let Some(url) = &options.static_url {
        rows.push(load(&format!("static file {url}"), url, None, options.concurrency, duration).await);
    }
    rows.push(
        load(
            "GET /user/session (jwt_required)",
            &format!("{base}/user/session"),
            Some(&token),
            options.concurrency,
            duration,
        )
        .await,
    );
    rows.push(
        load(
            "GET /user/me (auth_required, SQLite)",
            &format!("{base}/user/me"),
            Some(&token),
            options.concurrency,
            duration,
        )
        .await,
    );
    print_table(&rows, options.concurrency);
    if options.static_url.is_some() {
        let ratio = (rows[0].requests as f64 / rows[0].seconds) / (rows[1].requests as f64 / rows[1].seconds);
        println!("\nstatic / jwt_required throughput ratio: {ratio:.2} (target: at most 2)");
    }
    stop();
}

/// `nubo-bench metrics`: the cost of the metrics middleware. Two masters in one process on
/// SQLite, one with metrics off and one with a `metrics_token`, take the same cheap requests in
/// turns (off, on, off, on), so drift in the machine's load falls on both alike.
async fn bench_metrics(options: Options) {
    let ([(off, off_token), (on, on_token)], stop) = serve_apart(|| async {
        let off = TestApp::spawn(Backend::Sqlite).await.expect("SQLite needs no service");
        let on = TestApp::spawn_configured(Backend::Sqlite, |config| {
            config.metrics_token = Some(nubo_common::secret::Secret::new("bench-metrics-token"));
        })
        .await
        .expect("SQLite needs no service");
        let (off_admin, on_admin) = (off.login_admin().await, on.login_admin().await);
        ([(off.api(""), off_admin.access), (on.api(""), on_admin.access)], (off, on))
    });
    let duration = Duration::from_secs(options.seconds);
    let mut rows = Vec::new();
    for round in 1..=2 {
        for (path, needs_token) in [("/site/ping", false), ("/user/session", true)] {
            for (state, base, token) in [("off", &off, &off_token), ("on", &on, &on_token)] {
                let label = format!("GET {path}, metrics {state} (round {round})");
                let token = needs_token.then_some(token.as_str());
                rows.push(load(&label, &format!("{base}{path}"), token, options.concurrency, duration).await);
            }
        }
    }
    print_table(&rows, options.concurrency);
    let rate = |row: &Figures| row.requests as f64 / row.seconds;
    for (index, path) in ["/site/ping", "/user/session"].iter().enumerate() {
        let (mut off_total, mut on_total) = (0.0, 0.0);
        for round in 0..2 {
            off_total += rate(&rows[round * 4 + index * 2]);
            on_total += rate(&rows[round * 4 + index * 2 + 1]);
        }
        println!("GET {path}: metrics on / off throughput {:.3}", on_total / off_total);
    }
    stop();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: nubo-bench auth [--seconds N] [--concurrency C] [--static-url URL] | nubo-bench metrics [--seconds N] [--concurrency C] | nubo-bench login [--seconds N] [--concurrency C] [--users U] | nubo-bench files [--small ROUNDS] | nubo-bench uploads --baseline PATH [--rounds N] | nubo-bench migrate | nubo-bench nodes | nubo-bench reads [--requests N] [--rounds R] [--concurrency C] | nubo-bench dav [--runs N] [--peers a,b] | nubo-bench search [--objects N] [--rounds R] | nubo-bench archive [--size-mib N] [--files F] [--keep PATH] | nubo-bench summary [--objects N] [--users U] [--rounds R] | nubo-bench thumbnails [--images N] | nubo-bench events [--subscribers S] [--changes N] | nubo-bench cluster [--seconds N] [--concurrency C] | nubo-bench cli [--big-mib N] [--small-files N] [--parallel N] | nubo-bench sync [--small-files N] [--small-kib K] [--big-mib N] | nubo-bench sync-growth [--sizes 1000,10000,50000,200000] [--kib K] [--peer-first-max N] [--peer-max N] | nubo-bench import [--files N]";
    let Some((command, rest)) = args.split_first() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    if matches!(command.as_str(), "--help" | "-h" | "help") {
        println!("{usage}");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    match command.as_str() {
        "cluster" => return runtime.block_on(cluster::run(rest)),
        "dav" => return runtime.block_on(dav::run(rest)),
        "files" => return runtime.block_on(files::run(rest)),
        "uploads" => return runtime.block_on(uploads::run(rest)),
        "login" => return runtime.block_on(login::run(rest)),
        "archive" => return runtime.block_on(archive::run(rest)),
        "reads" => return runtime.block_on(reads::run(rest)),
        "search" => return runtime.block_on(search::run(rest)),
        "summary" => return runtime.block_on(summary::run(rest)),
        "thumbnails" => return runtime.block_on(thumbnails::run(rest)),
        "cli" => return runtime.block_on(cli::run(rest)),
        "sync" => return runtime.block_on(sync::run(rest)),
        "sync-growth" => return runtime.block_on(sync_growth::run(rest)),
        "import" => return runtime.block_on(import::run(rest)),
        "events" => return runtime.block_on(events::run(rest)),
        "s3-copy" => return runtime.block_on(migrate::copy_files(rest)),
        _ => {}
    }
    let options = match parse_options(rest) {
        Ok(options) => options,
        Err(err) => {
            eprintln!("{err}\n{usage}");
            std::process::exit(2);
        }
    };
    match command.as_str() {
        "auth" => runtime.block_on(bench_auth(options)),
        "metrics" => runtime.block_on(bench_metrics(options)),
        "migrate" => runtime.block_on(migrate::run()),
        "nodes" => runtime.block_on(nodes::run()),
        other => {
            eprintln!("unknown benchmark {other:?}\n{usage}");
            std::process::exit(2);
        }
    }
}
