//! `nubo-bench nodes`: a 1 GiB upload sent straight to a storage node (a real `nubo-slave`
//! process), the same upload sent through the master to its own disk, and the disk ceiling of
//! the node's directory, in one run; plus the master's CPU seconds while the direct upload ran
//! (it should barely work: it only signed the session and recorded the file).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::files::{Bench, dd_write, send_chunks, start_signed_in};

const MIB: usize = 1024 * 1024;
const GIB: usize = 1024 * MIB;
const NODE_KEY: &str = "bench-node-key-bench-node-key-0123456789";

pub(crate) struct NodeProcess(Child);

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// CPU seconds (user + system) a process has used so far.
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    let per_second = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse::<f64>().ok())
        .unwrap_or(100.0);
    ticks / per_second
}

/// Sends `size` bytes to the node named by the session, `streams` chunks at a time; answers
/// MiB/s and the last answer (the created file).
async fn upload_direct(bench: &Bench, name: &str, size: usize, streams: usize, policy: &str) -> (f64, Value) {
    let session = bench
        .json(
            reqwest::Method::POST,
            "/file/upload",
            Some(json!({"file_name": name, "file_size": size, "parent_id": bench.root, "policy_id": policy})),
        )
        .await;
    let url = session["direct"]["url"].as_str().expect("a direct upload").to_owned();
    let credential = session["direct"]["credential"].as_str().unwrap().to_owned();
    let chunk = session["chunk_size"].as_u64().unwrap() as usize;
    let seed = name.len() * 1_000_003;
    let started = Instant::now();
    let chunk_url = Arc::new(move |index: usize| format!("{url}/{index}"));
    let done = send_chunks(&bench.client, chunk_url, &credential, size, chunk, streams, seed).await;
    assert!(done["object"].is_object(), "the node relayed the created file");
    (size as f64 / MIB as f64 / started.elapsed().as_secs_f64(), done)
}

/// A `nubo-slave` process registered with the bench's master and online, and a local policy
/// on it (8 MiB chunks) added last to the administrators' group.
pub(crate) struct BenchNode {
    pub(crate) process: NodeProcess,
    pub(crate) dir: std::path::PathBuf,
    pub(crate) policy_id: String,
}

pub(crate) async fn start_node(bench: &Bench) -> BenchNode {
    let node_dir = bench.server.dir.path().join("node");
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let node_url = format!("http://127.0.0.1:{port}");
    let node = bench
        .json(
            reqwest::Method::POST,
            "/admin/node",
            Some(json!({"name": "bench-node", "base_url": node_url, "key": NODE_KEY})),
        )
        .await;
    let node_id = node["id"].as_str().unwrap().to_owned();
    let binary = std::env::current_exe().expect("own path").with_file_name("nubo-slave");
    let master_url = bench.server.base.trim_end_matches("/api/v1").to_owned();
    let process = NodeProcess(
        Command::new(&binary)
            .env_clear()
            .env("NUBO_LISTEN", format!("127.0.0.1:{port}"))
            .env("NUBO_DATA_DIR", &node_dir)
            .env("NUBO_MASTER_URL", &master_url)
            .env("NUBO_NODE_ID", &node_id)
            .env("NUBO_NODE_KEY", NODE_KEY)
            .env("NUBO_LOG_LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {}: {e} (cargo build --release --workspace --bins)", binary.display())
            }),
    );
    let mut online = false;
    for _ in 0..100 {
        let response = bench
            .client
            .post(format!("{}/admin/node/{node_id}/test", bench.server.base))
            .bearer_auth(&bench.token)
            .send()
            .await;
        if response.is_ok_and(|r| r.status().is_success()) {
            online = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(online, "the node answers the master's ping");
    let policy = bench
        .json(
            reqwest::Method::POST,
            "/admin/policy",
            Some(json!({"name": "on node", "type": "local", "chunk_size": 8 * MIB, "node_id": node_id})),
        )
        .await;
    let policy_id = policy["id"].as_str().unwrap().to_owned();
    let mut policies = admins_group(bench).await["policy_ids"].as_array().unwrap().clone();
    policies.push(Value::String(policy_id.clone()));
    set_admin_policies(bench, policies).await;
    BenchNode { process, dir: node_dir, policy_id }
}

pub(crate) async fn admins_group(bench: &Bench) -> Value {
    let groups = bench.json(reqwest::Method::GET, "/admin/group", None).await;
    groups.as_array().unwrap().iter().find(|g| g["is_admin"] == true).unwrap().clone()
}

/// Gives the administrators' group these policies, in this order (the first is the default).
pub(crate) async fn set_admin_policies(bench: &Bench, policies: Vec<Value>) {
    let admins = admins_group(bench).await;
    bench
        .json(reqwest::Method::PUT, &format!("/admin/group/{}", admins["id"].as_str().unwrap()),
            Some(json!({"name": admins["name"], "is_admin": true, "max_storage": 4_i64 << 40, "permissions": admins["permissions"], "policy_ids": policies})))
        .await;
}

pub async fn run() {
    let (bench, _owner) = start_signed_in().await;
    let BenchNode { process: _node, dir: node_dir, policy_id: node_policy } = start_node(&bench).await;

    std::fs::create_dir_all(&node_dir).expect("node dir");
    let ceiling = dd_write(&node_dir);
    println!("ceiling: dd write 1 GiB into the node's directory (fdatasync): {ceiling:.0} MiB/s");

    let master_pid = bench.server.pid();
    let mut rows = Vec::new();
    for streams in [1, 2] {
        let cpu_before = cpu_seconds(master_pid);
        let (rate, _) = upload_direct(&bench, &format!("direct-{streams}.bin"), GIB, streams, &node_policy).await;
        let master_cpu = cpu_seconds(master_pid) - cpu_before;
        println!(
            "direct to the node, {streams} stream(s): {rate:.0} MiB/s ({:.0}% of the ceiling), master CPU {master_cpu:.2} s",
            rate / ceiling * 100.0
        );
        rows.push((format!("1 GiB direct to the node, {streams} stream(s)"), rate, Some(master_cpu)));
    }
    for streams in [1, 2] {
        let cpu_before = cpu_seconds(master_pid);
        let (rate, _) = bench.upload(&format!("relayed-{streams}.bin"), GIB, streams).await;
        let master_cpu = cpu_seconds(master_pid) - cpu_before;
        println!(
            "through the master to its own disk, {streams} stream(s): {rate:.0} MiB/s, master CPU {master_cpu:.2} s"
        );
        rows.push((format!("1 GiB through the master, {streams} stream(s)"), rate, Some(master_cpu)));
    }

    println!("\n| workload | MiB/s | % of node disk ceiling | master CPU s |");
    println!("|---|---:|---:|---:|");
    println!("| dd write 1 GiB into the node's directory (fdatasync) | {ceiling:.0} | 100% | |");
    for (label, rate, cpu) in rows {
        let cpu = cpu.map(|c| format!("{c:.2}")).unwrap_or_default();
        println!("| {label} | {rate:.0} | {:.0}% | {cpu} |", rate / ceiling * 100.0);
    }
}
