//! `nubo-bench sync`: `nubo sync` against `rclone bisync` over WebDAV on the same trees, one
//! `nubo-master` process on SQLite: the first sync of many small files and of one large file,
//! then one change picked up end to end on the synced small tree, each way. `nubo sync --watch`
//! sees a local write through its file-system watcher and a server write through the change
//! events; the time is from the write until the other side has it (the `upload` event of
//! `--json`, which is printed once the server answered; the local file under its name). rclone
//! has no watcher: its figure is one `rclone bisync` run started right after the write. The
//! binaries `nubo` and `nubo-master` are taken from next to this one: build them in the same
//! profile first. The client and rclone's set-up are `nubo-bench cli`'s.

use std::io::BufRead;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cli::{Client, rclone};
use crate::files::{Bench, fill_chunk, start_signed_in};

const MIB: usize = 1024 * 1024;
pub(crate) const DAV_PASSWORD: &str = "sync-bench-dav-password";

struct Options {
    small_files: usize,
    small_kib: usize,
    big_mib: usize,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options { small_files: 10_000, small_kib: 4, big_mib: 1024 };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut value =
            || iter.next().ok_or_else(|| format!("{arg} needs a value"))?.parse::<usize>().map_err(|e| e.to_string());
        match arg.as_str() {
            "--small-files" => options.small_files = value()?,
            "--small-kib" => options.small_kib = value()?.max(1),
            "--big-mib" => options.big_mib = value()?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

/// `count` files of `size` bytes in folders of 500, content made distinct by `seed`.
pub(crate) fn write_small(dir: &Path, count: usize, size: usize, seed: usize) {
    let mut buffer = vec![0u8; size];
    for index in 0..count {
        let folder = dir.join(format!("folder-{:03}", index / 500));
        std::fs::create_dir_all(&folder).expect("small files folder");
        fill_chunk(&mut buffer, seed * 10_000_000 + index);
        std::fs::write(folder.join(format!("small-{index:05}.bin")), &buffer).expect("small file");
    }
}

fn write_big(dir: &Path, size: usize, seed: usize) {
    use std::io::Write;
    std::fs::create_dir_all(dir).expect("big folder");
    let mut file = std::io::BufWriter::new(std::fs::File::create(dir.join("big.bin")).expect("big file"));
    let mut chunk = vec![0u8; 8 * MIB];
    for index in 0..size.div_ceil(chunk.len()) {
        fill_chunk(&mut chunk, seed * 1_000_000 + index);
        let len = chunk.len().min(size - index * chunk.len());
        file.write_all(&chunk[..len]).expect("write big file");
    }
    file.flush().expect("flush big file");
}

/// One `nubo sync` run; its time.
fn nubo_sync(client: &Client, local: &Path, remote: &str) -> f64 {
    let started = Instant::now();
    let output = client
        .command()
        .args(["--json", "sync", "-P", "4"])
        .arg(local)
        .arg(remote)
        .stdin(Stdio::null())
        .output()
        .expect("nubo sync");
    let seconds = started.elapsed().as_secs_f64();
    assert!(output.status.success(), "nubo sync failed: {}", String::from_utf8_lossy(&output.stdout));
    seconds
}

/// `rclone bisync` against the WebDAV account `sync`.
pub(crate) struct Bisync {
    dav_url: String,
    /// Obscured once: rclone names bisync's listings after the remote's settings, so every run
    /// must present the same ones.
    password: String,
    config: tempfile::NamedTempFile,
    workdir: tempfile::TempDir,
}

impl Bisync {
    /// For the master at `server` (its address without `/api/v1`).
    pub(crate) fn new(server: &str) -> Bisync {
        let obscured = std::process::Command::new("rclone").args(["obscure", DAV_PASSWORD]).output().expect("rclone");
        Bisync {
            dav_url: format!("{server}/dav/"),
            password: String::from_utf8_lossy(&obscured.stdout).trim().to_owned(),
            config: tempfile::NamedTempFile::new().expect("empty rclone config"),
            workdir: tempfile::tempdir().expect("bisync workdir"),
        }
    }

    /// `rclone ARGS -q` against the account, not started.
    pub(crate) fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = rclone(&self.dav_url, ("sync", DAV_PASSWORD), self.config.path());
        // bisync needs modification times: the ownCloud dialect reads them from PROPFIND
        // and sets them with `X-OC-Mtime`.
        command.env("RCLONE_CONFIG_NUBO_VENDOR", "owncloud").env("RCLONE_CONFIG_NUBO_PASS", &self.password);
        command.args(args).arg("-q");
        command
    }

    pub(crate) fn run(&self, args: &[&str]) -> f64 {
        let started = Instant::now();
        let status = self.command(args).status().expect("rclone");
        let seconds = started.elapsed().as_secs_f64();
        assert!(status.success(), "rclone {args:?} failed");
        seconds
    }

    /// `rclone bisync local nubo:remote` (`--resync` the first time), not started.
    pub(crate) fn bisync_command(&self, local: &Path, remote: &str, first: bool) -> std::process::Command {
        let workdir = self.workdir.path().to_str().unwrap().to_owned();
        let mut args = vec!["bisync", local.to_str().unwrap(), remote, "--workdir", &workdir, "--transfers", "4"];
        if first {
            args.push("--resync");
        }
        self.command(&args)
    }

    /// `rclone bisync local nubo:remote` (`--resync` the first time); its time.
    fn bisync(&self, local: &Path, remote: &str, first: bool) -> f64 {
        let started = Instant::now();
        let status = self.bisync_command(local, remote, first).status().expect("rclone");
        let seconds = started.elapsed().as_secs_f64();
        assert!(status.success(), "rclone bisync {} {remote} failed", local.display());
        seconds
    }
}

/// Waits until `check` holds (polled every 5 ms, up to five minutes); the seconds it took.
fn until(started: Instant, what: &str, check: impl Fn() -> bool) -> f64 {
    while !check() {
        assert!(started.elapsed() < Duration::from_secs(300), "never happened: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
    started.elapsed().as_secs_f64()
}

/// A master with the bench user signed in, the `nubo` client signed in to it, and rclone set up
/// against its WebDAV account `sync`.
pub(crate) async fn start_both() -> (Bench, Client, Bisync) {
    let (bench, _owner) = start_signed_in().await;
    let created = bench
        .json(reqwest::Method::POST, "/webdav/accounts", Some(json!({"name": "sync", "password": DAV_PASSWORD})))
        .await;
    assert_eq!(created["name"], "sync");
    let server = bench.server.base.trim_end_matches("/api/v1").to_owned();
    let client = Client::new();
    client.login(&server);
    let rclone = Bisync::new(&server);
    (bench, client, rclone)
}

pub async fn run(args: &[String]) {
    let options = match parse(args) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("{error}\nusage: nubo-bench sync [--small-files N] [--small-kib K] [--big-mib N]");
            std::process::exit(2);
        }
    };
    let (bench, client, rclone) = start_both().await;
    let work = tempfile::Builder::new().prefix("nubo-bench-sync-").tempdir().expect("work dir");
    let (count, size) = (options.small_files, options.small_kib * 1024);
    let small = format!("{count} files of {} KiB", options.small_kib);
    let big = format!("one {} MiB file", options.big_mib);
    let mut rows: Vec<(String, f64, f64)> = Vec::new();

    // First syncs: each client its own tree of new content into an empty remote folder.
    let (nubo_small, rclone_small) = (work.path().join("nubo-small"), work.path().join("rclone-small"));
    write_small(&nubo_small, count, size, 1);
    write_small(&rclone_small, count, size, 2);
    let nubo = nubo_sync(&client, &nubo_small, "/nubo-small");
    println!("first sync, {small}: nubo {nubo:.2} s");
    rclone.run(&["mkdir", "nubo:rclone-small"]);
    let other = rclone.bisync(&rclone_small, "nubo:rclone-small", true);
    println!("first sync, {small}: rclone bisync {other:.2} s");
    rows.push((format!("first sync, {small}"), nubo, other));

    if options.big_mib > 0 {
        let (nubo_big, rclone_big) = (work.path().join("nubo-big"), work.path().join("rclone-big"));
        write_big(&nubo_big, options.big_mib * MIB, 3);
        write_big(&rclone_big, options.big_mib * MIB, 4);
        let nubo = nubo_sync(&client, &nubo_big, "/nubo-big");
        println!("first sync, {big}: nubo {nubo:.2} s");
        rclone.run(&["mkdir", "nubo:rclone-big"]);
        let other = rclone.bisync(&rclone_big, "nubo:rclone-big", true);
        println!("first sync, {big}: rclone bisync {other:.2} s");
        rows.push((format!("first sync, {big}"), nubo, other));
    }

    // Steady state on the synced small tree: `nubo sync --watch`, and one bisync run.
    let mut watching = client
        .command()
        .args(["--json", "sync", "--watch"])
        .arg(&nubo_small)
        .arg("/nubo-small")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("nubo sync --watch");
    let (lines_tx, lines) = mpsc::channel::<Value>();
    let stdout = watching.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(value) = serde_json::from_str(&line) {
                let _ = lines_tx.send(value);
            }
        }
    });
    let wait_for = |what: &str, check: &dyn Fn(&Value) -> bool| loop {
        let line = lines.recv_timeout(Duration::from_secs(300)).unwrap_or_else(|_| panic!("never seen: {what}"));
        if check(&line) {
            break;
        }
    };
    wait_for("the first watched run", &|line| line["event"] == "summary");
    let started = Instant::now();
    std::fs::write(nubo_small.join("folder-000/written-here.txt"), b"a local change").expect("local change");
    wait_for("the upload", &|line| line["event"] == "upload" && line["path"] == "folder-000/written-here.txt");
    let nubo_up = started.elapsed().as_secs_f64();
    println!("steady state, a local write reaches the server: nubo --watch {nubo_up:.3} s");
    // Let the runs its own change started settle before the server-side write.
    std::thread::sleep(Duration::from_secs(2));
    let folder = bench.json(reqwest::Method::GET, "/directory/nubo-small/folder-000?limit=1", None).await;
    let folder_id = folder["folder"]["id"].as_str().expect("synced folder").to_owned();
    let upload = |parent: String, name: &'static str| {
        let (client, base, token) = (bench.client.clone(), bench.server.base.clone(), bench.token.clone());
        async move {
            let url = format!("{base}/file/content?parent_id={parent}&name={name}");
            let response =
                client.post(url).bearer_auth(token).body(b"a remote change".to_vec()).send().await.expect("upload");
            assert!(response.status().is_success(), "remote write");
        }
    };
    upload(folder_id, "written-there.txt").await;
    let started = Instant::now();
    let target = nubo_small.join("folder-000/written-there.txt");
    let nubo_down = until(started, "the remote change here", || target.exists());
    println!("steady state, a server write reaches here: nubo --watch {nubo_down:.3} s");
    let _ = watching.kill();
    let _ = watching.wait();

    std::fs::write(rclone_small.join("folder-000/written-here.txt"), b"a local change").expect("local change");
    let rclone_up = rclone.bisync(&rclone_small, "nubo:rclone-small", false);
    println!("steady state, a local write reaches the server: rclone bisync {rclone_up:.3} s");
    let folder = bench.json(reqwest::Method::GET, "/directory/rclone-small/folder-000?limit=1", None).await;
    upload(folder["folder"]["id"].as_str().expect("rclone folder").to_owned(), "written-there.txt").await;
    let rclone_down = rclone.bisync(&rclone_small, "nubo:rclone-small", false);
    assert!(rclone_small.join("folder-000/written-there.txt").exists(), "bisync brought the remote change");
    println!("steady state, a server write reaches here: rclone bisync {rclone_down:.3} s");
    rows.push((format!("a local write reaches the server ({small} synced)"), nubo_up, rclone_up));
    rows.push((format!("a server write reaches here ({small} synced)"), nubo_down, rclone_down));

    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    println!(
        "\nnubo sync -P 4 (steady state: --watch) against rclone bisync --transfers 4 over WebDAV, one master on SQLite ({profile} build)"
    );
    println!("\n| workload | nubo sync s | rclone bisync s | rclone / nubo |");
    println!("|---|---:|---:|---:|");
    for (workload, nubo, other) in rows {
        println!("| {workload} | {nubo:.3} | {other:.3} | {:.1} |", other / nubo);
    }
}
