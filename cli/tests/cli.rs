//! The `nubo` binary against a real master (and a real storage node), on SQLite and
//! PostgreSQL: sign-in (with a second factor), private and refreshed tokens, uploads and
//! downloads of multi-chunk files and folder trees compared byte for byte, uploads straight to
//! a node, resumed uploads and downloads, the tree commands, shares, search, `--json` and the
//! exit codes scripts rely on. Each test runs the built binary with its own config directory.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nubo_tests::cluster::TestNode;
use nubo_tests::files::{SMALL_CHUNK, content, files_below};
use nubo_tests::{Session, TestApp, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};
use support::Run;
use tempfile::TempDir;
use totp_rs::Totp;

const PASSWORD: &str = "a-long-password";

on_every_backend!(
    signs_in_keeps_the_tokens_private_refreshes_them_and_signs_out,
    signs_in_with_a_second_factor,
    puts_and_gets_multi_chunk_files_and_folder_trees,
    resumes_an_interrupted_put_and_an_interrupted_get,
    puts_straight_to_a_storage_node_and_resumes_there,
    moves_copies_removes_shares_and_searches,
    exit_codes_say_what_went_wrong,
    get_overwrite_downloads_again_a_damaged_copy_with_the_remote_size_and_time,
    moves_and_copies_into_another_folder_under_a_new_name_whatever_names_are_taken_on_the_way,
    names_with_a_backslash_are_reached_by_every_command,
    a_plain_http_server_typed_without_a_scheme_is_named_as_such,
    a_transfer_that_started_over_does_not_claim_it_resumed,
);

/// The binary with a config directory and a working directory of its own.
struct Cli {
    config: TempDir,
    work: TempDir,
}

impl Cli {
    fn new() -> Cli {
        Cli { config: tempfile::tempdir().unwrap(), work: tempfile::tempdir().unwrap() }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.work.path().join(relative)
    }

