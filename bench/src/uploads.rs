//! `nubo-bench uploads --baseline PATH [--rounds N]`: the upload workloads on this build's
//! `nubo-master` and on another build of it (for example the commit before a change to the
//! upload path), side by side in one run: both masters run at once on the same machine (release
//! builds, SQLite, local policy) and take turns, rounds in rotating order. Each figure is the
//! median of the rounds; the server CPU time per upload is steadier than the rate on a shared
//! machine.

use std::path::PathBuf;

use crate::files::{Bench, SmallWay, start_signed_in_at, upload_small_files};

const MIB: usize = 1024 * 1024;

/// What one workload measured on one master in one round.
#[derive(Clone, Copy, Default)]
struct Measure {
    rate: f64,
    cpu_seconds: f64,
}

/// Measures `workload` on `bench`: its rate, and the server CPU seconds it cost.
async fn measured<F: std::future::Future<Output = f64>>(bench: &Bench, workload: F) -> Measure {
    let before = bench.server.cpu_seconds();
    let rate = workload.await;
    Measure { rate, cpu_seconds: bench.server.cpu_seconds() - before }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

const WORKLOADS: [&str; 3] = [
    "upload 1 GiB, 8 MiB chunks, 1 stream",
    "1000 new files of 4 KiB, upload session (8 clients)",
    "1000 new files of 4 KiB, POST /file/content (8 clients)",
];

/// Runs workload `index` of [`WORKLOADS`] in round `round` on `bench`.
async fn run_workload(bench: &Bench, index: usize, round: usize, seed: usize) -> Measure {
    match index {
        0 => measured(bench, async { bench.upload(&format!("big-{round}-{seed}.bin"), 1024 * MIB, 1).await.0 }).await,
        1 => {
            let folder = format!("session-{round}");
            measured(bench, upload_small_files(bench, SmallWay::Session, &folder, seed)).await
        }
        _ => {
            let folder = format!("one-request-{round}");
            measured(bench, upload_small_files(bench, SmallWay::OneRequest, &folder, seed)).await
        }
    }
}

pub async fn run(args: &[String]) {
    let mut baseline = None;
    let mut rounds = 3usize;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        match (flag.as_str(), rest.next()) {
            ("--baseline", Some(path)) => baseline = Some(PathBuf::from(path)),
            ("--rounds", Some(n)) => rounds = n.parse().expect("--rounds takes a number"),
            _ => panic!("usage: nubo-bench uploads --baseline PATH [--rounds N]"),
        }
    }
    let baseline = baseline.expect("--baseline PATH: the other nubo-master build to compare with");
    let current = std::env::current_exe().expect("own path").with_file_name("nubo-master");
    let (this, _) = start_signed_in_at(&current, &[]).await;
    let (other, _) = start_signed_in_at(&baseline, &[]).await;
    let masters = [&this, &other];
    let mut measures = vec![vec![Vec::<Measure>::new(); 2]; WORKLOADS.len()];
    for round in 0..rounds {
        for (index, name) in WORKLOADS.iter().enumerate() {
            for turn in 0..2 {
                // Rotating order, so neither build always goes first (warm page cache, a
                // neighbour's load).
                let which = (turn + round) % 2;
                // Contents new to each server in every round.
                let seed = (round * 2 + which) * 10_000 + index * 100_000;
                let measure = run_workload(masters[which], index, round, seed).await;
                println!(
                    "round {round}, {name}, {}: {:.1}/s, {:.2} s CPU",
                    ["this", "baseline"][which],
                    measure.rate,
                    measure.cpu_seconds
                );
                measures[index][which].push(measure);
            }
        }
    }
    println!("\n| workload | this build | baseline | rate ratio | server CPU ratio |");
    println!("|---|---:|---:|---:|---:|");
    for (index, name) in WORKLOADS.iter().enumerate() {
        let rate = |which: usize| median(measures[index][which].iter().map(|m| m.rate).collect());
        let cpu = |which: usize| median(measures[index][which].iter().map(|m| m.cpu_seconds).collect());
        let unit = if index == 0 { "MiB/s" } else { "files/s" };
        println!(
            "| {name} | {:.0} {unit}, {:.2} s CPU | {:.0} {unit}, {:.2} s CPU | {:.2} | {:.2} |",
            rate(0),
            cpu(0),
            rate(1),
            cpu(1),
            rate(0) / rate(1),
            cpu(0) / cpu(1)
        );
    }
}
