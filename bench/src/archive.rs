//! `nubo-bench archive [--size-mib N] [--files F] [--keep PATH]`: a folder of F files totalling N
//! MiB (default 40 files, 5 GiB) uploaded to a `nubo-master` process (release build, SQLite,
//! local policy), then fetched as one streamed ZIP (`POST /file/archive`, `GET` its URL) while
//! the master's resident memory (VmRSS) is sampled every 100 ms. Prints the throughput, the
//! peak RSS (the target: under 100 MiB) and checks the archive's length is the files'
//! bytes plus a plausible overhead. `--keep` also writes the ZIP there, to check it with
//! `unzip -t` or Python's `zipfile` (slower: the disk writes it too).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::files::{Bench, send_chunks, start_signed_in};

const MIB: u64 = 1024 * 1024;
/// A ZIP's bytes besides the content, per stored file entry with ZIP64 fields and a data
/// descriptor (headers, name twice, extra fields), with room to spare.
const ENTRY_OVERHEAD: u64 = 400;

struct Options {
    size_mib: u64,
    files: u64,
    keep: Option<String>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options { size_mib: 5 * 1024, files: 40, keep: None };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--size-mib" => options.size_mib = value.parse().map_err(|_| "--size-mib takes a number")?,
            "--files" => options.files = value.parse().map_err(|_| "--files takes a number")?,
            "--keep" => options.keep = Some(value.clone()),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if options.files == 0 || options.size_mib < options.files {
        return Err("need at least one file and one MiB per file".to_owned());
    }
    Ok(options)
}

/// The master's resident memory now, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

pub async fn run(args: &[String]) {
    let options = match parse(args) {
        Ok(options) => options,
        Err(err) => {
            eprintln!("{err}\nusage: nubo-bench archive [--size-mib N] [--files F] [--keep PATH]");
            std::process::exit(2);
        }
    };
    let (bench, _) = start_signed_in().await;
    let folder =
        bench.json(reqwest::Method::POST, "/directory", Some(json!({"parent_id": bench.root, "name": "big"}))).await;
    let folder = folder["id"].as_str().expect("folder id").to_owned();

    let file_size = options.size_mib * MIB / options.files;
    let total = file_size * options.files;
    let started = Instant::now();
    for index in 0..options.files {
        upload(&bench, &folder, &format!("part-{index:04}.bin"), file_size, index).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "uploaded {} files of {} MiB ({:.0} MiB) in {seconds:.0} s ({:.0} MiB/s); master RSS now {:.1} MiB",
        options.files,
        file_size / MIB,
        total as f64 / MIB as f64,
        total as f64 / MIB as f64 / seconds,
        rss_mib(bench.server.pid())
    );

    let ticket = bench.json(reqwest::Method::POST, "/file/archive", Some(json!({"ids": [folder]}))).await;
    let site = bench.server.base.trim_end_matches("/api/v1").to_owned();
    let url = format!("{site}{}", ticket["url"].as_str().expect("archive url"));

    let (pid, done, peak) = (bench.server.pid(), Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let sampler = {
        let (done, peak) = (done.clone(), peak.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let kib = (rss_mib(pid) * 1024.0) as u64;
                peak.fetch_max(kib, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut keep = match &options.keep {
        Some(path) => Some(tokio::fs::File::create(path).await.expect("--keep file")),
        None => None,
    };
    let started = Instant::now();
    let response = bench.client.get(&url).send().await.expect("archive request");
    assert_eq!(response.status(), 200, "archive");
    let mut body = response.bytes_stream();
    let mut length = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.expect("the archive streams to its end");
        length += chunk.len() as u64;
        if let Some(file) = keep.as_mut() {
            file.write_all(&chunk).await.expect("write --keep");
        }
    }
    if let Some(mut file) = keep {
        file.flush().await.expect("flush --keep");
    }
    let seconds = started.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    let peak_mib = peak.load(Ordering::Relaxed) as f64 / 1024.0;

    let overhead = length.saturating_sub(total);
    let plausible = length > total && overhead <= (options.files + 1) * ENTRY_OVERHEAD + 4096;
    println!("\n| workload | archive | time | throughput | master peak RSS (VmRSS, 100 ms) | target |");
    println!("|---|---:|---:|---:|---:|---|");
    println!(
        "| ZIP of {} files, {:.0} MiB | {:.0} MiB (+{overhead} B) | {seconds:.1} s | {:.0} MiB/s | {peak_mib:.1} MiB | < 100 MiB |",
        options.files,
        total as f64 / MIB as f64,
        length as f64 / MIB as f64,
        length as f64 / MIB as f64 / seconds,
    );
    assert!(plausible, "an archive of {length} bytes for {total} bytes of files is not plausible");
    if let Some(path) = &options.keep {
        println!("\nkept at {path}: check it with `unzip -tq {path}`");
    }
}

/// Uploads `size` bytes of content distinct per `index` as `name` into `folder`.
async fn upload(bench: &Bench, folder: &str, name: &str, size: u64, index: u64) {
    let session = bench
        .json(
            reqwest::Method::POST,
            "/file/upload",
            Some(json!({"file_name": name, "file_size": size, "parent_id": folder})),
        )
        .await;
    let id = session["id"].as_str().expect("upload id").to_owned();
    let chunk = session["chunk_size"].as_u64().expect("chunk size") as usize;
    let base = bench.server.base.clone();
    let chunk_url = Arc::new(move |at: usize| format!("{base}/file/upload/{id}/{at}"));
    let offset = (index as usize + 1) * 1_000_000;
    let done = send_chunks(&bench.client, chunk_url, &bench.token, size as usize, chunk, 2, offset).await;
    assert!(done["object"].is_object(), "upload of {name} did not complete: {done}");
}
