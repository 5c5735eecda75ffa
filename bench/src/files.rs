//! `nubo-bench files`: the file workloads against a real `nubo-master` process (release build,
//! SQLite, local policy) next to the ceilings of this machine measured in the same run.
//!
//! Workloads: 1 GiB upload in 8 MiB chunks (1 and 4 parallel streams), its download through a
//! token, 1 MiB range reads (through a source link, which unlike a token can be reused),
//! 1000 new small files each through an upload session, one `POST /file/content` and WebDAV
//! `PUT` (side by side), listing a folder of 10,000 entries (10 pages of 1000), and moving
//! a folder with 100,000 descendants. The two big trees are seeded directly in SQLite (creating
//! them through the API would take minutes and is not what is measured). The server's peak RSS
//! is reset before each workload (`/proc/PID/clear_refs`) and read after it (`VmHWM`).

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};

const MIB: usize = 1024 * 1024;
const CHUNK: usize = 8 * MIB;

/// A `nubo-master` child process with its own data directory.
pub(crate) struct Server {
    child: Child,
    pub(crate) base: String,
    pub(crate) dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Server {
    /// Starts the master with `env` besides its own settings (e.g. `NUBO_DATABASE_URL`).
    pub(crate) fn start_with(binary: &Path, env: &[(&str, &str)]) -> Server {
        let dir = tempfile::Builder::new().prefix("nubo-bench-").tempdir().expect("temp dir");
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
        let mut command = Command::new(binary);
        command.env_clear();
        // Allocator and runtime settings pass through, for tuning runs
        // (`_RJEM_MALLOC_CONF=dirty_decay_ms:10000`, `TOKIO_WORKER_THREADS=1`, …).
        command.envs(std::env::vars().filter(|(name, _)| name == "_RJEM_MALLOC_CONF" || name.starts_with("TOKIO_")));
        command.envs(env.iter().copied());
        let child = command
            .env("NUBO_SECRET", "b".repeat(48))
            .env("NUBO_LISTEN", format!("127.0.0.1:{port}"))
            .env("NUBO_DATA_DIR", dir.path().join("data"))
            .env("NUBO_ADMIN_EMAIL", "bench@example.com")
            .env("NUBO_ADMIN_PASSWORD", "bench-password")
            // `NUBO_BENCH_LOG` passes a log filter through (e.g. `warn,sqlx::query=debug`).
            .env("NUBO_LOG_LEVEL", std::env::var("NUBO_BENCH_LOG").unwrap_or_else(|_| "warn".to_owned()))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {}: {e} (build it: cargo build --release --workspace --bins)", binary.display())
            });
        Server { child, base: format!("http://127.0.0.1:{port}/api/v1"), dir }
    }

    /// Stops the master; its data folder stays until the server is dropped.
    pub(crate) fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time the server has used so far (user + system), in seconds.
    pub(crate) fn cpu_seconds(&self) -> f64 {
        crate::nodes::cpu_seconds(self.pid())
    }

    /// Resets the peak RSS so the next reading covers only what follows.
    pub(crate) fn reset_peak(&self) {
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5");
    }

    /// Peak resident memory since the last reset, in MiB.
    pub(crate) fn peak_rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(f64::NAN, |kib| kib / 1024.0)
    }

    fn database(&self) -> PathBuf {
        self.dir.path().join("data/nubo.db")
    }
}

