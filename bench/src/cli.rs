//! `nubo-bench cli`: the `nubo` command-line client against `rclone copy` over WebDAV, side by
//! side in one run on one `nubo-master` process: a 1 GiB file and 1,000 small files, once with
//! the master's own disk as the default policy (both go through the master) and once with a
//! `nubo-slave` node's policy as the default (`nubo put` sends the chunks straight to the node;
//! rclone's WebDAV `PUT`s still go through the master, which streams them on to the node).
//! Both clients keep 4 transfers in flight (`nubo put -P 4`, rclone's `--transfers 4`; `--parallel N`).
//! Every upload has content new to the server (no de-duplication) and goes to a fresh folder;
//! nothing is deleted before the table is printed (deletions slow the file creations that
//! follow on this machine's ext4, see docs/src/benchmarks.md). The binaries `nubo`, `nubo-master` and
//! `nubo-slave` are taken from next to this one: build them in the same profile first.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

use crate::files::{fill_chunk, start_signed_in};
use crate::nodes::{BenchNode, admins_group, set_admin_policies, start_node};

const MIB: usize = 1024 * 1024;
const BIG: usize = 1024 * MIB;
const SMALL_FILES: usize = 1000;
const SMALL_SIZE: usize = 16 * 1024;
const DAV_PASSWORD: &str = "cli-bench-dav-password";

struct Options {
    big_mib: usize,
    small_files: usize,
    /// `nubo put -P` and `rclone --transfers`.
    parallel: usize,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options { big_mib: BIG / MIB, small_files: SMALL_FILES, parallel: 4 };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut value =
            || iter.next().ok_or_else(|| format!("{arg} needs a value"))?.parse::<usize>().map_err(|e| e.to_string());
        match arg.as_str() {
            "--big-mib" => options.big_mib = value()?,
            "--small-files" => options.small_files = value()?,
            "--parallel" => options.parallel = value()?.max(1),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

/// One timed upload.
struct Timing {
    seconds: f64,
    bytes: usize,
}

impl Timing {
    fn mib_per_second(&self) -> f64 {
        self.bytes as f64 / MIB as f64 / self.seconds
    }
}

/// Makes the content of `path` new to the server for round `round`: its first bytes change.
pub(crate) fn renew(path: &Path, round: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path).expect("open local file");
    file.write_all_at(&round.to_le_bytes(), 0).expect("renew local file");
}

pub(crate) fn write_big(path: &Path, size: usize) {
    use std::io::Write;
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("big file"));
    let mut chunk = vec![0u8; 8 * MIB];
    for index in 0..size.div_ceil(chunk.len()) {
        fill_chunk(&mut chunk, index);
        let len = chunk.len().min(size - index * chunk.len());
        file.write_all(&chunk[..len]).expect("write big file");
    }
    file.flush().expect("flush big file");
}

fn write_small(dir: &Path, count: usize) {
    std::fs::create_dir_all(dir).expect("small files folder");
    let mut buffer = vec![0u8; SMALL_SIZE];
    for index in 0..count {
        fill_chunk(&mut buffer, 1_000_000 + index);
        std::fs::write(dir.join(format!("small-{index:04}.bin")), &buffer).expect("small file");
    }
}

fn renew_all(source: &Path, round: u64) {
    if source.is_dir() {
        for entry in std::fs::read_dir(source).expect("read small files").flatten() {
            renew(&entry.path(), round);
        }
    } else {
        renew(source, round);
    }
}

/// The `nubo` binary signed in with its own config (and data) directory.
pub(crate) struct Client {
    binary: PathBuf,
    config: tempfile::TempDir,
}

impl Client {
    /// The `nubo` next to this binary, with a fresh config directory.
    pub(crate) fn new() -> Client {
        Client {
            binary: std::env::current_exe().expect("own path").with_file_name("nubo"),
            config: tempfile::tempdir().expect("config dir"),
        }
    }

    pub(crate) fn command(&self) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .env("XDG_CONFIG_HOME", self.config.path())
            .env("XDG_DATA_HOME", self.config.path())
            .stdin(Stdio::piped())
            .stderr(Stdio::inherit());
        command
    }

    pub(crate) fn login(&self, server: &str) {
        use std::io::Write;
        let mut child = self
            .command()
            .args(["login", server, "--email", "bench@example.com", "--password-stdin"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e} (cargo build --workspace --bins)", self.binary.display()));
        child.stdin.take().unwrap().write_all(b"bench-password\n").expect("password");
        assert!(child.wait().expect("nubo login").success(), "nubo login");
    }

    /// `nubo put -P 4 source remote`; answers the time and the per-file report.
    fn put(&self, source: &Path, remote: &str, bytes: usize, parallel: usize) -> (Timing, Vec<Value>) {
        let started = Instant::now();
        let output = self
            .command()
            .args(["--json", "put", "-P", &parallel.to_string()])
            .arg(source)
            .arg(remote)
            .stdin(Stdio::null())
            .output()
            .expect("nubo put");
        let seconds = started.elapsed().as_secs_f64();
        assert!(output.status.success(), "nubo put failed");
        let report: Vec<Value> = serde_json::from_slice(&output.stdout).expect("nubo put --json");
        (Timing { seconds, bytes }, report)
    }
}

