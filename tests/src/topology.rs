//! The whole cluster as real processes on 127.0.0.1, for the cluster tests and `nubo-bench
//! cluster`: a private `redis-server`, a fresh PostgreSQL database, the `nubo-s3-server`, one or
//! more `nubo-master serve` processes (one secret, database, Redis and data directory), nginx as
//! a round-robin balancer in front of them, and `nubo-slave` nodes registered with the masters,
//! with a storage policy on each node and one on S3. Every process can be killed with SIGKILL
//! and started again on its port and data directory; all are killed when the [`Topology`] drops.
//!
//! The balancer names the master that answered in the `X-Nubo-Upstream` response header (its
//! `$upstream_addr`), so a test can see requests alternate; [`Topology::answered_by`] reads it.

use std::fs::OpenOptions;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::files::SMALL_CHUNK;
use crate::{Backend, Session, TestApp, TestDatabase, services_required, test_config, test_secret};

/// The environment variables the harness starts masters and nodes with (their configuration
/// keys upper-cased with `NUBO_`), in one place so a compose file can be matched against them.
pub mod env {
    pub const LISTEN: &str = "NUBO_LISTEN";
    pub const DATA_DIR: &str = "NUBO_DATA_DIR";
    pub const LOG_LEVEL: &str = "NUBO_LOG_LEVEL";
    pub const DATABASE_URL: &str = "NUBO_DATABASE_URL";
    pub const REDIS_URL: &str = "NUBO_REDIS_URL";
    pub const REDIS_PREFIX: &str = "NUBO_REDIS_PREFIX";
    pub const SECRET: &str = "NUBO_SECRET";
    pub const ADMIN_EMAIL: &str = "NUBO_ADMIN_EMAIL";
    pub const ADMIN_PASSWORD: &str = "NUBO_ADMIN_PASSWORD";
    pub const TRUSTED_PROXIES: &str = "NUBO_TRUSTED_PROXIES";
    pub const TASK_LEASE_SECONDS: &str = "NUBO_TASK_LEASE_SECONDS";
    pub const TASK_POLL_MILLIS: &str = "NUBO_TASK_POLL_MILLIS";
    pub const UPLOAD_CLAIM_LEASE_SECONDS: &str = "NUBO_UPLOAD_CLAIM_LEASE_SECONDS";
    pub const NODE_CHECK_SECONDS: &str = "NUBO_NODE_CHECK_SECONDS";
    pub const NODE_ID: &str = "NUBO_NODE_ID";
    pub const NODE_KEY: &str = "NUBO_NODE_KEY";
    pub const MASTER_URL: &str = "NUBO_MASTER_URL";
    pub const REPORT_WAIT_SECONDS: &str = "NUBO_REPORT_WAIT_SECONDS";
    pub const REPORT_RETRY_MAX_SECONDS: &str = "NUBO_REPORT_RETRY_MAX_SECONDS";

    /// Every variable a master of the topology is given.
    pub const MASTER: &[&str] = &[
        LISTEN,
        DATA_DIR,
        LOG_LEVEL,
        DATABASE_URL,
        REDIS_URL,
        REDIS_PREFIX,
        SECRET,
        ADMIN_EMAIL,
        ADMIN_PASSWORD,
        TRUSTED_PROXIES,
        TASK_LEASE_SECONDS,
        TASK_POLL_MILLIS,
        UPLOAD_CLAIM_LEASE_SECONDS,
        NODE_CHECK_SECONDS,
    ];
    /// Every variable a node of the topology is given.
    pub const NODE: &[&str] =
        &[LISTEN, DATA_DIR, LOG_LEVEL, NODE_ID, NODE_KEY, MASTER_URL, REPORT_WAIT_SECONDS, REPORT_RETRY_MAX_SECONDS];
}

/// The response header in which the balancer names the master that answered.
pub const UPSTREAM_HEADER: &str = "x-nubo-upstream";

/// The key every node of the topology shares with the masters.
pub const NODE_KEY: &str = "topology-node-key-topology-node-key-0123";

/// Chunk size of the S3 policy: S3's smallest part is 5 MiB.
pub const S3_CHUNK: usize = 8 * 1024 * 1024;

/// The command that builds every binary the topology runs.
pub const BUILD_COMMAND: &str = "cargo build -p nubo-master -p nubo-slave -p nubo-tests --bins";

/// The built binaries the topology starts: the ones next to the running executable (a test in
/// `target/<profile>/deps`, or `nubo-bench` in `target/<profile>`), or in `NUBO_BIN_DIR`.
pub struct Binaries {
    pub master: PathBuf,
    pub slave: PathBuf,
    pub s3_server: PathBuf,
}