    async fn run_with(&self, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Run {
        use tokio::io::AsyncWriteExt;
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_nubo"));
        command
            .args(args)
            .current_dir(self.work.path())
            .env("XDG_CONFIG_HOME", self.config.path())
            .env_remove("NUBO_CLI_STOP_AFTER_CHUNKS")
            .env_remove("NUBO_CLI_STOP_AFTER_BYTES")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("the nubo binary runs");
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).await.unwrap();
        }
        drop(input);
        let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .expect("nubo finishes within two minutes")
            .unwrap();
        Run::of(output)
    }

    async fn run(&self, args: &[&str]) -> Run {
        self.run_with(args, &[], None).await
    }

    async fn login(&self, app: &TestApp, email: &str) -> Run {
        self.run_with(
            &["login", &app.base_url, "--email", email, "--password-stdin"],
            &[],
            Some(&format!("{PASSWORD}\n")),
        )
        .await
    }

    /// Registers `email` and signs the binary in as it.
    async fn signed_in(app: &TestApp, email: &str) -> (Cli, Session) {
        let session = app.register(email, PASSWORD).await;
        let cli = Cli::new();
        let run = cli.login(app, email).await;
        assert_eq!(run.code, 0, "login: {}", run.stderr);
        (cli, session)
    }

    fn credentials_path(&self) -> PathBuf {
        self.config.path().join("nubo").join("credentials.json")
    }

    fn credentials(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.credentials_path()).unwrap()).unwrap()
    }

    fn write(&self, relative: &str, bytes: &[u8]) -> PathBuf {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

/// Every file and folder below `root`: relative path to its bytes (`None` for a folder).
fn tree_of(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut tree = BTreeMap::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            if path.is_dir() {
                tree.insert(relative, None);
                pending.push(path);
            } else {
                tree.insert(relative, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    tree
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The object at `path` as the server lists it (through the API, not the binary).
async fn remote_object(app: &TestApp, session: &Session, path: &str) -> Option<Value> {
    let (parent, name) = path.rsplit_once('/').unwrap();
    let response = app.call(Method::GET, &format!("/directory{parent}?limit=1000"), Some(&session.access), None).await;
    if response.status() != 200 {
        return None;
    }
    let listing: Value = response.json().await.unwrap();
    listing["items"].as_array().unwrap().iter().find(|item| item["name"] == name).cloned()
}

async fn remote_bytes(app: &TestApp, session: &Session, path: &str) -> Vec<u8> {
    let object = remote_object(app, session, path).await.unwrap_or_else(|| panic!("{path} is on the server"));
    app.download(session, object["id"].as_str().unwrap()).await
}

/// The names in the remote folder at `path` (through the API).
async fn remote_names(app: &TestApp, session: &Session, path: &str) -> Vec<String> {
    let listing: Value = app
        .call(Method::GET, &format!("/directory{path}?limit=1000"), Some(&session.access), None)
        .await
        .json()
        .await
        .unwrap();
    listing["items"].as_array().unwrap().iter().map(|item| item["name"].as_str().unwrap().to_owned()).collect()
}

/// A file stored under `name` as the server kept names before today's rules refused some of them
/// (the API would refuse it now, so the name is set in the database).
async fn stored_under_an_old_name(app: &TestApp, session: &Session, parent: &str, name: &str, bytes: &[u8]) {
    let file = app.upload(session, parent, "placeholder-for-an-old-name", bytes).await;
    let id = file["id"].as_str().unwrap();
    app.sql(&format!("UPDATE objects SET name = '{name}' WHERE id = '{id}'")).await;
}

async fn signs_in_keeps_the_tokens_private_refreshes_them_and_signs_out(app: TestApp) {
    app.register("cli@nubo.test", PASSWORD).await;
    let cli = Cli::new();
    let wrong = cli
        .run_with(
            &["--json", "login", &app.base_url, "--email", "cli@nubo.test", "--password-stdin"],
            &[],
            Some("nope\n"),
        )
        .await;
    assert_eq!(wrong.code, 3, "a wrong password needs another sign-in");
    assert_eq!(wrong.error()["code"], "auth.invalid_credentials");
    assert!(!cli.credentials_path().exists());

    let run = cli.login(&app, "cli@nubo.test").await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(mode_of(&cli.credentials_path()), 0o600, "only the user reads the tokens");
    assert_eq!(mode_of(cli.credentials_path().parent().unwrap()), 0o700);
    let first = cli.credentials();
    assert_eq!(first["server"], app.base_url.as_str());
    let me = cli.run(&["--json", "whoami"]).await.json();
    assert_eq!(me["email"], "cli@nubo.test");

    // An access token the server refuses: the refresh token gets a new pair, which is kept.
    let mut stale = first.clone();
    stale["access_token"] = json!("not-a-token");
    std::fs::write(cli.credentials_path(), stale.to_string()).unwrap();
    cli.run(&["--json", "ls"]).await.json();
    let second = cli.credentials();
    assert_ne!(second["access_token"], "not-a-token");
    assert_ne!(second["refresh_token"], first["refresh_token"], "refresh tokens rotate");
    assert_eq!(mode_of(&cli.credentials_path()), 0o600, "a rewritten file stays private");

    // An access token past its expiry is refreshed before it is sent.
    let mut expired = second.clone();
    expired["access_expires"] = json!(0);
    std::fs::write(cli.credentials_path(), expired.to_string()).unwrap();
    cli.run(&["--json", "ls"]).await.json();
    let third = cli.credentials();
    assert_ne!(third["refresh_token"], second["refresh_token"]);
    assert!(third["access_expires"].as_i64().unwrap() > 0);

    // Several processes finding the token expired at once refresh it once between them: a
    // refresh token traded twice would end the session for all of them.
    let mut expired = cli.credentials();
    expired["access_expires"] = json!(0);
    std::fs::write(cli.credentials_path(), expired.to_string()).unwrap();
    let runs = futures_util::future::join_all((0..6).map(|_| cli.run(&["--json", "whoami"]))).await;
    for run in &runs {
        assert_eq!(run.code, 0, "every process keeps the session: {}", run.stderr);
    }
    assert_eq!(cli.run(&["--json", "whoami"]).await.code, 0, "and it lives on");
    let third = cli.credentials();

    let out = cli.run(&["--json", "logout"]).await.json();
    assert_eq!(out["server_session_ended"], true);
    assert!(!cli.credentials_path().exists());
    let refused = app.call(Method::POST, "/user/session/refresh", third["refresh_token"].as_str(), None).await;
    assert_eq!(refused.status(), 401, "signing out ends the session on the server");
    assert_eq!(cli.run(&["ls"]).await.code, 3);
}

const STEP: u64 = 30;

/// The current 30-second step, waiting for the next one when this one is about to end.
async fn aligned_step() -> u64 {
    let now = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    if now() % STEP >= STEP - 10 {
        tokio::time::sleep(Duration::from_secs(STEP - now() % STEP) + Duration::from_millis(200)).await;
    }
    now() / STEP
}

async fn signs_in_with_a_second_factor(app: TestApp) {
    let session = app.register("second@nubo.test", PASSWORD).await;
    let setup: Value =
        app.call(Method::GET, "/user/settings/2fa", Some(&session.access), None).await.json().await.unwrap();
    let totp = Totp::from_url(setup["uri"].as_str().unwrap()).unwrap();
    let step = aligned_step().await;
    let code = |step: u64| totp.generate(step * STEP).to_string();
    let enabled = app
        .call(Method::POST, "/user/settings/2fa", Some(&session.access), Some(json!({"code": code(step - 1)})))
        .await;
    assert_eq!(enabled.status(), 200);

    let cli = Cli::new();
    let args = ["--json", "login", &app.base_url, "--email", "second@nubo.test", "--password-stdin"];
    let asked = cli.run_with(&args, &[], Some(&format!("{PASSWORD}\n"))).await;
    assert_eq!(asked.code, 3, "without the code the sign-in is not complete");
    assert_eq!(asked.error()["code"], "auth.two_factor_required");
    assert!(asked.error()["hint"].as_str().unwrap().contains("--totp"));
    assert!(!cli.credentials_path().exists());

    let current = code(step);
    let mut with_code = args.to_vec();
    with_code.extend(["--totp", &current]);
    let signed_in = cli.run_with(&with_code, &[], Some(&format!("{PASSWORD}\n"))).await.json();
    assert_eq!(signed_in["email"], "second@nubo.test");
    assert_eq!(cli.run(&["--json", "whoami"]).await.json()["two_factor_enabled"], true);
}

async fn get_overwrite_downloads_again_a_damaged_copy_with_the_remote_size_and_time(app: TestApp) {
    let (cli, _session) = Cli::signed_in(&app, "damaged@nubo.test").await;
    let original = content(10_000, 7);
    cli.write("photo.raw", &original);
    assert_eq!(cli.run(&["--json", "put", "photo.raw", "/"]).await.code, 0);
    assert_eq!(cli.run(&["--json", "get", "/photo.raw", "out/"]).await.code, 0);
    let local = cli.path("out/photo.raw");
    assert_eq!(std::fs::read(&local).unwrap(), original);

    // Bit rot: one byte flips, the size and the modification time stay.
    let modified = std::fs::metadata(&local).unwrap().modified().unwrap();
    let mut damaged = original.clone();
    damaged[5_000] ^= 0xff;
    std::fs::write(&local, &damaged).unwrap();
    std::fs::File::options().write(true).open(&local).unwrap().set_modified(modified).unwrap();

    let got = cli.run(&["--json", "get", "--overwrite", "/photo.raw", "out/"]).await.json();
    assert_eq!(got[0]["status"], "downloaded", "{got}");
    assert_eq!(std::fs::read(&local).unwrap(), original, "the server's bytes are back");
    let again = cli.run(&["--json", "get", "--overwrite", "/photo.raw", "out/"]).await.json();
    assert_eq!(again[0]["status"], "unchanged", "a sound copy is kept: {again}");
}

async fn puts_and_gets_multi_chunk_files_and_folder_trees(app: TestApp) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    let (cli, session) = Cli::signed_in(&app, "trees@nubo.test").await;
    let big = content(5 * SMALL_CHUNK + 123, 1);
    cli.write("big.bin", &big);
    cli.write("tree/a.txt", b"alpha");
    cli.write("tree/sub/b.bin", &content(3 * SMALL_CHUNK + 5, 2));
    cli.write("tree/sub/deeper/c.txt", b"");
    std::fs::create_dir_all(cli.path("tree/empty")).unwrap();

    let put = cli.run(&["--json", "put", "big.bin", "tree", "/up/"]).await.json();
    let results = put.as_array().unwrap();
    assert_eq!(results.len(), 4);
    let big_result = results.iter().find(|r| r["remote"] == "/up/big.bin").unwrap();
    assert_eq!((big_result["method"].as_str(), big_result["total_chunks"].as_u64()), (Some("session"), Some(6)));
    assert_eq!(big_result["chunks_sent"], 6);
    let small = results.iter().find(|r| r["remote"] == "/up/tree/a.txt").unwrap();
    assert_eq!(small["method"], "single", "a small file goes in one request");
    assert_eq!(remote_bytes(&app, &session, "/up/big.bin").await, big, "the server holds the same bytes");

    let listing = cli.run(&["--json", "ls", "/up/tree/sub"]).await.json();
    let names: Vec<&str> = listing["items"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["deeper", "b.bin"], "folders first");
    assert!(remote_object(&app, &session, "/up/tree/empty").await.is_some(), "empty folders are made too");

    let got = cli.run(&["--json", "get", "/up/big.bin", "/up/tree", "out/"]).await.json();
    assert_eq!(got.as_array().unwrap().len(), 4);
    assert_eq!(std::fs::read(cli.path("out/big.bin")).unwrap(), big);
    assert_eq!(tree_of(&cli.path("out/tree")), tree_of(&cli.path("tree")), "the same tree, byte for byte");
    assert!(files_below(&cli.path("out")).iter().all(|p| p.extension().is_none_or(|e| e != "part")));

    // Running either again finds nothing left to do.
    let again = cli.run(&["--json", "put", "big.bin", "tree", "/up/"]).await.json();
    assert!(again.as_array().unwrap().iter().all(|r| r["status"] == "unchanged"), "{again}");
    let again = cli.run(&["--json", "get", "/up/big.bin", "/up/tree", "out/"]).await.json();
    assert!(again.as_array().unwrap().iter().all(|r| r["status"] == "unchanged"), "{again}");

    // Other content under a taken name needs --overwrite.
    cli.write("big.bin", &content(4 * SMALL_CHUNK, 3));
    let refused = cli.run(&["--json", "put", "big.bin", "/up/"]).await;
    assert_eq!(refused.code, 5);
    assert_eq!(refused.error()["code"], "object.name_taken");
    cli.run(&["--json", "put", "--overwrite", "big.bin", "/up/"]).await.json();
    assert_eq!(remote_bytes(&app, &session, "/up/big.bin").await, content(4 * SMALL_CHUNK, 3));
}

async fn resumes_an_interrupted_put_and_an_interrupted_get(app: TestApp) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    let (cli, session) = Cli::signed_in(&app, "resume@nubo.test").await;
    let bytes = content(20 * SMALL_CHUNK, 7);
    cli.write("large.bin", &bytes);

    let stop = [("NUBO_CLI_STOP_AFTER_CHUNKS", "5")];
    let stopped = cli.run_with(&["put", "-P", "1", "large.bin", "/"], &stop, None).await;
    assert_eq!(stopped.code, 6, "an interrupted transfer exits like a broken connection: {}", stopped.stderr);
    assert!(remote_object(&app, &session, "/large.bin").await.is_none(), "not complete yet");
    let resumed = cli.run(&["--json", "put", "large.bin", "/"]).await.json();
    let result = &resumed[0];
    assert_eq!(result["resumed"], true, "the same upload session goes on");
    assert_eq!((result["chunks_sent"].as_u64(), result["total_chunks"].as_u64()), (Some(15), Some(20)));
    assert_eq!(remote_bytes(&app, &session, "/large.bin").await, bytes);
    let records = cli.config.path().join("nubo").join("resume");
    assert_eq!(files_below(&records).len(), 0, "a finished upload leaves no resume record");

    let stop = [("NUBO_CLI_STOP_AFTER_BYTES", "300000")];
    let stopped = cli.run_with(&["get", "-P", "1", "/large.bin", "copy.bin"], &stop, None).await;
    assert_eq!(stopped.code, 6);
    assert!(!cli.path("copy.bin").exists(), "an unfinished download is never under its name");
    let part = std::fs::metadata(cli.path("copy.bin.part")).expect("a .part file").len();
    assert!(part > 0 && part < bytes.len() as u64, "{part} bytes in the part");
    let resumed = cli.run(&["--json", "get", "/large.bin", "copy.bin"]).await.json();
    assert_eq!(resumed[0]["resumed_from"].as_u64(), Some(part), "only the rest was asked for");
    assert_eq!(std::fs::read(cli.path("copy.bin")).unwrap(), bytes);
    assert!(!cli.path("copy.bin.part").exists());

    // A part whose file changed on the server meanwhile is started over, not glued together.
    let stopped = cli.run_with(&["get", "-P", "1", "/large.bin", "again.bin"], &stop, None).await;
    assert_eq!(stopped.code, 6);
    let changed = content(20 * SMALL_CHUNK, 8);
    cli.write("large.bin", &changed);
    cli.run(&["--json", "put", "--overwrite", "large.bin", "/"]).await.json();
    let fresh = cli.run(&["--json", "get", "/large.bin", "again.bin"]).await.json();
    assert_eq!(fresh[0]["status"], "downloaded");
    assert_eq!(std::fs::read(cli.path("again.bin")).unwrap(), changed);
}

async fn puts_straight_to_a_storage_node_and_resumes_there(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    app.use_node_policy(&admin, &node, true).await;
    let (cli, session) = Cli::signed_in(&app, "direct@nubo.test").await;
    let bytes = content(10 * SMALL_CHUNK + 17, 4);
    cli.write("direct.bin", &bytes);

    let put = cli.run(&["--json", "put", "direct.bin", "/"]).await.json();
    assert_eq!(put[0]["method"], "direct", "the session named the node: {put}");
    assert_eq!(put[0]["total_chunks"], 11);
    let on_node: Vec<Vec<u8>> = node.blobs().iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert_eq!(on_node, vec![bytes.clone()], "the bytes are on the node");
    let size = bytes.len() as u64;
    let on_master = files_below(&app.config.data_dir).into_iter().filter(|p| p.metadata().unwrap().len() == size);
    assert_eq!(on_master.count(), 0, "and never on the master");

    let second = content(8 * SMALL_CHUNK, 5);
    cli.write("second.bin", &second);
    let stop = [("NUBO_CLI_STOP_AFTER_CHUNKS", "3")];
    assert_eq!(cli.run_with(&["put", "-P", "1", "second.bin", "/"], &stop, None).await.code, 6);
    let resumed = cli.run(&["--json", "put", "second.bin", "/"]).await.json();
    assert_eq!((resumed[0]["resumed"].as_bool(), resumed[0]["chunks_sent"].as_u64()), (Some(true), Some(5)));
    assert_eq!(remote_bytes(&app, &session, "/second.bin").await, second);

    cli.run(&["--json", "get", "/direct.bin", "/second.bin", "back/"]).await.json();
    assert_eq!(std::fs::read(cli.path("back/direct.bin")).unwrap(), bytes);
    assert_eq!(std::fs::read(cli.path("back/second.bin")).unwrap(), second);
}

async fn moves_copies_removes_shares_and_searches(app: TestApp) {
    let (cli, session) = Cli::signed_in(&app, "tree-ops@nubo.test").await;
    cli.write("notes.txt", b"notes");
    cli.write("docs/readme.md", b"readme");
    cli.run(&["--json", "put", "notes.txt", "docs", "/"]).await.json();
    let made = cli.run(&["--json", "mkdir", "-p", "/x/y"]).await.json();
    assert_eq!(made[0]["path"], "/x/y");
    assert_eq!(cli.run(&["--json", "mkdir", "-p", "/x/y"]).await.code, 0, "-p accepts an existing folder");

    cli.run(&["--json", "mv", "/notes.txt", "/x/"]).await.json();
    assert!(remote_object(&app, &session, "/notes.txt").await.is_none());
    cli.run(&["--json", "mv", "/x/notes.txt", "/x/y/renamed.txt"]).await.json();
    assert_eq!(remote_bytes(&app, &session, "/x/y/renamed.txt").await, b"notes", "moved and renamed");

    let copies = cli.run(&["--json", "cp", "/x/y/renamed.txt", "/docs"]).await.json();
    assert_eq!(copies[0]["path"], "/docs/renamed.txt");
    cli.run(&["--json", "cp", "/docs/readme.md", "/x/copied.md"]).await.json();
    assert_eq!(remote_bytes(&app, &session, "/x/copied.md").await, b"readme");

    let found = cli.run(&["--json", "search", "RENAMED", "--type", "file"]).await.json();
    let mut paths: Vec<&str> = found.as_array().unwrap().iter().map(|o| o["path"].as_str().unwrap()).collect();
    paths.sort_unstable();
    assert_eq!(paths, ["/docs/renamed.txt", "/x/y/renamed.txt"]);
    let below = cli.run(&["--json", "search", "renamed", "--under", "/x"]).await.json();
    assert_eq!(below.as_array().unwrap().len(), 1);

    let share = cli.run(&["--json", "share", "create", "/x/y/renamed.txt", "--max-downloads", "3"]).await.json();
    let code = share["code"].as_str().unwrap().to_owned();
    assert_eq!(share["max_downloads"], 3);
    assert_eq!(app.get(&format!("/share/{code}")).await.status(), 200, "visitors can open it");
    let shares = cli.run(&["--json", "share", "ls"]).await.json();
    assert_eq!(shares.as_array().unwrap().iter().filter(|s| s["code"] == code.as_str()).count(), 1);
    cli.run(&["--json", "share", "rm", &code]).await.json();
    assert_eq!(app.get(&format!("/share/{code}")).await.status(), 404, "the link is gone");
    assert_eq!(cli.run(&["--json", "share", "ls"]).await.json(), json!([]));

    cli.run(&["--json", "rm", "/x/y/renamed.txt"]).await.json();
    assert!(remote_object(&app, &session, "/x/y/renamed.txt").await.is_none());
    let trash: Value = app.call(Method::GET, "/trash", Some(&session.access), None).await.json().await.unwrap();
    assert_eq!(trash["items"][0]["name"], "renamed.txt", "rm keeps it in the trash");
    let folder = cli.run(&["--json", "rm", "/docs"]).await;
    assert_eq!(folder.code, 2, "folders need -r");
    assert!(remote_object(&app, &session, "/docs").await.is_some());
    cli.run(&["--json", "rm", "-r", "--purge", "/docs"]).await.json();
    assert!(remote_object(&app, &session, "/docs").await.is_none());
    let trash: Value = app.call(Method::GET, "/trash", Some(&session.access), None).await.json().await.unwrap();
    assert_eq!(trash["count"], 1, "--purge leaves nothing in the trash");
}

async fn exit_codes_say_what_went_wrong(app: TestApp) {
    let outsider = Cli::new();
    let run = outsider.run(&["--json", "ls"]).await;
    assert_eq!((run.code, run.error()["exit_code"].as_i64()), (3, Some(3)), "not signed in");
    assert!(run.error()["hint"].as_str().unwrap().contains("nubo login"));

    let (cli, _) = Cli::signed_in(&app, "codes@nubo.test").await;
    let missing = cli.run(&["--json", "ls", "/missing"]).await;
    assert_eq!(missing.code, 4);
    assert!(missing.error()["hint"].is_string(), "it says what to do next");
    assert_eq!(cli.run(&["get", "/missing", "here"]).await.code, 4);
    assert_eq!(cli.run(&["put", "no-such-local-file", "/"]).await.code, 4);
    assert_eq!(cli.run(&["rm", "/missing"]).await.code, 4);

    cli.run(&["--json", "mkdir", "/taken"]).await.json();
    let taken = cli.run(&["--json", "mkdir", "/taken"]).await;
    assert_eq!(taken.code, 5);
    assert_eq!(
        (taken.error()["code"].as_str(), taken.error()["status"].as_u64()),
        (Some("object.name_taken"), Some(409))
    );
    let human = cli.run(&["mkdir", "/taken"]).await;
    assert!(human.stderr.contains("object.name_taken") && human.stderr.contains("hint:"), "{}", human.stderr);

    assert_eq!(cli.run(&["put", "only-one-argument"]).await.code, 2, "usage");
    assert_eq!(cli.run(&["frobnicate"]).await.code, 2);

    // A session the server no longer knows.
    let mut revoked = cli.credentials();
    revoked["access_token"] = json!("revoked");
    revoked["refresh_token"] = json!("revoked");
    std::fs::write(cli.credentials_path(), revoked.to_string()).unwrap();
    assert_eq!(cli.run(&["ls"]).await.code, 3);

    // Nothing listens on port 9 of the loopback.
    let unreachable =
        cli.run_with(&["login", "http://127.0.0.1:9", "--email", "a@b.c", "--password-stdin"], &[], Some("x\n")).await;
    assert_eq!(unreachable.code, 6, "{}", unreachable.stderr);
}

async fn moves_and_copies_into_another_folder_under_a_new_name_whatever_names_are_taken_on_the_way(app: TestApp) {
    let (cli, session) = Cli::signed_in(&app, "rename-into@nubo.test").await;
    cli.write("a/x.txt", b"moving");
    cli.write("a/y.txt", b"stays in a");
    cli.write("b/x.txt", b"already in b");
    cli.write("c/x.txt", b"copied");
    cli.run(&["--json", "put", "a", "b", "c", "/"]).await.json();

    // The new name is taken where the file starts, the old one where it goes.
    let moved = cli.run(&["--json", "mv", "/a/x.txt", "/b/y.txt"]).await.json();
    assert_eq!(moved[0]["to"], "/b/y.txt");
    assert_eq!(remote_bytes(&app, &session, "/b/y.txt").await, b"moving");
    assert_eq!(remote_bytes(&app, &session, "/b/x.txt").await, b"already in b", "the old name there is untouched");
    assert_eq!(remote_names(&app, &session, "/a").await, ["y.txt"]);
    assert_eq!(remote_bytes(&app, &session, "/a/y.txt").await, b"stays in a");

    let copied = cli.run(&["--json", "cp", "/c/x.txt", "/b/z.txt"]).await.json();
    assert_eq!(copied[0]["path"], "/b/z.txt");
    assert_eq!(remote_bytes(&app, &session, "/b/z.txt").await, b"copied");
    assert_eq!(remote_bytes(&app, &session, "/b/x.txt").await, b"already in b");
    assert_eq!(remote_bytes(&app, &session, "/c/x.txt").await, b"copied", "the original stays");
    let copied = cli.run(&["--json", "cp", "/c/x.txt", "/c/twin.txt"]).await.json();
    assert_eq!(copied[0]["path"], "/c/twin.txt", "a copy under another name in the same folder too");
    assert_eq!(remote_bytes(&app, &session, "/c/twin.txt").await, b"copied");

    // A last step the server refuses (a name it no longer takes) undoes the steps before it.
    let refused = cli.run(&["--json", "mv", "/a/y.txt", "/b/back\\slash.txt"]).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert_eq!(refused.error()["status"], 422);
    let refused = cli.run(&["--json", "cp", "/c/x.txt", "/b/back\\slash.txt"]).await;
    assert_eq!(refused.error()["status"], 422, "{}", refused.stderr);
    assert_eq!(remote_names(&app, &session, "/a").await, ["y.txt"], "the file is back where it was");
    assert_eq!(remote_names(&app, &session, "/b").await, ["x.txt", "y.txt", "z.txt"], "nothing left on the way");
    assert_eq!(remote_names(&app, &session, "/c").await, ["twin.txt", "x.txt"]);
    let trash: Value = app.call(Method::GET, "/trash", Some(&session.access), None).await.json().await.unwrap();
    assert_eq!(trash["count"], 0, "nothing made on the way waits in the trash: {trash}");
}

async fn names_with_a_backslash_are_reached_by_every_command(app: TestApp) {
    let (cli, session) = Cli::signed_in(&app, "backslash@nubo.test").await;
    let root = app.root_id(&session).await;
    let old = app.mkdir(&session, &root, "old").await;
    stored_under_an_old_name(&app, &session, &old, "a\\b.txt", b"made on another system").await;
    let folder = app.mkdir(&session, &old, "placeholder-for-an-old-folder").await;
    app.sql(&format!("UPDATE objects SET name = 'sub\\dir' WHERE id = '{folder}'")).await;
    app.upload(&session, &folder, "inner.txt", b"inside").await;

    let listed = cli.run(&["--json", "ls", "/old/a\\b.txt"]).await.json();
    assert_eq!(listed["items"][0]["name"], "a\\b.txt", "{listed}");
    let listed = cli.run(&["--json", "ls", "/old/sub\\dir"]).await.json();
    assert_eq!(listed["folder"]["name"], "sub\\dir", "{listed}");
    assert_eq!(listed["items"][0]["name"], "inner.txt");

    cli.run(&["--json", "get", "/old/a\\b.txt", "copy.txt"]).await.json();
    assert_eq!(std::fs::read(cli.path("copy.txt")).unwrap(), b"made on another system");
    cli.run(&["--json", "get", "/old/sub\\dir/inner.txt", "inner.txt"]).await.json();
    assert_eq!(std::fs::read(cli.path("inner.txt")).unwrap(), b"inside", "through a folder named so, too");

    cli.run(&["--json", "mkdir", "/copies"]).await.json();
    let copied = cli.run(&["--json", "cp", "/old/a\\b.txt", "/copies/"]).await.json();
    assert_eq!(copied[0]["path"], "/copies/a\\b.txt");
    cli.run(&["--json", "mv", "/copies/a\\b.txt", "/old/sub\\dir/"]).await.json();
    assert_eq!(remote_names(&app, &session, "/copies").await, Vec::<String>::new());
    cli.run(&["--json", "mv", "/old/a\\b.txt", "/old/renamed.txt"]).await.json();
    assert_eq!(remote_bytes(&app, &session, "/old/renamed.txt").await, b"made on another system");

    cli.run(&["--json", "rm", "/old/sub\\dir/a\\b.txt"]).await.json();
    cli.run(&["--json", "rm", "-r", "/old/sub\\dir"]).await.json();
    assert_eq!(remote_names(&app, &session, "/old").await, ["renamed.txt"]);
}

/// A web server that answers every request with a web page, as a site's front page or a proxy's
/// error page would where the client expects Nubo's API; answers its address.
fn serve_a_web_page() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut request = [0u8; 8192];
            let _ = stream.read(&mut request);
            let page = "<!doctype html><html><body><h1>Welcome to our site</h1></body></html>";
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    address
}

#[tokio::test]
async fn a_web_page_where_the_api_should_answer_is_named_as_such() {
    let site = serve_a_web_page();
    let cli = Cli::new();

    let run = cli.run_with(&["--json", "login", &site, "--email", "a@b.c", "--password-stdin"], &[], Some("x\n")).await;

    assert_eq!(run.code, 1, "{}", run.stderr);
    let error = run.error();
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("web page") && message.contains(&site), "says what answered: {message}");
    assert!(!message.contains("expected"), "no JSON parser's words: {message}");
    assert!(error["hint"].as_str().unwrap().contains("server address"), "says what to check: {error}");
}

