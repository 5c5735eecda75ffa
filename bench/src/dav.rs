//! `nubo-bench dav [--runs N] [--workloads abcdef] [--peers nginx,apache,...] [--davbench PATH] [--peers-sh PATH] [--serve SECONDS [--durable false]] [--side-by-side ROUNDS]`:
//! the shared WebDAV yardstick (`davbench`) against a real `nubo-master` process (release
//! build, SQLite, local policy) and against the reference servers `peers.sh` starts, one after
//! the other in the same run, with one table of medians at the end.
//!
//! davbench prints one JSON line per workload; this collects the figure each workload is
//! judged by (throughput, files/s, seconds, latency, requests/s) and every server's peak RSS.
//!
//! `--side-by-side ROUNDS` compares the 1000 small PUTs alone, under equal conditions: Nubo
//! (`durable: false`, as the peers do not sync) and every peer up at once, each round's
//! contents new to every server, no server deleting anything, the order rotating each round.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::files::start_signed_in;

const DEFAULT_PEERS: &str = "nginx,apache,rclone,dufs,wsgidav";
const FIRST_PEER_PORT: u16 = 18_080;
/// The WebDAV login of the account named `bench` that this command creates for the bench user
/// (`email/account`), and its password.
const DAV_LOGIN: (&str, &str) = ("bench@example.com/bench", "bench-dav-password");

/// davbench's flag that leaves a run's files in place. The table's runs all pass it, and the
/// servers' data folders go only once the table is printed: on this machine's ext4 (no
/// journal) a file created within minutes of many deletions costs up to 30 times more
/// (`recently_deleted` skips every inode freed in the last 60 s, or 360 s while its inode table
/// block is unwritten; measured 12 µs against 117-374 µs per create, see docs/src/benchmarks.md's
/// machine caveats). Deleting as it went, each server ran after the one before it had
/// deleted ~13,000 files, and davbench's own runs after its previous run's deletions, while
/// Nubo ran first, and its `DELETE` only moves files to the trash.
const KEEP: &str = "--keep";

/// davbench's seed for Nubo's second pass (`durable: false`); the first pass and the peers use
/// davbench's default, 1.
const UNSYNCED_SEED: u32 = 2;

/// The figure each workload is compared by (a median of the runs), with its unit.
const FIGURES: [(&str, &str, &str); 6] = [
    ("a_put_big", "mib_per_s", "MiB/s"),
    ("b_get_big", "mib_per_s", "MiB/s"),
    ("c_put_small", "files_per_s", "files/s"),
    ("d_propfind", "median_s", "s"),
    ("e_range", "median_ms", "ms"),
    ("f_hot_get", "median_rps", "req/s"),
];