impl Binaries {
    /// Finds the binaries; panics naming the command that builds them when one is missing.
    pub fn locate() -> Self {
        let dir = match std::env::var_os("NUBO_BIN_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => {
                let exe = std::env::current_exe().expect("path of the running executable");
                let dir = exe.parent().expect("directory of the executable").to_owned();
                if dir.ends_with("deps") { dir.parent().expect("profile directory").to_owned() } else { dir }
            }
        };
        let find = |name: &str| {
            let path = dir.join(name);
            assert!(
                path.is_file(),
                "{} is missing: build the cluster's binaries first with `{BUILD_COMMAND}` (in the profile of this run)",
                path.display()
            );
            path
        };
        Self { master: find("nubo-master"), slave: find("nubo-slave"), s3_server: find("nubo-s3-server") }
    }
}

/// A system program the topology needs (`redis-server`, `nginx`): the first candidate that
/// exists. `None` when absent and services are not required (the caller skips); panics when
/// they are.
fn system_program(name: &str, candidates: &[&str]) -> Option<PathBuf> {
    if let Some(found) = candidates.iter().map(PathBuf::from).find(|path| path.is_file()) {
        return Some(found);
    }
    assert!(
        !services_required(),
        "{name} is required (NUBO_TEST_REQUIRE_SERVICES=1) but none of {candidates:?} exists"
    );
    eprintln!("skipped: {name} is not installed ({candidates:?})");
    None
}

/// A free TCP port on 127.0.0.1 (free when asked; the process is started on it right after).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port").local_addr().expect("address").port()
}

/// One process of the topology, started again with the same command line, environment, port
/// and data directory after a kill. Killed (SIGKILL) and reaped when dropped.
pub struct Process {
    pub name: String,
    /// Where the process listens.
    pub addr: SocketAddr,
    program: PathBuf,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    /// Its standard output and error, appended across restarts.
    pub log: PathBuf,
    /// The signal that stops it with its children (nginx's workers outlive a SIGKILLed
    /// master); `None`: SIGKILL.
    stop_signal: Option<&'static str>,
    child: Option<Child>,
}

impl Process {
    fn new(
        name: &str,
        addr: SocketAddr,
        program: &Path,
        args: Vec<String>,
        envs: Vec<(String, String)>,
        logs: &Path,
    ) -> Self {
        let log = logs.join(format!("{name}.log"));
        Self {
            name: name.to_owned(),
            addr,
            program: program.to_owned(),
            args,
            envs,
            log,
            stop_signal: None,
            child: None,
        }
    }

