//! `nubo-bench sync-growth`: how `nubo sync` grows with the tree, side by side with `rclone
//! bisync` over WebDAV in one run against one `nubo-master` on SQLite. For each size (files of
//! `--kib` KiB in folders of 500): the first sync into an empty remote folder; a run where
//! nothing changed; and a run that must list the server (one file added there since). Each run's
//! wall time, the client's peak RSS (`VmHWM`, polled while it runs) and the server's CPU time are
//! reported. rclone has no lighter run than a full listing of both sides: its "nothing changed"
//! run is the figure for both. Its first sync (`--resync`) is timed up to `--peer-first-max`
//! files; above that its pair is made with `rclone copy` and a `--resync` (reported as set-up),
//! since bisync's first sync of 200,000 files would take hours.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli::Client;
use crate::files::Bench;
use crate::sync::{start_both, write_small};

struct Options {
    sizes: Vec<usize>,
    kib: usize,
    peer_first_max: usize,
    /// Above this many files rclone is not run at all.
    peer_max: usize,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options =
        Options { sizes: vec![1_000, 10_000, 50_000, 200_000], kib: 1, peer_first_max: 10_000, peer_max: usize::MAX };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let value = iter.next().ok_or_else(|| format!("{arg} needs a value"))?;
        let number = |text: &str| text.parse::<usize>().map_err(|e| format!("{arg}: {e}"));
        match arg.as_str() {
            "--sizes" => options.sizes = value.split(',').map(number).collect::<Result<_, _>>()?,
            "--kib" => options.kib = number(value)?.max(1),
            "--peer-first-max" => options.peer_first_max = number(value)?,
            "--peer-max" => options.peer_max = number(value)?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

/// What one client run cost.
#[derive(Clone, Copy)]
struct Cost {
    seconds: f64,
    peak_mib: f64,
    server_cpu: f64,
}

impl Cost {
    fn cell(cost: Option<Cost>) -> String {
        cost.map_or_else(
            || "—".to_owned(),
            |c| format!("{:.2} s, {:.0} MiB, {:.2} s CPU", c.seconds, c.peak_mib, c.server_cpu),
        )
    }
}

/// Runs `command` to its end, polling its peak RSS; panics with `what` when it fails.
fn measured(bench: &Bench, mut command: Command, what: &str) -> Cost {
    let cpu_before = bench.server.cpu_seconds();
    let started = Instant::now();
    let mut child = command.stdin(Stdio::null()).stdout(Stdio::null()).spawn().expect(what);
    let mut peak_kib = 0.0f64;
    let status = loop {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        if let Some(kib) = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
        {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().expect(what) {
            break status;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let seconds = started.elapsed().as_secs_f64();
    assert!(status.success(), "{what} failed: {status}");
    Cost { seconds, peak_mib: peak_kib / 1024.0, server_cpu: bench.server.cpu_seconds() - cpu_before }
}

fn nubo_sync(client: &Client, local: &Path, remote: &str) -> Command {
    let mut command = client.command();
    command.args(["--quiet", "sync", "-P", "4"]).arg(local).arg(remote);
    command
}

/// Adds one small file to the remote folder `path` through the API, so the next run lists.
async fn change_on_server(bench: &Bench, path: &str, name: &str) {
    let folder = bench.json(reqwest::Method::GET, &format!("/directory{path}?limit=1"), None).await;
    let parent = folder["folder"]["id"].as_str().expect("synced folder").to_owned();
    let url = format!("{}/file/content?parent_id={parent}&name={name}", bench.server.base);
    let response = bench.client.post(url).bearer_auth(&bench.token).body(b"a change there".to_vec()).send().await;
    assert!(response.expect("upload").status().is_success(), "the change on the server");
}

pub async fn run(args: &[String]) {
    let options = match parse(args) {
        Ok(options) => options,
        Err(error) => {
            eprintln!(
                "{error}\nusage: nubo-bench sync-growth [--sizes 1000,10000,...] [--kib K] [--peer-first-max N] [--peer-max N]"
            );
            std::process::exit(2);
        }
    };
    let (bench, client, rclone) = start_both().await;
    let work = tempfile::Builder::new().prefix("nubo-bench-sync-growth-").tempdir().expect("work dir");
    let mut rows = Vec::new();
    for (round, &count) in options.sizes.iter().enumerate() {
        let (mine, theirs) = (work.path().join(format!("nubo-{count}")), work.path().join(format!("rclone-{count}")));
        let (remote_mine, remote_theirs) = (format!("/nubo-{count}"), format!("rclone-{count}"));
        write_small(&mine, count, options.kib * 1024, 2 * round + 1);

        let first = measured(&bench, nubo_sync(&client, &mine, &remote_mine), "nubo first sync");
        println!("{count} files: nubo first sync {}", Cost::cell(Some(first)));
        let unchanged = measured(&bench, nubo_sync(&client, &mine, &remote_mine), "nubo no-change run");
        println!("{count} files: nubo no-change run {}", Cost::cell(Some(unchanged)));
        change_on_server(&bench, &remote_mine, "changed-there.txt").await;
        let listed = measured(&bench, nubo_sync(&client, &mine, &remote_mine), "nubo listing run");
        assert!(mine.join("changed-there.txt").exists(), "the listing run brought the server's change");
        println!("{count} files: nubo run with a full listing {}", Cost::cell(Some(listed)));

        if count > options.peer_max {
            rows.push((count, [(Some(first), None), (Some(unchanged), None), (Some(listed), None)]));
            let _ = std::fs::remove_dir_all(&mine);
            let _ = std::fs::remove_dir_all(&theirs);
            continue;
        }
        write_small(&theirs, count, options.kib * 1024, 2 * round + 2);
        rclone.run(&["mkdir", &format!("nubo:{remote_theirs}")]);
        let remote = format!("nubo:{remote_theirs}");
        let peer_first = if count <= options.peer_first_max {
            Some(measured(&bench, rclone.bisync_command(&theirs, &remote, true), "rclone bisync --resync"))
        } else {
            let copy = measured(
                &bench,
                rclone.command(&["copy", theirs.to_str().unwrap(), &remote, "--transfers", "4"]),
                "rclone copy",
            );
            let resync = measured(&bench, rclone.bisync_command(&theirs, &remote, true), "rclone bisync --resync");
            println!(
                "{count} files: rclone's pair set up by rclone copy {:.1} s and bisync --resync {:.1} s",
                copy.seconds, resync.seconds
            );
            None
        };
        println!("{count} files: rclone bisync first sync {}", Cost::cell(peer_first));
        let peer_unchanged = measured(&bench, rclone.bisync_command(&theirs, &remote, false), "rclone bisync");
        println!("{count} files: rclone bisync no-change run {}", Cost::cell(Some(peer_unchanged)));
        change_on_server(&bench, &format!("/{remote_theirs}"), "changed-there.txt").await;
        let peer_listed = measured(&bench, rclone.bisync_command(&theirs, &remote, false), "rclone bisync");
        assert!(theirs.join("changed-there.txt").exists(), "bisync brought the server's change");
        println!("{count} files: rclone bisync run with a change there {}", Cost::cell(Some(peer_listed)));
        rows.push((
            count,
            [(Some(first), peer_first), (Some(unchanged), Some(peer_unchanged)), (Some(listed), Some(peer_listed))],
        ));
        // Each size's trees go before the next is written: 200,000 files are enough on disk.
        let _ = std::fs::remove_dir_all(&mine);
        let _ = std::fs::remove_dir_all(&theirs);
    }

    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    println!(
        "\nnubo sync -P 4 against rclone bisync --transfers 4 over WebDAV, files of {} KiB in folders of 500, one master on SQLite ({profile} build); each cell: wall time, the client's peak RSS, the server's CPU time",
        options.kib
    );
    println!("\n| files | run | nubo sync | rclone bisync | rclone / nubo time |");
    println!("|---:|---|---|---|---:|");
    for (count, runs) in rows {
        for (name, (mine, theirs)) in
            ["first sync", "nothing changed", "one change there (full listing)"].iter().zip(runs)
        {
            let ratio = match (mine, theirs) {
                (Some(m), Some(t)) => format!("{:.1}", t.seconds / m.seconds),
                _ => "—".to_owned(),
            };
            println!("| {count} | {name} | {} | {} | {ratio} |", Cost::cell(mine), Cost::cell(theirs));
        }
    }
}