#[derive(Clone)]
struct Options {
    runs: u32,
    workloads: String,
    peers: Vec<String>,
    davbench: PathBuf,
    peers_sh: PathBuf,
    /// Only start Nubo, print its URL, credentials and PID, and keep it up this long (for
    /// profiling with perf or a client of one's own).
    serve_for: Option<u64>,
    /// With `--serve`: whether the served policy syncs each blob (`--durable false` serves the
    /// like-for-like setting of the second row).
    durable: bool,
    /// Only the small PUTs, this many rounds against every server up at once
    /// ([`side_by_side`]).
    side_by_side: Option<u32>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let shared = std::env::var_os("NUBO_SHARED_BENCH").map_or_else(|| PathBuf::from("../shared/bench"), PathBuf::from);
    let mut options = Options {
        runs: 3,
        workloads: "abcdef".to_owned(),
        peers: DEFAULT_PEERS.split(',').map(str::to_owned).collect(),
        davbench: shared.join("davbench"),
        peers_sh: shared.join("peers.sh"),
        serve_for: None,
        durable: true,
        side_by_side: None,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--runs" => options.runs = value.parse().map_err(|_| "--runs takes a number".to_owned())?,
            "--workloads" => options.workloads = value.clone(),
            "--peers" => options.peers = value.split(',').filter(|p| !p.is_empty()).map(str::to_owned).collect(),
            "--davbench" => options.davbench = PathBuf::from(value),
            "--peers-sh" => options.peers_sh = PathBuf::from(value),
            "--serve" => options.serve_for = Some(value.parse().map_err(|_| "--serve takes seconds".to_owned())?),
            "--durable" => options.durable = value.parse().map_err(|_| "--durable takes true or false".to_owned())?,
            "--side-by-side" => {
                options.side_by_side =
                    Some(value.parse().map_err(|_| "--side-by-side takes a number of rounds".to_owned())?);
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(options)
}

/// Runs davbench against `url` (with `extra` arguments) and answers its JSON lines by workload
/// name.
fn davbench(
    options: &Options,
    label: &str,
    url: &str,
    auth: Option<(&str, &str)>,
    pid: u32,
    extra: &[String],
) -> BTreeMap<String, Value> {
    let mut command = Command::new("python3");
    command.arg(&options.davbench).arg(url).args(["--label", label, "--runs", &options.runs.to_string()]);
    command.args(["--workloads", &options.workloads]);
    command.args(["--pid", &pid.to_string()]);
    command.args(extra);
    if let Some((user, password)) = auth {
        command.args(["-u", user, "-p", password]);
    }
    eprintln!("== davbench {label} ({url})");
    let output = command.stderr(Stdio::inherit()).output().expect("python3 runs davbench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}");
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| Some((line.get("workload")?.as_str()?.to_owned(), line)))
        .collect()
}

fn figure(results: &BTreeMap<String, Value>, workload: &str, key: &str) -> Option<f64> {
    let line = results.get(workload)?;
    if line.get("ok").and_then(Value::as_bool) == Some(false) {
        return None;
    }
    line.get(key).and_then(Value::as_f64)
}

/// Files per second of the first of the small-PUT runs: the only one whose contents are new to
/// the server, as every run of one davbench pass PUTs the same files again (into a folder of
/// its own). Nubo stores content it already holds only once, so its later runs, and the median,
/// measure that instead.
fn first_small_run(results: &BTreeMap<String, Value>) -> Option<f64> {
    let files = figure(results, "c_put_small", "files")?;
    let seconds = results.get("c_put_small")?.get("samples_s")?.get(0)?.as_f64()?;
    (seconds > 0.0).then(|| files / seconds)
}

/// The largest peak RSS any workload reported, in MiB.
fn peak_rss(results: &BTreeMap<String, Value>) -> Option<f64> {
    results
        .values()
        .filter_map(|line| {
            let server = line.get("server")?;
            let kib = server.get("vmhwm_max_kib").or_else(|| server.get("rss_peak_sampled_kib"))?.as_f64()?;
            Some(kib / 1024.0)
        })
        .reduce(f64::max)
}

pub async fn run(args: &[String]) {
    let options = match parse(args) {
        Ok(options) => options,
        Err(error) => {
            eprintln!(
                "{error}\nusage: nubo-bench dav [--runs N] [--workloads abcdef] [--peers a,b] [--davbench PATH] [--peers-sh PATH] [--serve SECONDS [--durable false]] [--side-by-side ROUNDS]"
            );
            std::process::exit(2);
        }
    };
    let (mut bench, _) = start_signed_in().await;
    let created = bench
        .json(reqwest::Method::POST, "/webdav/accounts", Some(json!({"name": "bench", "password": DAV_LOGIN.1})))
        .await;
    assert_eq!(created["name"], "bench");
    let dav_url = bench.server.base.replace("/api/v1", "/dav/");
    if let Some(seconds) = options.serve_for {
        if !options.durable {
            stop_syncing(&bench).await;
        }
        println!("{dav_url} {} {} pid {}", DAV_LOGIN.0, DAV_LOGIN.1, bench.server.pid());
        // Interrupted or terminated, return all the same: dropping the server stops the master
        // (killed on a signal, this process would leave it running).
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("a SIGTERM handler");
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_secs(seconds)) => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        return;
    }
    if let Some(rounds) = options.side_by_side {
        stop_syncing(&bench).await;
        let nubo = Server { name: "nubo".to_owned(), url: dav_url, pid: bench.server.pid(), auth: true };
        side_by_side(&options, nubo, rounds);
        return;
    }
    // No server deletes anything until the table is printed (see [`KEEP`]).
    let keep = [KEEP.to_owned()];
    let mut table: Vec<Row> = Vec::new();
    let nubo = davbench(&options, "nubo", &dav_url, Some(DAV_LOGIN), bench.server.pid(), &keep);
    table.push(Row { server: "nubo".to_owned(), workloads: options.workloads.clone(), results: nubo });

