//! `nubo-bench migrate`: a `POLICY_MIGRATE` of 1 GiB of mixed files (2 x 256 MiB, 64 x 4 MiB,
//! 1024 x 256 KiB) from the local policy to an S3 policy, against a plain streaming copy of
//! 1 GiB to the same S3 server (an in-process s3s-fs over loopback), with the master's peak RSS.

use std::time::{Duration, Instant};

use nubo_common::storage::{BlobStore, StorageKey};

use nubo_common::storage::s3::S3BlobStore;
use nubo_tests::s3::S3TestServer;
use serde_json::{Value, json};

use crate::files::{fill_chunk, start_signed_in};

const MIB: usize = 1024 * 1024;

pub async fn run() {
    let (bench, _owner) = start_signed_in().await;
    let server = S3TestServer::start().await;
    let policy = bench
        .json(reqwest::Method::POST, "/admin/policy", Some(json!({"name": "s3", "type": "s3", "chunk_size": 8 * MIB,
            "options": {"endpoint": server.endpoint, "region": server.region, "bucket": server.bucket, "path_style": true,
                        "access_key": server.access_key, "secret_key": server.secret_key}})))
        .await;
    let s3_id = policy["id"].as_str().unwrap().to_owned();
    let groups = bench.json(reqwest::Method::GET, "/admin/group", None).await;
    let admins = groups.as_array().unwrap().iter().find(|g| g["is_admin"] == true).unwrap().clone();
    let mut policies = admins["policy_ids"].as_array().unwrap().clone();
    policies.push(Value::String(s3_id.clone()));
    bench
        .json(reqwest::Method::PUT, &format!("/admin/group/{}", admins["id"].as_str().unwrap()),
            Some(json!({"name": admins["name"], "is_admin": true, "max_storage": 4_i64 << 40, "permissions": admins["permissions"], "policy_ids": policies})))
        .await;

    let folder =
        bench.json(reqwest::Method::POST, "/directory", Some(json!({"parent_id": bench.root, "name": "mixed"}))).await;
    let folder_id = folder["id"].as_str().unwrap().to_owned();
    let mut inner = bench;
    inner.root = folder_id.clone();
    println!("uploading 1 GiB of mixed files to the local policy...");
    let mut n = 0;
    for (count, size) in [(2, 256 * MIB), (64, 4 * MIB), (1024, 256 * 1024)] {
        for _ in 0..count {
            inner.upload(&format!("f{n:04}.bin"), size, 1).await;
            n += 1;
        }
    }

    inner.server.reset_peak();
    let started = Instant::now();
    let task = inner
        .json(reqwest::Method::PATCH, &format!("/object/{folder_id}/policy"), Some(json!({"policy_id": s3_id})))
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    loop {
        let view = inner.json(reqwest::Method::GET, &format!("/task/{task_id}"), None).await;
        match view["status"].as_str().unwrap() {
            "completed" => break,
            "queued" | "running" => tokio::time::sleep(Duration::from_millis(20)).await,
            other => panic!("migration ended as {other}: {view}"),
        }
    }
    let migrate_rate = 1024.0 / started.elapsed().as_secs_f64();
    let rss = inner.server.peak_rss_mib();

    // The yardstick: the same mix of files streamed one after the other to the same server with
    // the same driver, read from local files like the migration reads them.
    let store = S3BlobStore::new(&server.config(Some("plain"))).expect("s3 store");
    let scratch = tempfile::tempdir().expect("scratch");
    let mut sources = Vec::new();
    for (count, size) in [(2, 256 * MIB), (64, 4 * MIB), (1024, 256 * 1024)] {
        for _ in 0..count {
            let path = scratch.path().join(format!("s{}", sources.len()));
            let mut buffer = vec![0u8; size];
            fill_chunk(&mut buffer, sources.len() + 5_000);
            std::fs::write(&path, &buffer).expect("scratch file");
            sources.push(path);
        }
    }
    drop(store);
    // The copy runs in its own process, as the migration runs in the master's: the S3 server
    // in this process then serves both the same way.
    let config = serde_json::to_string(&server.config(Some("plain"))).expect("config");
    let started = Instant::now();
    let status = tokio::process::Command::new(std::env::current_exe().expect("own path"))
        .args(["s3-copy", &config])
        .args(&sources)
        .status()
        .await
        .expect("copy process");
    assert!(status.success(), "plain copy failed");
    let copy_rate = 1024.0 / started.elapsed().as_secs_f64();

    println!("\n| workload | figure | master peak RSS | target |");
    println!("|---|---|---:|---|");
    println!("| plain streaming copy of the same 1090 files to the S3 server | {copy_rate:.0} MiB/s | | |");
    println!(
        "| POLICY_MIGRATE of 1 GiB (1090 files) local -> S3 | {migrate_rate:.0} MiB/s ({:.0}% of the plain copy) | {rss:.1} MiB | >= 70%, RSS < 100 MiB |",
        migrate_rate / copy_rate * 100.0
    );
}

/// `nubo-bench s3-copy CONFIG FILE...`: streams each file to S3 (`CONFIG` is an `S3Config` as
/// JSON), one after the other. The yardstick process of `migrate`.
pub async fn copy_files(args: &[String]) {
    let (config, files) = args.split_first().expect("usage: s3-copy CONFIG FILE...");
    let config: nubo_common::storage::s3::S3Config = serde_json::from_str(config).expect("S3 config");
    let store = S3BlobStore::new(&config).expect("s3 store");
    for (i, path) in files.iter().enumerate() {
        let file = tokio::fs::File::open(path).await.expect("open");
        let stream = tokio_util::io::ReaderStream::with_capacity(file, 64 * 1024);
        store
            .put_stream(&StorageKey::parse(&format!("plain/{i}")).unwrap(), Box::pin(stream), None)
            .await
            .expect("plain copy");
    }
}