    /// Starts the process (it must not be running).
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "{} is already running", self.name);
        let log = OpenOptions::new().create(true).append(true).open(&self.log).expect("log file");
        let child = Command::new(&self.program)
            .args(&self.args)
            .env_clear()
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|err| panic!("{} ({}) does not start: {err}", self.name, self.program.display()));
        self.child = Some(child);
    }

    /// Kills the process (SIGKILL, or its stop signal) and reaps it; nothing when it is not
    /// running.
    pub fn kill(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        if let Some(signal) = self.stop_signal {
            let sent = Command::new("kill").args([format!("-{signal}"), child.id().to_string()]).status();
            if sent.is_ok_and(|status| status.success()) {
                for _ in 0..100 {
                    if child.try_wait().is_ok_and(|status| status.is_some()) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Whether the process was started and has not exited.
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|child| child.try_wait().is_ok_and(|status| status.is_none()))
    }

    /// The end of its log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = text.len().saturating_sub(4000);
        let start = (start..text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
        text[start..].to_owned()
    }

    /// Waits until the process accepts TCP connections; panics with its log when it exits first
    /// or takes more than 60 seconds.
    pub async fn wait_listening(&mut self) {
        for _ in 0..600 {
            if tokio::net::TcpStream::connect(self.addr).await.is_ok() {
                return;
            }
            assert!(self.is_running(), "{} exited while starting:\n{}", self.name, self.log_tail());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{} does not listen on {}:\n{}", self.name, self.addr, self.log_tail());
    }

    /// Waits until `url` answers 2xx; panics with the process's log when it does not in 60 s.
    pub async fn wait_answering(&mut self, url: &str) {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("client");
        for _ in 0..600 {
            if client.get(url).send().await.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            assert!(self.is_running(), "{} exited while starting:\n{}", self.name, self.log_tail());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{} does not answer {url}:\n{}", self.name, self.log_tail());
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What a client needs to reach the S3 server.
#[derive(Debug, Clone)]
pub struct S3Endpoint {
    pub endpoint: String,
    pub region: String,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: String,
    /// The server's directory: object `k` of the bucket is the file `dir/bucket/k`.
    pub dir: PathBuf,
}

/// A storage node of the topology: its process, its id with the masters, and its policy.
pub struct TopologyNode {
    pub id: String,
    pub url: String,
    pub policy_id: String,
    pub dir: PathBuf,
    pub process: Process,
}

impl TopologyNode {
    /// Finished blobs on the node's disk (staging lives under dot-directories of the store).
    pub fn blobs(&self) -> Vec<PathBuf> {
        let root = self.dir.join("blobs");
        crate::files::files_below(&root)
            .into_iter()
            .filter(|path| {
                let relative = path.strip_prefix(&root).unwrap_or(path);
                !relative.components().any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
            })
            .collect()
    }
}

/// How many masters and nodes to start, and settings for the masters beyond the harness's.
pub struct TopologyOptions {
    pub masters: usize,
    pub nodes: usize,
    /// Extra `NUBO_*` variables for every master (they override the harness's).
    pub master_env: Vec<(String, String)>,
}

impl Default for TopologyOptions {
    fn default() -> Self {
        Self { masters: 2, nodes: 2, master_env: Vec::new() }
    }
}

/// A running cluster. Fields drop in order: the processes first, the database and the
/// temporary directory (inside `app`) last.
pub struct Topology {
    pub balancer: Process,
    pub masters: Vec<Process>,
    pub nodes: Vec<TopologyNode>,
    pub s3: Process,
    pub redis: Process,
    pub s3_endpoint: S3Endpoint,
    pub s3_policy_id: String,
    /// The signed-in administrator (through the balancer).
    pub admin: Session,
    /// A client of the balancer: every helper of [`TestApp`] goes through it.
    pub app: TestApp,
}

impl Topology {
    /// Starts the default topology (two masters, two nodes); `None` when PostgreSQL, Redis or
    /// nginx is unavailable and services are not required (the test skips).
    pub async fn start() -> Option<Self> {
        Self::start_with(TopologyOptions::default()).await
    }

    /// Starts a topology shaped by `options`; see [`Topology::start`].
    pub async fn start_with(options: TopologyOptions) -> Option<Self> {
        let redis_server = system_program("redis-server", &["/usr/bin/redis-server", "/usr/local/bin/redis-server"])?;
        let nginx = system_program("nginx", &["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"])?;
        let binaries = Binaries::locate();
        let database = TestDatabase::create(Backend::Postgres).await?;
        let root = database.dir.path().to_owned();
        let logs = root.join("logs");
        std::fs::create_dir_all(&logs).expect("log directory");
        let local = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));

        let redis_addr = local(free_port());
        let mut redis = Process::new(
            "redis",
            redis_addr,
            &redis_server,
            ["--bind", "127.0.0.1", "--port", &redis_addr.port().to_string(), "--save", "", "--appendonly", "no"]
                .map(str::to_owned)
                .to_vec(),
            Vec::new(),
            &logs,
        );
        redis.start();
        redis.wait_listening().await;
        let redis_url = format!("redis://{redis_addr}");

        let s3_addr = local(free_port());
        let s3_endpoint = S3Endpoint {
            endpoint: format!("http://{s3_addr}"),
            region: "us-east-1".into(),
            bucket: "nubo-cluster".into(),
            access_key: format!("AK{}", uuid::Uuid::new_v4().simple()),
            secret_key: format!("SK{}", uuid::Uuid::new_v4().simple()),
            dir: root.join("s3"),
        };
        let mut s3 = Process::new(
            "s3",
            s3_addr,
            &binaries.s3_server,
            vec![
                "--listen".into(),
                s3_addr.to_string(),
                "--dir".into(),
                s3_endpoint.dir.display().to_string(),
                "--bucket".into(),
                s3_endpoint.bucket.clone(),
                "--access-key".into(),
                s3_endpoint.access_key.clone(),
                "--secret-key".into(),
                s3_endpoint.secret_key.clone(),
            ],
            Vec::new(),
            &logs,
        );
        s3.start();
        s3.wait_listening().await;

        // The masters: one configuration, each on its own port. The first alone creates the
        // schema and the administrator; the others start once it answers.
        let mut config = test_config(&database);
        config.redis_url = Some(redis_url.clone());
        config.secret = Some(test_secret());
        config.data_dir = root.join("master-data");
        let mut master_env: Vec<(String, String)> = vec![
            (env::DATA_DIR.into(), config.data_dir.display().to_string()),
            (env::LOG_LEVEL.into(), "warn".into()),
            (env::DATABASE_URL.into(), database.url.clone()),
            (env::REDIS_URL.into(), redis_url.clone()),
            (env::REDIS_PREFIX.into(), config.redis_prefix.clone()),
            (env::SECRET.into(), config.secret.as_ref().expect("secret").expose().to_owned()),
            (env::ADMIN_EMAIL.into(), config.admin_email.clone()),
            (env::ADMIN_PASSWORD.into(), crate::ADMIN_PASSWORD.into()),
            // The balancer forwards the client's address; believe it from there only.
            (env::TRUSTED_PROXIES.into(), "127.0.0.1".into()),
            (env::TASK_LEASE_SECONDS.into(), "5".into()),
            (env::TASK_POLL_MILLIS.into(), "100".into()),
            (env::UPLOAD_CLAIM_LEASE_SECONDS.into(), "2".into()),
            (env::NODE_CHECK_SECONDS.into(), "1".into()),
        ];
        for (key, value) in options.master_env {
            master_env.retain(|(k, _)| *k != key);
            master_env.push((key, value));
        }
        let mut masters = Vec::new();
        for index in 0..options.masters.max(1) {
            let addr = local(free_port());
            let mut envs = master_env.clone();
            envs.push((env::LISTEN.into(), addr.to_string()));
            let mut master =
                Process::new(&format!("master-{index}"), addr, &binaries.master, vec!["serve".into()], envs, &logs);
            master.start();
            master.wait_answering(&format!("http://{addr}/api/v1/site/ping")).await;
            masters.push(master);
        }

        let balancer_addr = local(free_port());
        let nginx_dir = root.join("nginx");
        std::fs::create_dir_all(&nginx_dir).expect("nginx directory");
        let conf = nginx_dir.join("nginx.conf");
        let upstreams: Vec<SocketAddr> = masters.iter().map(|m| m.addr).collect();
        std::fs::write(&conf, nginx_config(&nginx_dir, balancer_addr, &upstreams)).expect("nginx configuration");
        let mut balancer = Process::new(
            "balancer",
            balancer_addr,
            &nginx,
            vec![
                "-p".into(),
                nginx_dir.display().to_string(),
                "-e".into(),
                nginx_dir.join("error.log").display().to_string(),
                "-c".into(),
                conf.display().to_string(),
            ],
            Vec::new(),
            &logs,
        );
        // SIGTERM: nginx's fast shutdown, which ends its worker too.
        balancer.stop_signal = Some("TERM");
        balancer.start();
        balancer.wait_answering(&format!("http://{balancer_addr}/api/v1/site/ping")).await;

        config.listen = balancer_addr;
        let app = TestApp::external(database, config);
        let admin = app.login_admin().await;

        let mut nodes = Vec::new();
        for index in 0..options.nodes {
            let addr = local(free_port());
            let url = format!("http://{addr}");
            // The node must know the id the masters give it: register first, then start.
            let body = json!({"name": format!("node-{index}"), "base_url": url, "key": NODE_KEY});
            let response = app.call(Method::POST, "/admin/node", Some(&admin.access), Some(body)).await;
            assert_eq!(response.status(), 201, "register node {index}: {}", response.text().await.unwrap_or_default());
            let id = response.json::<Value>().await.expect("node")["id"].as_str().expect("node id").to_owned();
            let dir = root.join(format!("node-{index}"));
            let envs = vec![
                (env::LISTEN.into(), addr.to_string()),
                (env::DATA_DIR.into(), dir.display().to_string()),
                (env::LOG_LEVEL.into(), "warn".into()),
                (env::NODE_ID.into(), id.clone()),
                (env::NODE_KEY.into(), NODE_KEY.into()),
                // Nodes report to the masters through the balancer, like every other client.
                (env::MASTER_URL.into(), app.base_url.clone()),
                (env::REPORT_WAIT_SECONDS.into(), "5".into()),
                (env::REPORT_RETRY_MAX_SECONDS.into(), "1".into()),
            ];
            let mut process = Process::new(&format!("node-{index}"), addr, &binaries.slave, Vec::new(), envs, &logs);
            process.start();
            process.wait_listening().await;
            let checked = app.call(Method::POST, &format!("/admin/node/{id}/test"), Some(&admin.access), None).await;
            assert_eq!(checked.status(), 200, "check node {index}: {}", checked.text().await.unwrap_or_default());
            let policy = json!({"name": format!("on node-{index}"), "type": "local", "chunk_size": SMALL_CHUNK,
                                "is_private": true, "node_id": id});
            let policy_id = create_policy(&app, &admin, policy).await;
            nodes.push(TopologyNode { id, url, policy_id, dir, process });
        }
        let s3_policy = json!({"name": "on s3", "type": "s3", "chunk_size": S3_CHUNK, "is_private": true,
            "options": {"endpoint": s3_endpoint.endpoint, "region": s3_endpoint.region, "bucket": s3_endpoint.bucket,
                        "path_style": true, "access_key": s3_endpoint.access_key, "secret_key": s3_endpoint.secret_key}});
        let s3_policy_id = create_policy(&app, &admin, s3_policy).await;
        let mut policy_ids: Vec<&str> = nodes.iter().map(|n| n.policy_id.as_str()).collect();
        policy_ids.push(&s3_policy_id);
        app.set_user_group(&admin, json!({ "policy_ids": policy_ids })).await;

        Some(Self { balancer, masters, nodes, s3, redis, s3_endpoint, s3_policy_id, admin, app })
    }

    /// Which master answered `response` (its index in [`Topology::masters`]), from the
    /// balancer's `X-Nubo-Upstream` header; `None` when the balancer answered itself.
    pub fn answered_by(&self, response: &reqwest::Response) -> Option<usize> {
        let upstream = response.headers().get(UPSTREAM_HEADER)?.to_str().ok()?;
        // After a retry the header lists every upstream tried ("a, b"); the last one answered.
        let last = upstream.rsplit(',').next()?.trim();
        self.masters.iter().position(|m| m.addr.to_string() == last)
    }

    /// Kills master `index` with SIGKILL.
    pub fn kill_master(&mut self, index: usize) {
        self.masters[index].kill();
    }

    /// Starts master `index` again on its port and waits until it answers.
    pub async fn start_master(&mut self, index: usize) {
        let master = &mut self.masters[index];
        master.start();
        let url = format!("http://{}/api/v1/site/ping", master.addr);
        master.wait_answering(&url).await;
    }

    /// Kills node `index` with SIGKILL.
    pub fn kill_node(&mut self, index: usize) {
        self.nodes[index].process.kill();
    }

    /// Starts node `index` again on its port and data directory and waits until it listens.
    pub async fn start_node(&mut self, index: usize) {
        let process = &mut self.nodes[index].process;
        process.start();
        process.wait_listening().await;
    }

    /// Kills Redis with SIGKILL and starts it again, empty, on its port.
    pub async fn restart_redis(&mut self) {
        self.redis.kill();
        self.redis.start();
        self.redis.wait_listening().await;
    }

    /// Objects stored on the S3 server (multipart leftovers included).
    pub fn s3_objects(&self) -> Vec<PathBuf> {
        let bucket = self.s3_endpoint.dir.join(&self.s3_endpoint.bucket);
        let stored = crate::files::files_below(&bucket).into_iter().filter(|p| !p.to_string_lossy().contains(".s3s"));
        let uploads = std::fs::read_dir(&self.s3_endpoint.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().starts_with(".upload"))
            .map(|entry| entry.path());
        stored.chain(uploads).collect()
    }
}

async fn create_policy(app: &TestApp, admin: &Session, policy: Value) -> String {
    let response = app.call(Method::POST, "/admin/policy", Some(&admin.access), Some(policy)).await;
    assert_eq!(response.status(), 201, "create policy: {}", response.text().await.unwrap_or_default());
    response.json::<Value>().await.expect("policy")["id"].as_str().expect("policy id").to_owned()
}

/// The balancer's configuration, shared with `deploy/cluster.sh`.
const NGINX_TEMPLATE: &str = include_str!("../../deploy/nginx-cluster.conf.in");

/// nginx as a round-robin balancer without stickiness over `upstreams`, run by the current
/// user with everything it writes in `dir` (see the template for what each setting is for).
fn nginx_config(dir: &Path, listen: SocketAddr, upstreams: &[SocketAddr]) -> String {
    // Run as root, nginx would hand its worker to `nobody`, who cannot write into `dir`.
    let user = if std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) { "user root;\n" } else { "" };
    let servers: Vec<String> =
        upstreams.iter().map(|addr| format!("        server {addr} max_fails=1 fail_timeout=1s;")).collect();
    NGINX_TEMPLATE
        .replace("@USER@", user)
        .replace("@DIR@", &dir.display().to_string())
        .replace("@LISTEN@", &listen.to_string())
        .replace("@UPSTREAMS@", &servers.join("\n"))
}
