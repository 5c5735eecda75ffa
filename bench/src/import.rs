//! `nubo-bench import [--files N]`: an admin import (`POST /admin/import`) of N files of 4 KiB
//! (default 10,000) placed straight in a local policy's directory and in an S3 bucket (an
//! in-process s3s-fs), on a `nubo-master` process with SQLite: files per second, and the bytes
//! the master process wrote meanwhile (`write_bytes` of `/proc/PID/io`: its database included)
//! beside the bytes imported. A second run of the same import (nothing new) is timed too.

use std::path::Path;
use std::time::{Duration, Instant};

use nubo_tests::s3::S3TestServer;
use serde_json::{Value, json};

use crate::files::{Bench, start_signed_in};

const FILE_SIZE: usize = 4096;

pub async fn run(args: &[String]) {
    let files = match args {
        [] => 10_000,
        [flag, n] if flag == "--files" => n.parse().expect("--files N"),
        _ => panic!("usage: nubo-bench import [--files N]"),
    };
    let (bench, owner) = start_signed_in().await;
    let data = bench.server.dir.path().join("data");
    let local = create_policy(
        &bench,
        json!({"name": "import-local", "type": "local", "chunk_size": 1 << 20,
        "options": {"root": "import-local"}}),
    )
    .await;
    let server = S3TestServer::start().await;
    let s3 = create_policy(
        &bench,
        json!({"name": "import-s3", "type": "s3", "chunk_size": 8 << 20,
        "options": {"endpoint": server.endpoint, "region": server.region, "bucket": server.bucket, "path_style": true,
                    "access_key": server.access_key, "secret_key": server.secret_key}}),
    )
    .await;
    let mut rows = Vec::new();
    for (label, policy, dir) in
        [("local disk", local, data.join("import-local")), ("S3 (s3s-fs)", s3, server.dir.path().join(&server.bucket))]
    {
        place(&dir, files);
        let destination = format!("/import-{}", label.split(' ').next().unwrap_or("x"));
        let before = written(bench.server.pid());
        let (first, task) = import(&bench, &policy, &owner, &destination).await;
        let wrote = written(bench.server.pid()).saturating_sub(before);
        assert_eq!(task["progress"]["import"]["files_imported"], files, "{task}");
        let (again, task) = import(&bench, &policy, &owner, &destination).await;
        assert_eq!(task["progress"]["import"]["files_skipped"], files, "{task}");
        let data_mib = (files * FILE_SIZE) as f64 / (1 << 20) as f64;
        rows.push(format!(
            "| {label} | {files} x 4 KiB ({data_mib:.0} MiB) | {:.0} files/s | {:.1} MiB ({:.0} bytes a file) | {:.0} files/s |",
            files as f64 / first,
            wrote as f64 / (1 << 20) as f64,
            wrote as f64 / files as f64,
            files as f64 / again,
        ));
    }
    println!("\n| storage | imported | first run | master wrote meanwhile | rerun (nothing new) |");
    println!("|---|---|---:|---:|---:|");
    for row in rows {
        println!("{row}");
    }
}

async fn create_policy(bench: &Bench, policy: Value) -> String {
    bench.json(reqwest::Method::POST, "/admin/policy", Some(policy)).await["id"].as_str().unwrap().to_owned()
}

/// Writes `files` distinct files of [`FILE_SIZE`] bytes below `dir/set`, 100 to a folder.
fn place(dir: &Path, files: usize) {
    for i in 0..files {
        let folder = dir.join(format!("set/d{:03}", i / 100));
        std::fs::create_dir_all(&folder).expect("folder");
        let mut bytes = vec![b'.'; FILE_SIZE];
        let name = format!("file {i}");
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        std::fs::write(folder.join(format!("f{i:06}.bin")), bytes).expect("file");
    }
}

/// Runs the import of `set` to `destination` to its end; answers the seconds it took and the task.
async fn import(bench: &Bench, policy: &str, owner: &str, destination: &str) -> (f64, Value) {
    let started = Instant::now();
    let body = json!({"source": {"policy_id": policy, "path_or_prefix": "set"}, "user_id": owner,
                      "dst_path": destination});
    let task = bench.json(reqwest::Method::POST, "/admin/import", Some(body)).await;
    let id = task["id"].as_str().unwrap().to_owned();
    loop {
        let view = bench.json(reqwest::Method::GET, &format!("/admin/task/{id}"), None).await;
        match view["status"].as_str().unwrap() {
            "completed" => return (started.elapsed().as_secs_f64(), view),
            "queued" | "running" => tokio::time::sleep(Duration::from_millis(20)).await,
            other => panic!("import ended as {other}: {view}"),
        }
    }
}

/// Bytes the process `pid` caused to be written to storage so far.
fn written(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    io.lines().find_map(|line| line.strip_prefix("write_bytes: ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}