async fn a_plain_http_server_typed_without_a_scheme_is_named_as_such(app: TestApp) {
    app.register("scheme@nubo.test", PASSWORD).await;
    let cli = Cli::new();
    let host = app.base_url.strip_prefix("http://").unwrap();

    let run = cli
        .run_with(&["--json", "login", host, "--email", "scheme@nubo.test", "--password-stdin"], &[], Some("x\n"))
        .await;

    assert_eq!(run.code, 6, "{}", run.stderr);
    let error = run.error();
    assert!(error["message"].as_str().unwrap().contains("speaks http, not https"), "{error}");
    assert!(error["hint"].as_str().unwrap().contains(&format!("http://{host}")), "{error}");
    assert!(!cli.credentials_path().exists(), "never signed in over http unasked");
}

async fn a_transfer_that_started_over_does_not_claim_it_resumed(app: TestApp) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    let (cli, _) = Cli::signed_in(&app, "restart@nubo.test").await;
    cli.write("large.bin", &content(20 * SMALL_CHUNK, 7));

    // The session outlives the interrupt, the chunks it had received do not.
    let stop = [("NUBO_CLI_STOP_AFTER_CHUNKS", "2")];
    assert_eq!(cli.run_with(&["put", "-P", "1", "large.bin", "/"], &stop, None).await.code, 6);
    app.sql("DELETE FROM upload_chunks").await;
    let put = cli.run(&["--json", "put", "large.bin", "/"]).await.json();
    assert_eq!((put[0]["chunks_sent"].as_u64(), put[0]["total_chunks"].as_u64()), (Some(20), Some(20)));
    assert_eq!(put[0]["resumed"], false, "every byte was sent again: {put}");

    // A part whose file changed on the server meanwhile is started over.
    let stop = [("NUBO_CLI_STOP_AFTER_BYTES", "300000")];
    assert_eq!(cli.run_with(&["get", "-P", "1", "/large.bin", "copy.bin"], &stop, None).await.code, 6);
    let changed = content(20 * SMALL_CHUNK, 8);
    cli.write("large.bin", &changed);
    cli.run(&["--json", "put", "--overwrite", "large.bin", "/"]).await.json();
    let get = cli.run(&["--json", "get", "/large.bin", "copy.bin"]).await.json();
    assert_eq!(std::fs::read(cli.path("copy.bin")).unwrap(), changed);
    assert_eq!(get[0]["resumed_from"], 0, "every byte was downloaded again: {get}");
}