    // The peers acknowledge writes from the page cache; Nubo syncs each blob unless its policy
    // says `durable: false`. The writes again, that way, for a like-for-like row, with contents
    // of their own: davbench's default seed would repeat the first pass's files, which Nubo
    // already holds and does not store again.
    let writes: String = options.workloads.chars().filter(|w| matches!(w, 'a' | 'c')).collect();
    if !writes.is_empty() {
        stop_syncing(&bench).await;
        let unsynced = Options { workloads: writes, ..options.clone() };
        let label = "nubo, durable: false";
        let new_contents = [KEEP.to_owned(), "--seed".to_owned(), UNSYNCED_SEED.to_string()];
        let results = davbench(&unsynced, label, &dav_url, Some(DAV_LOGIN), bench.server.pid(), &new_contents);
        table.push(Row { server: label.to_owned(), workloads: unsynced.workloads, results });
    }
    // The master stops; its files stay until the end, as every peer's do.
    bench.server.stop();

    let mut kept_data = Vec::new();
    for (index, peer) in options.peers.iter().enumerate() {
        let Some((server, data)) = start_peer(&options, index, peer) else { continue };
        let results = davbench(&options, peer, &server.url, None, server.pid, &keep);
        stop_peer(&options, &server);
        kept_data.push(data);
        table.push(Row { server: peer.clone(), workloads: options.workloads.clone(), results });
    }
    print_table(&table);
    drop(kept_data);
    drop(bench);
}

/// A WebDAV server under test.
struct Server {
    name: String,
    url: String,
    pid: u32,
    /// Whether it takes the bench user's WebDAV account (Nubo) or no authentication (a peer).
    auth: bool,
}

/// Starts the `index`-th peer with `peers.sh` on a port of its own and a new data folder (kept
/// as long as the answer is); `None`, said on stderr, when it did not start.
fn start_peer(options: &Options, index: usize, peer: &str) -> Option<(Server, tempfile::TempDir)> {
    let port = FIRST_PEER_PORT + index as u16;
    let data = tempfile::Builder::new().prefix("nubo-bench-peer-").tempdir().expect("temp dir");
    let started = Command::new("bash")
        .arg(&options.peers_sh)
        .args(["start", peer, &port.to_string()])
        .arg(data.path())
        .stderr(Stdio::inherit())
        .output()
        .expect("peers.sh runs");
    let Some(pid) = String::from_utf8_lossy(&started.stdout).trim().lines().last().and_then(|l| l.parse().ok()) else {
        eprintln!("{peer} did not start; skipped");
        return None;
    };
    let server = Server { name: peer.to_owned(), url: format!("http://127.0.0.1:{port}/"), pid, auth: false };
    Some((server, data))
}

fn stop_peer(options: &Options, server: &Server) {
    let _ = Command::new("bash").arg(&options.peers_sh).args(["stop", &server.pid.to_string()]).status();
}

/// The small PUTs (davbench workload `c`, one run of 1000 files of 4 KiB each) against Nubo and
/// every peer, all up at once, `rounds` times; prints each round and a table of medians.
///
/// Why beside the yardstick's table: there each server runs after the one before it deleted
/// its files, and on an ext4 file system without a journal a file created soon after many
/// deletions costs more (`recently_deleted`), while Nubo's `DELETE` keeps the bytes in the
/// trash; and davbench uploads the same contents in every run, which Nubo stores once. Here
/// nothing is deleted (`--keep`), each round's contents (its own `--seed`) are new to every
/// server, and the order rotates so that no server always runs first or last.
fn side_by_side(options: &Options, nubo: Server, rounds: u32) {
    let started: Vec<(Server, tempfile::TempDir)> =
        options.peers.iter().enumerate().filter_map(|(index, peer)| start_peer(options, index, peer)).collect();
    let mut servers = vec![&nubo];
    servers.extend(started.iter().map(|(server, _)| server));
    let small = Options { runs: 1, workloads: "c".to_owned(), ..options.clone() };
    let mut figures: Vec<Vec<Round>> = vec![Vec::new(); servers.len()];
    // One seed per round, the same for every server: contents new to each, and equal for all.
    let first_seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    for round in 0..rounds {
        let seed = first_seed + u64::from(round);
        let extra = ["--keep".to_owned(), "--seed".to_owned(), seed.to_string()];
        for offset in 0..servers.len() {
            let at = (offset + round as usize) % servers.len();
            let server = servers[at];
            let auth = server.auth.then_some(DAV_LOGIN);
            let results = davbench(&small, &server.name, &server.url, auth, server.pid, &extra);
            figures[at].push(Round::of(&results));
        }
    }
    for (server, _) in &started {
        stop_peer(options, server);
    }
    print_side_by_side(&servers, &figures);
}