/// `rclone` with the remote `nubo:` set to the WebDAV account `account` of the bench user
/// (through its environment; `config` is an empty config file that must outlive the command).
pub(crate) fn rclone(dav_url: &str, account: (&str, &str), config: &Path) -> Command {
    let obscured =
        Command::new("rclone").args(["obscure", account.1]).output().expect("rclone (apt-get install rclone)");
    let password = String::from_utf8_lossy(&obscured.stdout).trim().to_owned();
    let mut command = Command::new("rclone");
    command
        .arg("--config")
        .arg(config)
        .env("RCLONE_CONFIG_NUBO_TYPE", "webdav")
        .env("RCLONE_CONFIG_NUBO_URL", dav_url)
        .env("RCLONE_CONFIG_NUBO_VENDOR", "other")
        .env("RCLONE_CONFIG_NUBO_USER", format!("bench@example.com/{}", account.0))
        .env("RCLONE_CONFIG_NUBO_PASS", password)
        .stdin(Stdio::null());
    command
}

/// `rclone copy source nubo:remote` over WebDAV.
fn rclone_copy(dav_url: &str, source: &Path, remote: &str, bytes: usize, parallel: usize) -> Timing {
    let config = tempfile::NamedTempFile::new().expect("empty rclone config");
    let started = Instant::now();
    let status = rclone(dav_url, ("cli", DAV_PASSWORD), config.path())
        .arg("copy")
        .arg(source)
        .arg(format!("nubo:{remote}"))
        .args(["--transfers", &parallel.to_string(), "-q"])
        .status()
        .expect("rclone copy");
    let seconds = started.elapsed().as_secs_f64();
    assert!(status.success(), "rclone copy failed");
    Timing { seconds, bytes }
}

struct Row {
    workload: String,
    path: &'static str,
    nubo: Timing,
    rclone: Timing,
}

pub async fn run(args: &[String]) {
    let options = match parse(args) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("{error}\nusage: nubo-bench cli [--big-mib N] [--small-files N] [--parallel N]");
            std::process::exit(2);
        }
    };
    let (mut bench, _owner) = start_signed_in().await;
    let created = bench
        .json(reqwest::Method::POST, "/webdav/accounts", Some(json!({"name": "cli", "password": DAV_PASSWORD})))
        .await;
    assert_eq!(created["name"], "cli");
    let server = bench.server.base.trim_end_matches("/api/v1").to_owned();
    let dav_url = format!("{server}/dav/");
    let local_policies = admins_group(&bench).await["policy_ids"].as_array().unwrap().clone();
    let BenchNode { process: _node, policy_id: node_policy, .. } = start_node(&bench).await;
    bench.sign_in_again().await;

    let client = Client::new();
    client.login(&server);
    let work = tempfile::Builder::new().prefix("nubo-bench-cli-").tempdir().expect("work dir");
    let big = work.path().join("big.bin");
    let big_bytes = options.big_mib * MIB;
    write_big(&big, big_bytes);
    let small = work.path().join("small");
    write_small(&small, options.small_files);
    let small_bytes = options.small_files * SMALL_SIZE;

    let mut rows = Vec::new();
    let mut round = 0;
    let paths = [("master's disk", None), ("node (nubo direct, rclone via the master)", Some(&node_policy))];
    for (path, default_policy) in paths {
        let mut policies = local_policies.clone();
        if let Some(node) = default_policy {
            policies.insert(0, Value::String(node.clone()));
        } else {
            policies.push(Value::String(node_policy.clone()));
        }
        set_admin_policies(&bench, policies).await;
        bench.sign_in_again().await;
        let workloads = [
            (format!("{} MiB file", options.big_mib), &big, big_bytes),
            (format!("{} files of {} KiB", options.small_files, SMALL_SIZE / 1024), &small, small_bytes),
        ];
        for (workload, source, bytes) in workloads {
            round += 1;
            renew_all(source, round);
            let remote = format!("/nubo-{round}/");
            let (nubo, report) = client.put(source, &remote, bytes, options.parallel);
            let methods: std::collections::BTreeSet<&str> =
                report.iter().filter_map(|r| r["method"].as_str()).collect();
            println!("{workload}, {path}: nubo put {:.2} s ({methods:?})", nubo.seconds);
            round += 1;
            renew_all(source, round);
            let remote = format!("rclone-{round}");
            let rclone = rclone_copy(&dav_url, source, &remote, bytes, options.parallel);
            println!("{workload}, {path}: rclone copy {:.2} s", rclone.seconds);
            rows.push(Row { workload, path, nubo, rclone });
        }
    }

    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    let parallel = options.parallel;
    println!(
        "\nnubo put -P {parallel} against rclone copy --transfers {parallel} over WebDAV, one master on SQLite ({profile} build)"
    );
    println!(
        "\n| workload | default policy | nubo put s | nubo MiB/s | rclone s | rclone MiB/s | rclone time / nubo time |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for row in rows {
        println!(
            "| {} | {} | {:.2} | {:.1} | {:.2} | {:.1} | {:.2} |",
            row.workload,
            row.path,
            row.nubo.seconds,
            row.nubo.mib_per_second(),
            row.rclone.seconds,
            row.rclone.mib_per_second(),
            row.rclone.seconds / row.nubo.seconds
        );
    }
}