/// A chunk's bytes: distinct per index, cheap to make, incompressible enough.
pub(crate) fn fill_chunk(buffer: &mut [u8], index: usize) {
    let mut state = (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for word in buffer.chunks_mut(8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        word.copy_from_slice(&state.to_le_bytes()[..word.len()]);
    }
}

struct Row {
    workload: String,
    figure: String,
    rss_mib: Option<f64>,
    target: String,
}

pub(crate) struct Bench {
    pub(crate) client: reqwest::Client,
    pub(crate) server: Server,
    pub(crate) token: String,
    pub(crate) root: String,
    rows: Vec<Row>,
}

impl Bench {
    pub(crate) async fn json(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.client.request(method, format!("{}{path}", self.server.base)).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status();
        let value: Value = response.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{path}: {status} {value}");
        value
    }

    /// Signs in again: a change to the administrators' group revokes its members' tokens.
    pub(crate) async fn sign_in_again(&mut self) {
        let login =
            json!({"provider": "email_password", "identifier": "bench@example.com", "credential": "bench-password"});
        let session = self.json(reqwest::Method::POST, "/user/session", Some(login)).await;
        self.token = session["access_token"].as_str().expect("signed in").to_owned();
    }

    fn print(&self) {
        println!("\n| workload | figure | server peak RSS | target |");
        println!("|---|---|---:|---|");
        for row in &self.rows {
            let rss = row.rss_mib.map(|r| format!("{r:.1} MiB")).unwrap_or_default();
            println!("| {} | {} | {} | {} |", row.workload, row.figure, rss, row.target);
        }
    }

    fn record(&mut self, workload: &str, figure: String, measured_rss: bool, target: &str) {
        let rss = measured_rss.then(|| self.server.peak_rss_mib());
        println!("{workload}: {figure}{}", rss.map(|r| format!(" (peak RSS {r:.1} MiB)")).unwrap_or_default());
        self.rows.push(Row { workload: workload.to_owned(), figure, rss_mib: rss, target: target.to_owned() });
    }

    /// Uploads `size` bytes as `name` with `streams` parallel chunk senders; answers MiB/s and the
    /// object. Content differs per `name`, so nothing is de-duplicated.
    pub(crate) async fn upload(&self, name: &str, size: usize, streams: usize) -> (f64, Value) {
        let seed = name.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize)) % 1_000_000;
        let session = self
            .json(
                reqwest::Method::POST,
                "/file/upload",
                Some(json!({"file_name": name, "file_size": size, "parent_id": self.root})),
            )
            .await;
        let id = session["id"].as_str().unwrap().to_owned();
        let chunk = session["chunk_size"].as_u64().unwrap() as usize;
        let (base, started) = (self.server.base.clone(), Instant::now());
        let chunk_url = Arc::new(move |index: usize| format!("{base}/file/upload/{id}/{index}"));
        let object =
            send_chunks(&self.client, chunk_url, &self.token, size, chunk, streams, seed * 100_000).await["object"]
                .clone();
        let seconds = started.elapsed().as_secs_f64();
        (size as f64 / MIB as f64 / seconds, object)
    }
}

/// Sends `size` bytes in chunks of `chunk` to `chunk_url(index)` with bearer `token`, `streams`
/// chunks at a time (chunk `i` holds `fill_chunk(i + content_offset)`); answers the answer that
/// carried the created `object`, or the last one.
pub(crate) async fn send_chunks(
    client: &reqwest::Client,
    chunk_url: Arc<dyn Fn(usize) -> String + Send + Sync>,
    token: &str,
    size: usize,
    chunk: usize,
    streams: usize,
    content_offset: usize,
) -> Value {
    let total = size.div_ceil(chunk);
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..streams)
        .map(|_| {
            let (client, chunk_url, token, next) = (client.clone(), chunk_url.clone(), token.to_owned(), next.clone());
            tokio::spawn(async move {
                let mut buffer = vec![0u8; chunk];
                let mut last = Value::Null;
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= total {
                        return last;
                    }
                    let len = chunk.min(size - index * chunk);
                    fill_chunk(&mut buffer[..len], index + content_offset);
                    let response = client
                        .put(chunk_url(index))
                        .bearer_auth(&token)
                        .body(buffer[..len].to_vec())
                        .send()
                        .await
                        .expect("chunk");
                    assert!(response.status().is_success(), "chunk {index}: {}", response.status());
                    last = response.json().await.expect("chunk answer");
                }
            })
        })
        .collect();
    let mut outcome = Value::Null;
    for worker in workers {
        let answer = worker.await.expect("worker");
        if answer["object"].is_object() || outcome.is_null() {
            outcome = answer;
        }
    }
    outcome
}

/// MiB/s of writing 1 GiB to `dir` with dd (flushed to disk).
pub(crate) fn dd_write(dir: &Path) -> f64 {
    let target = dir.join("dd.bin");
    let started = Instant::now();
    let status = Command::new("dd")
        .args(["if=/dev/zero", &format!("of={}", target.display()), "bs=8M", "count=128", "conv=fdatasync"])
        .stderr(Stdio::null())
        .status()
        .expect("dd");
    assert!(status.success());
    let rate = 1024.0 / started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(target);
    rate
}