/// One server's small PUTs in one round: files/s, and the server's CPU time per file.
#[derive(Clone, Copy)]
struct Round {
    files_per_s: Option<f64>,
    cpu_us_per_file: Option<f64>,
}

impl Round {
    fn of(results: &BTreeMap<String, Value>) -> Self {
        let files_per_s = figure(results, "c_put_small", "files_per_s");
        let cpu_us_per_file = files_per_s.and_then(|_| {
            let line = results.get("c_put_small")?;
            let cpu_seconds = line.get("server")?.get("cpu_s")?.as_f64()?;
            let files = line.get("files")?.as_f64().filter(|files| *files > 0.0)?;
            Some(cpu_seconds / files * 1e6)
        });
        Self { files_per_s, cpu_us_per_file }
    }
}

/// Each server's files/s per round, their median, Nubo's median over the server's, and the
/// median of the server's CPU time per file (all its processes and threads, as davbench reads
/// them: time spent beside the request, a checkpoint say, counts too).
fn print_side_by_side(servers: &[&Server], figures: &[Vec<Round>]) {
    let median_of =
        |rounds: &[Round], value: fn(&Round) -> Option<f64>| median(rounds.iter().filter_map(value).collect());
    let medians: Vec<Option<f64>> = figures.iter().map(|rounds| median_of(rounds, |round| round.files_per_s)).collect();
    println!("| server | files/s per round | median | Nubo's median over it | CPU per file (µs, median) |");
    println!("|---|---|---:|---:|---:|");
    for ((server, rounds), server_median) in servers.iter().zip(figures).zip(&medians) {
        let each: Vec<String> = rounds
            .iter()
            .map(|round| round.files_per_s.map_or_else(|| "failed".to_owned(), |v| format!("{v:.0}")))
            .collect();
        let ratio =
            medians[0].zip(*server_median).map_or_else(String::new, |(nubo, other)| format!("{:.2}x", nubo / other));
        let shown = server_median.map_or_else(|| "failed".to_owned(), |v| format!("{v:.0}"));
        let cpu = median_of(rounds, |round| round.cpu_us_per_file).map_or_else(String::new, |v| format!("{v:.0}"));
        println!("| {} | {} | {shown} | {ratio} | {cpu} |", server.name, each.join(" / "));
    }
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => None,
        n if n % 2 == 1 => Some(values[middle]),
        _ => Some((values[middle - 1] + values[middle]) / 2.0),
    }
}

/// Sets the bench user's policy to `durable: false`: blobs are acknowledged from the page
/// cache, as the peers do.
async fn stop_syncing(bench: &crate::files::Bench) {
    let policies = bench.json(reqwest::Method::GET, "/admin/policy", None).await;
    let policy = &policies[0];
    // The update takes the writable fields only (the view adds the id and the times).
    let mut update = serde_json::Map::new();
    for field in ["name", "type", "max_size", "is_private", "chunk_size", "options", "dir_name_rule", "file_name_rule"]
    {
        update.insert(field.to_owned(), policy[field].clone());
    }
    update.insert("node_id".to_owned(), policy["node_id"].clone());
    let mut update = Value::Object(update);
    update["options"]["durable"] = json!(false);
    let path = format!("/admin/policy/{}", policy["id"].as_str().expect("policy id"));
    bench.json(reqwest::Method::PUT, &path, Some(update)).await;
}

/// One server's results, and which workloads it ran (letters `a` to `f`, as `FIGURES`).
struct Row {
    server: String,
    workloads: String,
    results: BTreeMap<String, Value>,
}

/// The table of every row; a workload a row did not run is left empty, one it ran without a
/// figure says `failed`.
fn print_table(table: &[Row]) {
    let cell = |value: Option<f64>| value.map_or_else(|| "failed".to_owned(), |v| format!("{v:.3}"));
    print!("| server |");
    for (workload, _, unit) in FIGURES {
        print!(" {workload} ({unit}) |");
    }
    println!(" c_put_small, first run (files/s) | peak RSS (MiB) |");
    println!("|---|{}---|---|", "---|".repeat(FIGURES.len()));
    for Row { server, workloads, results } in table {
        print!("| {server} |");
        for ((workload, key, _), letter) in FIGURES.iter().zip('a'..='f') {
            let shown = if workloads.contains(letter) { cell(figure(results, workload, key)) } else { String::new() };
            print!(" {shown} |");
        }
        let first_run = if workloads.contains('c') { cell(first_small_run(results)) } else { String::new() };
        println!(" {first_run} | {} |", cell(peak_rss(results)));
    }
}
