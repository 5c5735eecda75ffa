//! The `nubo-master` binary as operators run it: start-up refusals, `migrate`, `user
//! create-admin`, and a real `serve` that answers over HTTP and stops cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BINARY: &str = env!("CARGO_BIN_EXE_nubo-master");

/// The binary with no inherited `NUBO_*` variables, run inside `dir`.
fn nubo(dir: &Path) -> Command {
    let mut command = Command::new(BINARY);
    command.env_clear().current_dir(dir).env("NUBO_LOG_LEVEL", "info");
    command
}

fn run(command: &mut Command) -> Output {
    command.output().expect("nubo-master runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn serve_refuses_to_start_without_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(nubo(dir.path()).arg("serve"));
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.contains("NUBO_SECRET is not set"), "{stderr}");
    assert!(stderr.contains("head -c 48 /dev/urandom | base64"), "says how to make one: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one clear line: {stderr}");
    assert!(!dir.path().join("data").exists(), "nothing created before refusing");
}

#[test]
fn serve_refuses_a_short_secret() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(nubo(dir.path()).env("NUBO_SECRET", "only-20-bytes-long!!"));
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.contains("too short (20 bytes)") && stderr.contains("at least 32"), "{stderr}");
}

#[test]
fn migrate_applies_once_and_again_as_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    // Every migration of the embedded database, counted from the files this build embeds.
    let migrations = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite")).unwrap().count();
    for _ in 0..2 {
        let output = run(nubo(dir.path()).arg("migrate"));
        assert!(output.status.success(), "{}", text(&output.stderr));
        assert!(
            text(&output.stdout).contains(&format!("database is up to date ({migrations} migrations applied)")),
            "{}",
            text(&output.stdout)
        );
    }
    assert!(dir.path().join("data/nubo.db").exists(), "default database is data/nubo.db");
}

#[test]
fn create_admin_stores_the_account_and_refuses_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("password"), "operator-chosen-password\n").unwrap();
    let create = |extra: &[&str]| {
        let mut command = nubo(dir.path());
        command.args(["user", "create-admin", "--email", "ops@example.com"]).args(extra);
        run(&mut command)
    };
    let output = create(&["--password-file", "password"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("created administrator ops@example.com"));
    assert!(!text(&output.stdout).contains("operator-chosen-password"), "a given password is never printed");

    let again = create(&[]);
    assert!(!again.status.success());
    assert!(text(&again.stderr).contains("already exists"), "{}", text(&again.stderr));

    let generated = nubo(dir.path()).args(["user", "create-admin", "--email", "ops2@example.com"]).output().unwrap();
    assert!(generated.status.success());
    assert!(text(&generated.stdout).contains("generated password (shown once): "));
}

/// Waits for the "listening on http://ADDR" log line (an address one can open as it is);
/// answers ADDR and the lines logged until then.
fn wait_for_address(lines: &mpsc::Receiver<String>) -> (String, Vec<String>) {
    let mut seen = Vec::new();
    loop {
        let line = lines.recv_timeout(Duration::from_secs(30)).expect("server logs its address");
        if let Some(rest) = line.split("listening on ").nth(1) {
            let url = rest.split_whitespace().next().unwrap();
            let address = url.strip_prefix("http://").unwrap_or_else(|| panic!("logged as a URL: {line}"));
            return (address.to_owned(), seen);
        }
        seen.push(line);
    }
}

/// Starts `command` with its log piped; answers the child and its log lines.
fn spawn_logging(command: &mut Command) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = command.stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    (child, lines)
}

/// The permission bits of `path`.
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn init_creates_a_secret_only_its_owner_reads_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("data/secret");
    let first = run(nubo(dir.path()).arg("init"));
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(text(&first.stdout).contains("created the signing secret in ./data/secret"), "{}", text(&first.stdout));
    assert_eq!(mode(&secret), 0o600, "readable by its owner only");
    let written = std::fs::read_to_string(&secret).unwrap();
    assert!(written.trim().len() >= 32, "long enough for serve: {} bytes", written.trim().len());

    let second = run(nubo(dir.path()).arg("init"));
    assert!(second.status.success(), "{}", text(&second.stderr));
    assert!(text(&second.stdout).contains("kept the signing secret"), "{}", text(&second.stdout));
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), written, "not overwritten");

    let plain = run(nubo(dir.path()).arg("serve"));
    assert!(!plain.status.success(), "serve without a configured secret still refuses");
    assert!(text(&plain.stderr).contains("NUBO_SECRET is not set"), "{}", text(&plain.stderr));
}

#[tokio::test]
async fn serve_with_init_secret_starts_in_an_empty_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, lines) =
        spawn_logging(nubo(dir.path()).env("NUBO_LISTEN", "127.0.0.1:0").args(["serve", "--init-secret"]));
    let (address, log) = tokio::task::spawn_blocking(move || wait_for_address(&lines)).await.unwrap();
    assert!(log.iter().any(|l| l.contains("created the signing secret")), "{log:?}");
    assert_eq!(mode(&dir.path().join("data/secret")), 0o600);
    let ping = reqwest::get(format!("http://{address}/api/v1/site/ping")).await.unwrap();
    assert!(ping.status().is_success());

    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = tokio::task::spawn_blocking(move || child.wait()).await.unwrap().unwrap();
    assert!(status.success(), "graceful exit on SIGTERM, got {status}");
}

#[tokio::test]
async fn serve_reads_the_config_file_answers_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret"), "x".repeat(48)).unwrap();
    std::fs::write(
        dir.path().join("nubo.toml"),
        "listen = \"127.0.0.1:0\"\ndata_dir = \"store\"\nsecret_file = \"secret\"\nadmin_email = \"root@example.com\"\n",
    )
    .unwrap();
    let (mut child, lines) = spawn_logging(nubo(dir.path()).env("NUBO_CONFIG", "nubo.toml"));
    let (address, log) = tokio::task::spawn_blocking(move || wait_for_address(&lines)).await.unwrap();

    let ping: serde_json::Value =
        reqwest::get(format!("http://{address}/api/v1/site/ping")).await.unwrap().json().await.unwrap();
    assert_eq!(ping["version"], env!("CARGO_PKG_VERSION"));
    assert!(dir.path().join("store/nubo.db").exists(), "data_dir from the file is used");
    assert!(log.iter().any(|l| l.contains("generated password")), "first administrator's password is logged once");

    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = tokio::task::spawn_blocking(move || child.wait()).await.unwrap().unwrap();
    assert!(status.success(), "graceful exit on SIGTERM, got {status}");
}