/// MiB/s of a plain copy of a 1 GiB file within `dir`, and of reading it back.
fn plain_copy(dir: &Path) -> (f64, f64) {
    let source = dir.join("copy-source.bin");
    let mut file = std::fs::File::create(&source).expect("source");
    let mut buffer = vec![0u8; CHUNK];
    for index in 0..128 {
        fill_chunk(&mut buffer, index);
        file.write_all(&buffer).expect("write");
    }
    file.sync_all().expect("sync");
    let copy = dir.join("copy-target.bin");
    let started = Instant::now();
    std::fs::copy(&source, &copy).expect("copy");
    // (the copy stays: the loopback ceiling serves it)
    std::fs::File::open(&copy).and_then(|f| f.sync_all()).expect("sync");
    let copy_rate = 1024.0 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut reader = std::fs::File::open(&copy).expect("open");
    std::io::copy(&mut reader, &mut std::io::sink()).expect("read");
    let read_rate = 1024.0 / started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(source);
    (copy_rate, read_rate)
}

/// MiB/s of downloading `file` over loopback from a minimal streaming HTTP server (axum, 64 KiB
/// reads): the ceiling for Nubo's downloads, which do the same plus authorisation and headers.
async fn loopback_download(client: &reqwest::Client, file: PathBuf) -> f64 {
    let path = Arc::new(file);
    let app = axum::Router::new().route(
        "/file",
        axum::routing::get(move || {
            let path = path.clone();
            async move {
                let file = tokio::fs::File::open(&*path).await.expect("open");
                axum::body::Body::from_stream(tokio_util::io::ReaderStream::with_capacity(file, 64 * 1024))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let started = Instant::now();
    let mut stream = client.get(format!("http://{addr}/file")).send().await.expect("get").bytes_stream();
    let mut received = 0usize;
    while let Some(piece) = stream.next().await {
        received += piece.expect("bytes").len();
    }
    server.abort();
    received as f64 / MIB as f64 / started.elapsed().as_secs_f64()
}

/// Seeds `count` folders under `parent` (and, with `children`, that many subfolders in each)
/// straight into SQLite; answers how many rows were written.
async fn seed_folders(database: &Path, owner: &str, parent: &str, count: usize, children: usize) -> usize {
    let url = format!("sqlite://{}", database.display());
    let pool = sqlx::sqlite::SqlitePoolOptions::new().max_connections(1).connect(&url).await.expect("open database");
    let now = 1_795_000_000_000_i64;
    let mut written = 0;
    let mut tx = pool.begin().await.expect("tx");
    for i in 0..count {
        let id = uuid::Uuid::new_v4().to_string();
        insert_folder(&mut tx, &id, owner, parent, &format!("entry-{i:06}"), now).await;
        written += 1;
        for j in 0..children {
            insert_folder(&mut tx, &uuid::Uuid::new_v4().to_string(), owner, &id, &format!("child-{j:04}"), now).await;
            written += 1;
        }
    }
    tx.commit().await.expect("commit");
    pool.close().await;
    written
}

async fn insert_folder(tx: &mut sqlx::SqliteConnection, id: &str, owner: &str, parent: &str, name: &str, now: i64) {
    sqlx::query(
        "INSERT INTO objects (id, owner_id, parent_id, name, kind, size, created_at, updated_at) VALUES ($1, $2, $3, $4, 'folder', 0, $5, $5)",
    )
    .bind(id)
    .bind(owner)
    .bind(parent)
    .bind(name)
    .bind(now)
    .execute(tx)
    .await
    .expect("insert folder");
}

/// Starts a release `nubo-master` next to this binary and signs in as its administrator;
/// answers the bench handle and the administrator's user id.
pub(crate) async fn start_signed_in() -> (Bench, String) {
    start_signed_in_with(&[]).await
}

/// As [`start_signed_in`], the master started with more environment.
pub(crate) async fn start_signed_in_with(env: &[(&str, &str)]) -> (Bench, String) {
    let binary = std::env::current_exe().expect("own path").with_file_name("nubo-master");
    start_signed_in_at(&binary, env).await
}

/// As [`start_signed_in_with`], the master being the build at `binary`.
pub(crate) async fn start_signed_in_at(binary: &Path, env: &[(&str, &str)]) -> (Bench, String) {
    let server = Server::start_with(binary, env);
    let client = reqwest::Client::builder().pool_max_idle_per_host(16).build().expect("client");
    let login =
        json!({"provider": "email_password", "identifier": "bench@example.com", "credential": "bench-password"});
    let mut session = Value::Null;
    for _ in 0..100 {
        if let Ok(response) = client.post(format!("{}/user/session", server.base)).json(&login).send().await
            && response.status().is_success()
        {
            session = response.json().await.expect("login");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let token = session["access_token"].as_str().expect("signed in").to_owned();
    let owner = session["user"]["id"].as_str().unwrap().to_owned();
    let mut bench = Bench { client, server, token, root: String::new(), rows: Vec::new() };
    let listing = bench.json(reqwest::Method::GET, "/directory", None).await;
    bench.root = listing["folder"]["id"].as_str().unwrap().to_owned();
    (bench, owner)
}

/// The three ways to create a small file, side by side on one master: an upload session (two
/// requests, two commits), one request (`POST /file/content`), and WebDAV `PUT`. `rounds` rounds
/// in rotating order, contents new each time; the median of each.
async fn small_files_side_by_side(bench: &mut Bench, rounds: usize) {
    let created = bench
        .json(reqwest::Method::POST, "/webdav/accounts", Some(json!({"name": "small", "password": SMALL_DAV_PASSWORD})))
        .await;
    assert_eq!(created["name"], "small");
    let mut rates: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let ways = [SmallWay::Session, SmallWay::OneRequest, SmallWay::Dav];
    for round in 0..rounds {
        for k in 0..ways.len() {
            let index = (k + round) % ways.len();
            let way = ways[index];
            bench.server.reset_peak();
            // Contents new to the server in every round and every way (WebDAV would otherwise
            // refer to the blobs an earlier way stored, and store nothing).
            let seed = (round * ways.len() + index) * 10_000;
            let rate = upload_small_files(bench, way, &format!("small-{}-{round}", way.name()), seed).await;
            rates.entry(way.name()).or_default().push(rate);
        }
    }
    for way in ways {
        let mut measured = rates.remove(way.name()).unwrap_or_default();
        measured.sort_by(f64::total_cmp);
        let median = measured.get(measured.len() / 2).copied().unwrap_or_default();
        bench.record(
            &format!("1000 new files of 4 KiB, {} (8 clients)", way.label()),
            format!("{median:.0} files/s"),
            true,
            "",
        );
    }
}

/// `nubo-bench files [--small ROUNDS]`: every workload, or with `--small` only the small files'
/// side by side, that many rounds.
pub async fn run(args: &[String]) {
    if let [flag, rounds] = args
        && flag == "--small"
    {
        let rounds = rounds.parse().expect("--small takes a number of rounds");
        let (mut bench, _) = start_signed_in().await;
        small_files_side_by_side(&mut bench, rounds).await;
        bench.print();
        return;
    }
    let (mut bench, owner) = start_signed_in().await;
    let data_dir = bench.server.dir.path().join("data");

    let dd = dd_write(&data_dir);
    bench.record("ceiling: dd write 1 GiB (fdatasync)", format!("{dd:.0} MiB/s"), false, "");
    let (copy, read) = plain_copy(&data_dir);
    bench.record("ceiling: plain file copy 1 GiB (+fsync)", format!("{copy:.0} MiB/s"), false, "");
    bench.record("ceiling: sequential read 1 GiB (page cache)", format!("{read:.0} MiB/s"), false, "");
    let loopback = loopback_download(&bench.client, data_dir.join("copy-target.bin")).await;
    let _ = std::fs::remove_file(data_dir.join("copy-target.bin"));
    bench.record("ceiling: plain HTTP download 1 GiB over loopback", format!("{loopback:.0} MiB/s"), false, "");
    let upload_ceiling = dd.min(copy);

    bench.server.reset_peak();
    let (rate, object) = bench.upload("one-stream.bin", 1024 * MIB, 1).await;
    bench.record(
        "upload 1 GiB, 8 MiB chunks, 1 stream",
        format!("{rate:.0} MiB/s ({:.0}% of ceiling)", rate / upload_ceiling * 100.0),
        true,
        ">= 80% of ceiling, RSS < 100 MiB",
    );
    let big = object["id"].as_str().unwrap().to_owned();

    bench.server.reset_peak();
    let (rate, _) = bench.upload("four-streams.bin", 1024 * MIB, 4).await;
    bench.record(
        "upload 1 GiB, 8 MiB chunks, 4 streams",
        format!("{rate:.0} MiB/s ({:.0}% of ceiling)", rate / upload_ceiling * 100.0),
        true,
        ">= 80% of ceiling, RSS < 100 MiB",
    );

    bench.server.reset_peak();
    let token = bench.json(reqwest::Method::POST, &format!("/file/download/{big}"), None).await;
    let url = format!("{}{}", bench.server.base.trim_end_matches("/api/v1"), token["url"].as_str().unwrap());
    let started = Instant::now();
    let mut stream = bench.client.get(url).send().await.expect("download").bytes_stream();
    let mut received = 0usize;
    while let Some(piece) = stream.next().await {
        received += piece.expect("bytes").len();
    }
    let rate = received as f64 / MIB as f64 / started.elapsed().as_secs_f64();
    assert_eq!(received, 1024 * MIB);
    bench.record(
        "download 1 GiB through a token",
        format!("{rate:.0} MiB/s ({:.0}% of loopback ceiling)", rate / loopback * 100.0),
        true,
        ">= 80% of ceiling, RSS < 100 MiB",
    );

    bench.server.reset_peak();
    let link = bench.json(reqwest::Method::POST, &format!("/file/source/{big}"), None).await;
    let source = format!("{}{}", bench.server.base.trim_end_matches("/api/v1"), link["url"].as_str().unwrap());
    let mut latencies = Vec::new();
    for i in 0..200u64 {
        let start = (i * 7_919 * MIB as u64) % (1023 * MIB as u64);
        let began = Instant::now();
        let bytes = bench
            .client
            .get(&source)
            .header("range", format!("bytes={start}-{}", start + MIB as u64 - 1))
            .send()
            .await
            .expect("range")
            .bytes()
            .await
            .expect("bytes");
        assert_eq!(bytes.len(), MIB);
        latencies.push(began.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    bench.record(
        "1 MiB range reads (200, source link)",
        format!("p50 {:.2} ms, p99 {:.2} ms", latencies[100], latencies[197]),
        true,
        "",
    );

    small_files_side_by_side(&mut bench, 3).await;

    let big_folder = bench
        .json(reqwest::Method::POST, "/directory", Some(json!({"parent_id": bench.root, "name": "ten-thousand"})))
        .await;
    let big_folder = big_folder["id"].as_str().unwrap().to_owned();
    seed_folders(&bench.server.database(), &owner, &big_folder, 10_000, 0).await;
    bench.server.reset_peak();
    let started = Instant::now();
    let mut listed = 0;
    for page in 0..10 {
        let listing = bench
            .json(reqwest::Method::GET, &format!("/directory/ten-thousand?limit=1000&offset={}", page * 1000), None)
            .await;
        listed += listing["items"].as_array().unwrap().len();
    }
    assert_eq!(listed, 10_000);
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    bench.record("list a folder of 10,000 entries (10 pages of 1000)", format!("{ms:.1} ms"), true, "< 100 ms");

    let tree =
        bench.json(reqwest::Method::POST, "/directory", Some(json!({"parent_id": bench.root, "name": "tree"}))).await;
    let tree = tree["id"].as_str().unwrap().to_owned();
    let seeded = seed_folders(&bench.server.database(), &owner, &tree, 100, 999).await;
    let target =
        bench.json(reqwest::Method::POST, "/directory", Some(json!({"parent_id": bench.root, "name": "target"}))).await;
    let target = target["id"].as_str().unwrap().to_owned();
    bench.server.reset_peak();
    let started = Instant::now();
    bench
        .client
        .patch(format!("{}/object", bench.server.base))
        .bearer_auth(&bench.token)
        .json(&json!({"src_ids": [tree], "dst_id": target}))
        .send()
        .await
        .expect("move")
        .error_for_status()
        .expect("moved");
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    bench.record(&format!("move a folder with {seeded} descendants"), format!("{ms:.1} ms"), true, "< 50 ms");

    bench.print();
}

/// The WebDAV password of the account the small-file comparison creates.
const SMALL_DAV_PASSWORD: &str = "bench-small-dav-password";

/// A way to create a small file.
#[derive(Clone, Copy)]
pub(crate) enum SmallWay {
    /// `POST /file/upload`, then its only chunk.
    Session,
    /// `POST /file/content` with the body.
    OneRequest,
    /// WebDAV `PUT`.
    Dav,
}

impl SmallWay {
    pub(crate) fn name(self) -> &'static str {
        match self {
            SmallWay::Session => "session",
            SmallWay::OneRequest => "one-request",
            SmallWay::Dav => "dav",
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            SmallWay::Session => "upload session (2 requests)",
            SmallWay::OneRequest => "POST /file/content (1 request)",
            SmallWay::Dav => "WebDAV PUT",
        }
    }
}

/// Creates 1000 new 4 KiB files in a new folder `folder` the way `way` does, from 8 clients;
/// answers files per second. `seed` keeps contents new to the server.
pub(crate) async fn upload_small_files(bench: &Bench, way: SmallWay, folder: &str, seed: usize) -> f64 {
    let created =
        bench.json(reqwest::Method::POST, "/directory", Some(json!({"parent_id": bench.root, "name": folder}))).await;
    let parent = created["id"].as_str().unwrap().to_owned();
    let dav = format!("{}/dav/{folder}", bench.server.base.trim_end_matches("/api/v1"));
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (client, base, token, parent, dav, next) = (
                bench.client.clone(),
                bench.server.base.clone(),
                bench.token.clone(),
                parent.clone(),
                dav.clone(),
                next.clone(),
            );
            tokio::spawn(async move {
                let mut body = vec![0u8; 4096];
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= 1000 {
                        return;
                    }
                    fill_chunk(&mut body, i + 1_000_000 + seed);
                    let name = format!("f{i:04}.bin");
                    let done = match way {
                        SmallWay::Session => {
                            let session: Value = client
                                .post(format!("{base}/file/upload"))
                                .bearer_auth(&token)
                                .json(&json!({"file_name": name, "file_size": 4096, "parent_id": parent}))
                                .send()
                                .await
                                .expect("session")
                                .json()
                                .await
                                .expect("session json");
                            let id = session["id"].as_str().expect("session id");
                            client
                                .put(format!("{base}/file/upload/{id}/0"))
                                .bearer_auth(&token)
                                .body(body.clone())
                                .send()
                                .await
                        }
                        SmallWay::OneRequest => {
                            client
                                .post(format!("{base}/file/content"))
                                .query(&[("parent_id", parent.as_str()), ("name", name.as_str())])
                                .bearer_auth(&token)
                                .body(body.clone())
                                .send()
                                .await
                        }
                        SmallWay::Dav => {
                            client
                                .put(format!("{dav}/{name}"))
                                .basic_auth("bench@example.com/small", Some(SMALL_DAV_PASSWORD))
                                .body(body.clone())
                                .send()
                                .await
                        }
                    };
                    let done = done.expect("upload");
                    assert!(done.status().is_success(), "{}: {}", way.name(), done.status());
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("worker");
    }
    1000.0 / started.elapsed().as_secs_f64()
}

/// A PostgreSQL database made for one benchmark run on the server at `NUBO_BENCH_POSTGRES_URL`
/// (default the local one), dropped by [`ScratchPostgres::drop_database`].
pub struct ScratchPostgres {
    admin: sqlx::AnyPool,
    name: String,
    pub url: String,
}

impl ScratchPostgres {
    /// Creates `nubo_bench_{purpose}_{pid}`; `Err` names the server when none answers.
    pub async fn create(purpose: &str) -> Result<Self, String> {
        let admin_url = std::env::var("NUBO_BENCH_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
        let Ok(admin) = sqlx::any::AnyPoolOptions::new().max_connections(1).connect(&admin_url).await else {
            return Err(admin_url);
        };
        let name = format!("nubo_bench_{purpose}_{}", std::process::id());
        sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await.expect("create database");
        let url = match admin_url.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{name}"),
            None => panic!("a database URL ends in a database name"),
        };
        Ok(Self { admin, name, url })
    }

    pub async fn drop_database(self) {
        let sql = format!("DROP DATABASE {} WITH (FORCE)", self.name);
        sqlx::query(&sql).execute(&self.admin).await.expect("drop database");
    }
}
