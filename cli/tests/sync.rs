//! `nubo sync` against a real master, on SQLite and PostgreSQL: the hard cases of two-way
//! sync, each scripted and checked on both sides: edits on both sides, a deletion meeting a
//! change, a file made while the server is away, the client killed mid-transfer, a renamed
//! folder of 1,000 files, identical content, a case-only rename, a name illegal locally.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nubo_tests::files::{SMALL_CHUNK, content, files_below};
use nubo_tests::relay::Relay;
use nubo_tests::{Session, TestApp, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};
use support::Run;
use tempfile::TempDir;
use tokio::io::AsyncBufReadExt;

const PASSWORD: &str = "a-long-password";

on_every_backend!(
    edits_on_both_sides_keep_both_versions,
    a_deletion_meeting_a_change_keeps_the_change_either_way_round,
    a_file_made_while_the_server_is_away_is_uploaded_never_deleted,
    a_client_killed_mid_transfer_leaves_no_partial_file_and_the_next_run_converges,
    a_renamed_folder_of_a_thousand_files_is_one_move_on_the_server,
    a_move_into_a_folder_holding_the_old_name_under_a_new_name_is_one_move,
    identical_content_is_sent_once,
    case_only_renames_are_renames_on_both_sides,
    a_name_illegal_here_is_reported_and_left_alone,
    watching_picks_up_changes_on_both_sides,
    a_watched_steady_state_looks_only_at_what_the_watcher_saw_change,
    one_way_runs_leave_the_other_direction_for_later,
    a_server_unchanged_since_the_last_run_is_not_listed_again,
    an_unmounted_disk_or_a_mass_deletion_is_refused_not_carried_to_the_server,
    a_server_restored_from_a_backup_is_merged_as_a_first_run_where_nothing_is_deleted,
    two_devices_syncing_at_once_never_trash_each_others_changes,
    a_users_own_part_named_files_are_synced_and_never_deleted,
    a_folder_deleted_here_keeps_what_this_side_could_not_hold,
    the_clis_own_configuration_and_state_are_never_synced,
    a_file_written_while_it_uploads_is_sent_again_not_kept_as_a_conflict,
    a_folder_move_cut_off_between_its_requests_is_finished_not_undone,
    a_run_left_out_of_step_only_by_the_quota_exits_with_the_quota_status,
    an_edit_to_a_file_dated_before_1970_is_seen,
    an_upload_whose_answer_was_lost_is_recognised_by_its_content,
    a_file_replaced_by_a_folder_on_one_side_is_replaced_on_the_other,
    a_remote_folder_renamed_on_the_server_is_named_not_made_again_and_a_moved_local_folder_deletes_nothing,
    a_file_and_a_folder_both_changed_at_one_path_are_both_kept_as_a_conflict,
);

/// The binary with its own config and data directories, a local folder `tree/` to sync and
/// the remote folder `/sync` of `session`.
struct Pair {
    home: TempDir,
    session: Session,
}

impl Pair {
    /// Registers `email`, signs the binary in (through `server`, the master's address or a
    /// relay's) and makes `/sync`.
    async fn new(app: &TestApp, email: &str, server: &str) -> Pair {
        app.register(email, PASSWORD).await;
        let pair = Pair::another_device(app, email, server).await;
        let root = app.root_id(&pair.session).await;
        app.mkdir(&pair.session, &root, "sync").await;
        pair
    }

    /// The binary of another device of the account `email`, signed in, with its own folder.
    async fn another_device(app: &TestApp, email: &str, server: &str) -> Pair {
        let session = app.login(email, PASSWORD).await;
        let pair = Pair { home: tempfile::tempdir().unwrap(), session };
        std::fs::create_dir_all(pair.local("")).unwrap();
        let login =
            pair.command(&["login", server, "--email", email, "--password-stdin"], &[]).stdin(Stdio::piped()).spawn();
        let mut child = login.unwrap();
        use tokio::io::AsyncWriteExt;
        child.stdin.take().unwrap().write_all(format!("{PASSWORD}\n").as_bytes()).await.unwrap();
        assert!(child.wait().await.unwrap().success(), "login");
        pair
    }

    fn local(&self, relative: &str) -> PathBuf {
        self.home.path().join("tree").join(relative)
    }

    fn write(&self, relative: &str, bytes: &[u8]) {
        let path = self.local(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    fn read(&self, relative: &str) -> Option<Vec<u8>> {
        std::fs::read(self.local(relative)).ok()
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_nubo"));
        command
            .args(args)
            .current_dir(self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .env("XDG_DATA_HOME", self.home.path().join("data"))
            .env("NUBO_DEVICE", "testbox")
            .env_remove("NUBO_CLI_STOP_AFTER_CHUNKS")
            .env_remove("NUBO_CLI_STOP_AFTER_BYTES")
            .env_remove("NUBO_CLI_STOP_MODE")
            .env_remove("NUBO_CLI_PAUSE_IN_UPLOAD")
            .env_remove("NUBO_CLI_STOP_AFTER_MOVE_STEPS")
            .env_remove("NUBO_CLI_LOSE_ANSWER_OF_UPLOAD")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (name, value) in env {
            command.env(name, value);
        }
        command
    }

    /// `nubo --json sync tree /sync EXTRA...`.
    async fn sync_with(&self, extra: &[&str], env: &[(&str, &str)]) -> Run {
        let tree = self.local("");
        let mut args = vec!["--json", "sync"];
        args.extend(extra);
        args.extend([tree.to_str().unwrap(), "/sync"]);
        let child = self.command(&args, env).spawn().expect("the nubo binary runs");
        let output = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
            .await
            .expect("nubo sync finishes")
            .unwrap();
        Run::of(output)
    }

    async fn sync(&self) -> Run {
        self.sync_with(&["-P", "8"], &[]).await
    }

    /// Starts `nubo sync` paused by a test hook once `env`'s limit is reached, and kills it
    /// with SIGKILL there.
    async fn sync_killed_at(&self, env: &[(&str, &str)]) {
        let tree = self.local("");
        let mut env = env.to_vec();
        env.push(("NUBO_CLI_STOP_MODE", "pause"));
        let args = ["--json", "sync", "-P", "1", tree.to_str().unwrap(), "/sync"];
        let mut child = self.command(&args, &env).spawn().unwrap();
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let paused = tokio::time::timeout(Duration::from_secs(120), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("paused on purpose") {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(paused, Ok(true), "the run reached the hook");
        child.start_kill().unwrap();
        let status = child.wait().await.unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "killed by SIGKILL");
    }

    /// Every file and folder below the local folder: path to bytes (`None` for folders), without
    /// the temporary files of downloads.
    fn local_tree(&self) -> BTreeMap<String, Option<Vec<u8>>> {
        let root = self.local("");
        let mut tree = BTreeMap::new();
        let mut pending = vec![root.clone()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let relative = path.strip_prefix(&root).unwrap().display().to_string();
                if path.is_dir() {
                    tree.insert(relative, None);
                    pending.push(path);
                } else if !relative.contains(".nubo-part-") {
                    tree.insert(relative, Some(std::fs::read(&path).unwrap()));
                }
            }
        }
        tree
    }

    fn part_files(&self) -> Vec<PathBuf> {
        files_below(&self.local("")).into_iter().filter(|p| p.display().to_string().contains(".nubo-part-")).collect()
    }
}

/// The objects below the remote folder `path` by relative path, through the API.
async fn remote_objects(app: &TestApp, session: &Session, path: &str) -> BTreeMap<String, Value> {
    let mut found = BTreeMap::new();
    let mut pending = vec![(path.to_owned(), String::new())];
    while let Some((folder, prefix)) = pending.pop() {
        let listing: Value = app
            .call(Method::GET, &format!("/directory{folder}?limit=1000"), Some(&session.access), None)
            .await
            .json()
            .await
            .unwrap();
        for item in listing["items"].as_array().unwrap() {
            let name = item["name"].as_str().unwrap();
            let relative = format!("{prefix}{name}");
            if item["kind"] == "folder" {
                pending.push((format!("{folder}/{}", name.replace(' ', "%20")), format!("{relative}/")));
            }
            found.insert(relative, item.clone());
        }
    }
    found
}

/// The remote folder's tree like [`Pair::local_tree`].
async fn remote_tree(app: &TestApp, session: &Session) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut tree = BTreeMap::new();
    for (path, object) in remote_objects(app, session, "/sync").await {
        let bytes = if object["kind"] == "folder" {
            None
        } else {
            Some(app.download(session, object["id"].as_str().unwrap()).await)
        };
        tree.insert(path, bytes);
    }
    tree
}

async fn sync_folder_id(app: &TestApp, session: &Session) -> String {
    let listing: Value =
        app.call(Method::GET, "/directory/sync?limit=1", Some(&session.access), None).await.json().await.unwrap();
    listing["folder"]["id"].as_str().unwrap().to_owned()
}

/// Replaces the content of the remote file `id`.
async fn overwrite_remote(app: &TestApp, session: &Session, id: &str, bytes: &[u8]) {
    let response = app
        .request(Method::PATCH, &format!("/file/content?id={id}"))
        .bearer_auth(&session.access)
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "overwrite: {}", response.text().await.unwrap_or_default());
}

async fn trash_remote(app: &TestApp, session: &Session, id: &str) {
    let response = app.call(Method::DELETE, "/object", Some(&session.access), Some(json!({"ids": [id]}))).await;
    assert!(response.status().is_success(), "trash");
}

fn id_of(objects: &BTreeMap<String, Value>, path: &str) -> String {
    objects.get(path).unwrap_or_else(|| panic!("{path} is on the server"))["id"].as_str().unwrap().to_owned()
}

/// Local mtimes have nanoseconds, but a file rewritten within the same tick keeps its time: wait
/// a little before rewriting a synced file.
async fn tick() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

async fn edits_on_both_sides_keep_both_versions(app: TestApp) {
    let pair = Pair::new(&app, "both@nubo.test", &app.base_url).await;
    pair.write("notes.txt", b"first");
    pair.write("folder/inside/.keep", b"");
    std::fs::create_dir_all(pair.local("empty folder")).unwrap();
    pair.sync().await.converged();
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree(), "the first run makes both sides alike");

    tick().await;
    pair.write("notes.txt", b"edited here");
    let objects = remote_objects(&app, &pair.session, "/sync").await;
    overwrite_remote(&app, &pair.session, &id_of(&objects, "notes.txt"), b"edited there").await;
    let dry = pair.sync_with(&["--dry-run"], &[]).await;
    assert_eq!(dry.code, 8, "{dry:?}");
    let planned: Vec<String> = dry
        .events()
        .iter()
        .filter(|e| e["event"] == "plan")
        .map(|e| format!("{} {}", e["action"], e["path"]))
        .collect();
    assert_eq!(planned, [r#""conflict" "notes.txt""#], "the plan, and nothing done");
    assert_eq!(pair.read("notes.txt").as_deref(), Some(&b"edited here"[..]));
    let run = pair.sync().await;
    assert_eq!(run.code, 8, "a conflict is not convergence: {run:?}");
    assert_eq!(run.summary()["conflicts"], json!(["notes.txt"]));

    let local = pair.local_tree();
    assert_eq!(local["notes.txt"], Some(b"edited there".to_vec()), "the remote version is under the name");
    let copies: Vec<&String> = local.keys().filter(|p| p.starts_with("notes (conflict testbox ")).collect();
    assert_eq!(copies.len(), 1, "the local version is kept beside it: {local:?}");
    assert!(copies[0].ends_with(").txt"));
    assert_eq!(local[copies[0]], Some(b"edited here".to_vec()));
    assert_eq!(remote_tree(&app, &pair.session).await, local, "both versions are on both sides");
    pair.sync().await.converged();

    // The whole local folder gone (an unmounted disk) is not a deletion of everything.
    std::fs::rename(pair.local(""), pair.home.path().join("unmounted")).unwrap();
    assert_eq!(pair.sync().await.code, 4, "refused");
    assert!(remote_objects(&app, &pair.session, "/sync").await.contains_key("notes.txt"), "nothing trashed");
}

async fn a_deletion_meeting_a_change_keeps_the_change_either_way_round(app: TestApp) {
    let pair = Pair::new(&app, "delete@nubo.test", &app.base_url).await;
    for name in ["gone-here.txt", "gone-there.txt", "plain-delete.txt", "remote-delete.txt"] {
        pair.write(name, name.as_bytes());
    }
    pair.sync().await.converged();
    let objects = remote_objects(&app, &pair.session, "/sync").await;

    // Deleted here, changed there; changed here, deleted there; plain deletions both ways.
    std::fs::remove_file(pair.local("gone-here.txt")).unwrap();
    overwrite_remote(&app, &pair.session, &id_of(&objects, "gone-here.txt"), b"changed there").await;
    tick().await;
    pair.write("gone-there.txt", b"changed here");
    trash_remote(&app, &pair.session, &id_of(&objects, "gone-there.txt")).await;
    std::fs::remove_file(pair.local("plain-delete.txt")).unwrap();
    trash_remote(&app, &pair.session, &id_of(&objects, "remote-delete.txt")).await;
    pair.sync().await.converged();

    let local = pair.local_tree();
    assert_eq!(local["gone-here.txt"], Some(b"changed there".to_vec()), "the remote change came back here");
    assert_eq!(local["gone-there.txt"], Some(b"changed here".to_vec()));
    assert!(!local.contains_key("plain-delete.txt") && !local.contains_key("remote-delete.txt"));
    assert_eq!(remote_tree(&app, &pair.session).await, local, "and the local change went back there");
    let trash: Value = app.call(Method::GET, "/trash", Some(&pair.session.access), None).await.json().await.unwrap();
    let trashed: Vec<&str> = trash["items"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert!(trashed.contains(&"plain-delete.txt"), "a remote deletion goes to the trash: {trashed:?}");
}

/// Relays `addr` (a port a [`Relay`] had) to `target` again, as the network coming back.
async fn relay_again(addr: std::net::SocketAddr, target: String) -> tokio::task::JoinHandle<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.expect("the relay's port again");
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut service) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut service).await;
                }
            });
        }
    })
}

async fn a_file_made_while_the_server_is_away_is_uploaded_never_deleted(app: TestApp) {
    let target = app.base_url.trim_start_matches("http://").to_owned();
    let relay = Relay::start(&target).await;
    let addr = relay.addr;
    let pair = Pair::new(&app, "offline@nubo.test", &format!("http://{addr}")).await;
    pair.write("before.txt", b"synced before");
    pair.sync().await.converged();

    relay.cut().await;
    pair.write("made-offline.txt", b"written on the train");
    pair.write("offline-folder/inside.txt", b"also offline");
    let away = pair.sync().await;
    assert_eq!(away.code, 6, "no server is a network failure: {away:?}");
    assert_eq!(pair.read("made-offline.txt").as_deref(), Some(&b"written on the train"[..]), "nothing is touched");

    let back = relay_again(addr, target).await;
    let run = pair.sync().await;
    run.converged();
    assert_eq!(run.count("delete_local"), 0, "nothing is deleted here");
    let local = pair.local_tree();
    assert_eq!(local["made-offline.txt"], Some(b"written on the train".to_vec()));
    assert_eq!(local["offline-folder/inside.txt"], Some(b"also offline".to_vec()));
    assert_eq!(remote_tree(&app, &pair.session).await, local, "the offline files are uploaded");
    back.abort();
}

async fn a_client_killed_mid_transfer_leaves_no_partial_file_and_the_next_run_converges(app: TestApp) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    let pair = Pair::new(&app, "killed@nubo.test", &app.base_url).await;
    let up = content(20 * SMALL_CHUNK, 1);
    pair.write("up.bin", &up);

    // Stopped by the hook after three chunks, then killed with SIGKILL after five more.
    let stopped = pair.sync_with(&["-P", "1"], &[("NUBO_CLI_STOP_AFTER_CHUNKS", "3")]).await;
    assert_eq!(stopped.code, 6, "{stopped:?}");
    assert!(remote_objects(&app, &pair.session, "/sync").await.is_empty(), "a partial upload is never visible");
    pair.sync_killed_at(&[("NUBO_CLI_STOP_AFTER_CHUNKS", "5")]).await;
    assert!(remote_objects(&app, &pair.session, "/sync").await.is_empty(), "still not visible after kill -9");
    assert_eq!(pair.read("up.bin"), Some(up.clone()), "the local file is intact");
    let resumed = pair.sync().await;
    resumed.converged();
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());

    // A download killed with SIGKILL mid-file, and one stopped by the hook.
    let down = content(20 * SMALL_CHUNK + 7, 2);
    let folder = sync_folder_id(&app, &pair.session).await;
    app.upload(&pair.session, &folder, "down.bin", &down).await;
    pair.sync_killed_at(&[("NUBO_CLI_STOP_AFTER_BYTES", "300000")]).await;
    assert!(pair.read("down.bin").is_none(), "a partial download is never under its name");
    assert_eq!(pair.part_files().len(), 1, "it waits under a temporary name");
    let stopped = pair.sync_with(&["-P", "1"], &[("NUBO_CLI_STOP_AFTER_BYTES", "600000")]).await;
    assert_eq!(stopped.code, 6, "{stopped:?}");
    assert!(pair.read("down.bin").is_none());
    pair.sync().await.converged();
    assert_eq!(pair.read("down.bin"), Some(down), "the next run completes it");
    assert!(pair.part_files().is_empty(), "no temporary file is left");
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
}

async fn a_renamed_folder_of_a_thousand_files_is_one_move_on_the_server(app: TestApp) {
    let pair = Pair::new(&app, "rename@nubo.test", &app.base_url).await;
    for i in 0..1000 {
        pair.write(&format!("photos/{i:04}.txt"), format!("photo {i}").as_bytes());
    }
    let first = pair.sync().await;
    first.converged();
    assert_eq!(first.count("upload"), 1000);
    let before = remote_objects(&app, &pair.session, "/sync").await;

    std::fs::rename(pair.local("photos"), pair.local("renamed")).unwrap();
    let run = pair.sync().await;
    run.converged();
    assert_eq!((run.count("move_remote"), run.count("upload"), run.count("trash_remote")), (1, 0, 0), "{}", run.stdout);
    let after = remote_objects(&app, &pair.session, "/sync").await;
    assert_eq!(after.len(), 1001);
    assert_eq!(id_of(&after, "renamed"), id_of(&before, "photos"), "the same folder object, renamed");
    for i in [0, 499, 999] {
        let name = format!("{i:04}.txt");
        assert_eq!(id_of(&after, &format!("renamed/{name}")), id_of(&before, &format!("photos/{name}")));
    }
    let trash: Value = app.call(Method::GET, "/trash", Some(&pair.session.access), None).await.json().await.unwrap();
    assert_eq!(trash["count"], 0, "nothing went to the trash");
}

async fn a_move_into_a_folder_holding_the_old_name_under_a_new_name_is_one_move(app: TestApp) {
    let pair = Pair::new(&app, "moveinto@nubo.test", &app.base_url).await;
    pair.write("a/x.txt", b"moved and renamed");
    pair.write("b/x.txt", b"another file of that name, left alone");
    pair.sync().await.converged();
    let before = remote_objects(&app, &pair.session, "/sync").await;

    std::fs::rename(pair.local("a/x.txt"), pair.local("b/y.txt")).unwrap();
    let run = pair.sync().await;
    run.converged();
    assert_eq!((run.count("move_remote"), run.count("upload"), run.count("trash_remote")), (1, 0, 0), "{}", run.stdout);
    let after = remote_objects(&app, &pair.session, "/sync").await;
    assert_eq!(id_of(&after, "b/y.txt"), id_of(&before, "a/x.txt"), "the same object, moved and renamed");
    assert_eq!(id_of(&after, "b/x.txt"), id_of(&before, "b/x.txt"));
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
}

async fn identical_content_is_sent_once(app: TestApp) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    let pair = Pair::new(&app, "same@nubo.test", &app.base_url).await;
    let bytes = content(6 * SMALL_CHUNK + 11, 3);
    pair.write("a/copy.bin", &bytes);
    pair.write("b/copy.bin", &bytes);
    pair.write("b/another name.bin", &bytes);
    let run = pair.sync().await;
    run.converged();
    let methods: Vec<String> = run
        .events()
        .iter()
        .filter(|e| e["event"] == "upload")
        .map(|e| e["method"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(methods.iter().filter(|m| *m == "known").count(), 2, "two copies went by hash alone: {methods:?}");
    assert_eq!(run.summary()["bytes_up"], bytes.len(), "the bytes went up once");
    let size = bytes.len() as u64;
    let stored = files_below(&app.config.data_dir).into_iter().filter(|p| p.metadata().unwrap().len() == size).count();
    assert_eq!(stored, 1, "the server stores the content once");
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
}

async fn case_only_renames_are_renames_on_both_sides(app: TestApp) {
    let pair = Pair::new(&app, "case@nubo.test", &app.base_url).await;
    pair.write("readme.txt", b"read me");
    pair.write("Remote.txt", b"renamed there");
    pair.sync().await.converged();
    let before = remote_objects(&app, &pair.session, "/sync").await;

    std::fs::rename(pair.local("readme.txt"), pair.local("README.txt")).unwrap();
    let id = id_of(&before, "Remote.txt");
    let renamed = app
        .call(Method::PATCH, &format!("/object/{id}"), Some(&pair.session.access), Some(json!({"name": "remote.txt"})))
        .await;
    assert!(renamed.status().is_success());
    let run = pair.sync().await;
    run.converged();
    assert_eq!(
        (run.count("move_remote"), run.count("move_local"), run.count("upload"), run.count("download")),
        (1, 1, 0, 0)
    );

    let after = remote_objects(&app, &pair.session, "/sync").await;
    assert_eq!(after.keys().collect::<Vec<_>>(), ["README.txt", "remote.txt"]);
    assert_eq!(id_of(&after, "README.txt"), id_of(&before, "readme.txt"), "renamed, not uploaded again");
    assert_eq!(pair.local_tree().keys().collect::<Vec<_>>(), ["README.txt", "remote.txt"]);
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
}

/// A remote file named `name`, a name the server refuses today (a backslash) but may still hold:
/// stored before the rule, so the test puts it in place under the database.
async fn stored_before_the_name_rule(app: &TestApp, session: &Session, parent: &str, name: &str, bytes: &[u8]) {
    let file = app.upload(session, parent, "placeholder-for-an-old-name", bytes).await;
    let id = file["id"].as_str().unwrap();
    app.sql(&format!("UPDATE objects SET name = '{name}' WHERE id = '{id}'")).await;
}

async fn an_edit_to_a_file_dated_before_1970_is_seen(app: TestApp) {
    let pair = Pair::new(&app, "old@nubo.test", &app.base_url).await;
    let dated = |relative: &str, seconds_before_1970: u64| {
        let time = std::time::UNIX_EPOCH - Duration::from_secs(seconds_before_1970);
        std::fs::File::options().write(true).open(pair.local(relative)).unwrap().set_modified(time).unwrap();
    };
    pair.write("scan.tif", b"first scan");
    dated("scan.tif", 86_400 * 365);
    pair.sync().await.converged();

    // Same size, another time before 1970: both read as 0 when such times were clamped, so the
    // edit looked unchanged and was never read.
    pair.write("scan.tif", b"second one");
    dated("scan.tif", 86_400 * 300);
    pair.sync().await.converged();

    assert_eq!(remote_tree(&app, &pair.session).await["scan.tif"].as_deref(), Some(&b"second one"[..]));
}

async fn an_upload_whose_answer_was_lost_is_recognised_by_its_content(app: TestApp) {
    let pair = Pair::new(&app, "lost@nubo.test", &app.base_url).await;
    pair.write("note.txt", b"stored by the server, its answer lost on the way");

    // The server stores the file, the answer never arrives, the retry finds the name taken.
    let run = pair.sync_with(&["-P", "1"], &[("NUBO_CLI_LOSE_ANSWER_OF_UPLOAD", "1")]).await;

    assert!(run.stderr.contains("lost the answer to upload request 1"), "the answer was lost: {}", run.stderr);
    run.converged();
    assert_eq!(run.count("upload"), 1, "{}", run.stdout);
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
    let next = pair.sync().await;
    next.converged();
    let moved: usize = ["upload", "download", "conflict", "trash_remote"].iter().map(|e| next.count(e)).sum();
    assert_eq!(moved, 0, "the base was recorded: nothing left to do: {}", next.stdout);
}

/// The names in the account's trash.
async fn trashed_names(app: &TestApp, session: &Session) -> Vec<String> {
    let trash: Value = app.call(Method::GET, "/trash", Some(&session.access), None).await.json().await.unwrap();
    trash["items"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap().to_owned()).collect()
}

async fn a_file_replaced_by_a_folder_on_one_side_is_replaced_on_the_other(app: TestApp) {
    let pair = Pair::new(&app, "kinds@nubo.test", &app.base_url).await;
    pair.write("here.txt", b"a file, then a folder here");
    pair.write("there.txt", b"a file, then a folder there");
    pair.sync().await.converged();
    let objects = remote_objects(&app, &pair.session, "/sync").await;

    // Here: the file deleted and a folder of files made in its place; there, the same.
    std::fs::remove_file(pair.local("here.txt")).unwrap();
    pair.write("here.txt/inside.txt", b"in the new folder here");
    pair.write("here.txt/deeper/more.txt", b"deeper");
    trash_remote(&app, &pair.session, &id_of(&objects, "there.txt")).await;
    let folder = sync_folder_id(&app, &pair.session).await;
    let there = app.mkdir(&pair.session, &folder, "there.txt").await;
    app.upload(&pair.session, &there, "inside.txt", b"in the new folder there").await;
    let run = pair.sync().await;

    run.converged();
    let local = pair.local_tree();
    assert_eq!(local["here.txt/deeper/more.txt"], Some(b"deeper".to_vec()));
    assert_eq!(local["there.txt"], None, "the local file gave way to the server's folder: {local:?}");
    assert_eq!(local["there.txt/inside.txt"], Some(b"in the new folder there".to_vec()));
    assert_eq!(remote_tree(&app, &pair.session).await, local, "the server's file gave way to the folder");
    assert!(trashed_names(&app, &pair.session).await.contains(&"here.txt".to_owned()), "into the trash");

    // And back: the folder replaced by a file here goes to the trash there, whole.
    std::fs::remove_dir_all(pair.local("here.txt")).unwrap();
    pair.write("here.txt", b"a file again");
    let run = pair.sync().await;
    run.converged();
    assert_eq!(remote_tree(&app, &pair.session).await["here.txt"], Some(b"a file again".to_vec()));
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
    let again = pair.sync().await;
    again.converged();
    assert_eq!(again.count("skip") + again.count("upload") + again.count("download"), 0, "{}", again.stdout);
}

async fn a_file_and_a_folder_both_changed_at_one_path_are_both_kept_as_a_conflict(app: TestApp) {
    let pair = Pair::new(&app, "bothkinds@nubo.test", &app.base_url).await;
    pair.write("both.txt", b"agreed");
    pair.write("dir/a.txt", b"agreed in a folder");
    pair.sync().await.converged();
    let objects = remote_objects(&app, &pair.session, "/sync").await;
    let folder = sync_folder_id(&app, &pair.session).await;

    // A file edited here and replaced by a folder there; a folder added to here and replaced by
    // a file there.
    tick().await;
    pair.write("both.txt", b"edited here");
    trash_remote(&app, &pair.session, &id_of(&objects, "both.txt")).await;
    let there = app.mkdir(&pair.session, &folder, "both.txt").await;
    app.upload(&pair.session, &there, "inside.txt", b"made there").await;
    pair.write("dir/new.txt", b"new here");
    trash_remote(&app, &pair.session, &id_of(&objects, "dir")).await;
    app.upload(&pair.session, &folder, "dir", b"a file there").await;
    let run = pair.sync().await;

    assert_eq!(run.code, 8, "{run:?}");
    assert_eq!(run.summary()["conflicts"], json!(["both.txt", "dir"]));
    let local = pair.local_tree();
    assert_eq!(local["both.txt/inside.txt"], Some(b"made there".to_vec()), "the server's under the name: {local:?}");
    assert_eq!(local["dir"], Some(b"a file there".to_vec()));
    let aside = |prefix: &str| local.keys().find(|p| p.starts_with(prefix)).cloned().expect("set aside");
    assert_eq!(local[&aside("both (conflict testbox ")], Some(b"edited here".to_vec()), "this side's beside it");
    let dir_aside = aside("dir (conflict testbox ");
    assert_eq!(local[&format!("{dir_aside}/a.txt")], Some(b"agreed in a folder".to_vec()));
    assert_eq!(local[&format!("{dir_aside}/new.txt")], Some(b"new here".to_vec()));
    assert_eq!(remote_tree(&app, &pair.session).await, local, "both versions are on both sides");
    pair.sync().await.converged();
}

/// `nubo --json sync LOCAL REMOTE` of `pair`'s binary.
async fn sync_between(pair: &Pair, local: &Path, remote: &str) -> Run {
    let args = ["--json", "sync", local.to_str().unwrap(), remote];
    Run::of(pair.command(&args, &[]).spawn().unwrap().wait_with_output().await.unwrap())
}

async fn a_remote_folder_renamed_on_the_server_is_named_not_made_again_and_a_moved_local_folder_deletes_nothing(
    app: TestApp,
) {
    let pair = Pair::new(&app, "rootmoved@nubo.test", &app.base_url).await;
    pair.write("kept.txt", b"synced before the rename");
    pair.write("deleted-before-the-move.txt", b"deleted here after the rename");
    pair.sync().await.converged();
    let folder = sync_folder_id(&app, &pair.session).await;
    let renamed = app
        .call(Method::PATCH, &format!("/object/{folder}"), Some(&pair.session.access), Some(json!({"name": "moved"})))
        .await;
    assert!(renamed.status().is_success());

    // The old path: no new folder there, nothing uploaded again, but where it went.
    let run = pair.sync().await;
    assert_eq!(run.code, 4, "{run:?}");
    let error = run.error();
    assert_eq!(error["code"], "sync.remote_moved", "{error}");
    assert!(error["hint"].as_str().unwrap().contains("/moved"), "the hint names the new path: {error}");
    let top = app.call(Method::GET, "/directory/?limit=100", Some(&pair.session.access), None).await;
    let top: Value = top.json().await.unwrap();
    let names: Vec<&str> = top["items"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["moved"], "no folder made at the old path");
    // Another folder made at the old path meanwhile is not taken for it either.
    let other = app.mkdir(&pair.session, &app.root_id(&pair.session).await, "sync").await;
    let run = pair.sync().await;
    assert_eq!((run.code, run.error()["code"].as_str()), (5, Some("sync.remote_moved")), "{run:?}");
    assert!(remote_objects(&app, &pair.session, "/sync").await.is_empty(), "nothing uploaded into it");
    trash_remote(&app, &pair.session, &other).await;

    // Following the hint: the same pair, nothing to move.
    let tree = pair.local("");
    let run = sync_between(&pair, &tree, "/moved").await;
    run.converged();
    assert_eq!(run.count("upload") + run.count("download"), 0, "{}", run.stdout);

    // The local folder moved (after a deletion not yet synced): a first run from the new path,
    // a union where nothing is deleted on either side; the deleted file comes back.
    std::fs::remove_file(pair.local("deleted-before-the-move.txt")).unwrap();
    let moved_here = pair.home.path().join("moved-tree");
    std::fs::rename(&tree, &moved_here).unwrap();
    assert_eq!(sync_between(&pair, &tree, "/moved").await.code, 4, "the old local path is gone, not emptied");
    let run = sync_between(&pair, &moved_here, "/moved").await;
    run.converged();
    assert_eq!((run.count("trash_remote"), run.count("delete_local")), (0, 0), "{}", run.stdout);
    let notes: Vec<Value> = run.events().into_iter().filter(|e| e["event"] == "note").collect();
    let old_place = pair.home.path().join("tree").display().to_string();
    assert!(
        notes.iter().any(|n| n["message"].as_str().unwrap().contains(&old_place)),
        "the run says it merged as a first run, and where the folder was synced from: {notes:?}"
    );
    assert_eq!(
        std::fs::read(moved_here.join("deleted-before-the-move.txt")).unwrap(),
        b"deleted here after the rename",
        "brought back, never trashed"
    );
    assert_eq!(remote_objects(&app, &pair.session, "/moved").await.len(), 2);
}

async fn a_run_left_out_of_step_only_by_the_quota_exits_with_the_quota_status(app: TestApp) {
    let pair = Pair::new(&app, "full@nubo.test", &app.base_url).await;
    let admin = app.login_admin().await;
    app.set_user_group(&admin, json!({"max_storage": 1_000})).await;
    pair.write("small.txt", b"fits");
    pair.write("large.bin", &content(10_000, 3));

    let run = pair.sync().await;

    assert_eq!(run.code, 7, "over quota, not 8: {}", run.stderr);
    assert_eq!(run.error()["code"], "storage.quota_exceeded");
    let skipped = run.summary()["skipped"].clone();
    assert_eq!(skipped.as_array().map(Vec::len), Some(1), "{skipped}");
    assert_eq!(skipped[0]["path"], "large.bin");
}

async fn a_name_illegal_here_is_reported_and_left_alone(app: TestApp) {
    let pair = Pair::new(&app, "illegal@nubo.test", &app.base_url).await;
    let folder = sync_folder_id(&app, &pair.session).await;
    stored_before_the_name_rule(&app, &pair.session, &folder, "back\\slash.txt", b"made on another system").await;
    app.upload(&pair.session, &folder, "fine.txt", b"fine").await;
    pair.write("local.txt", b"local");

    let run = pair.sync().await;
    assert_eq!(run.code, 8, "a skipped name is not convergence: {run:?}");
    let skipped = &run.summary()["skipped"];
    assert_eq!(skipped[0]["path"], "back\\slash.txt", "{skipped}");
    assert!(skipped[0]["reason"].as_str().unwrap().contains('\\'));
    let local = pair.local_tree();
    assert_eq!(local.keys().collect::<Vec<_>>(), ["fine.txt", "local.txt"], "nothing mangled, the rest synced");
    let remote = remote_objects(&app, &pair.session, "/sync").await;
    assert!(remote.contains_key("back\\slash.txt"), "the remote file is left alone");
    assert!(remote.contains_key("local.txt"));
    assert_eq!(pair.sync().await.code, 8, "it stays reported");
    assert!(Path::new(&pair.local("back\\slash.txt")).symlink_metadata().is_err());
}

/// Waits (up to 60 s) until `check` holds.
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, check: impl Fn() -> F) {
    for _ in 0..600 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never happened: {what}");
}

async fn watching_picks_up_changes_on_both_sides(app: TestApp) {
    let pair = Pair::new(&app, "watch@nubo.test", &app.base_url).await;
    pair.write("start.txt", b"there from the start");
    let tree = pair.local("");
    let args = ["--json", "sync", "--watch", tree.to_str().unwrap(), "/sync"];
    let mut watching = pair.command(&args, &[]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let has = |path: &'static str| {
        let (app, session) = (&app, &pair.session);
        async move { remote_objects(app, session, "/sync").await.contains_key(path) }
    };
    eventually("the first run uploads", || has("start.txt")).await;

    pair.write("written-here.txt", b"a local change");
    eventually("a local change reaches the server", || has("written-here.txt")).await;
    let folder = sync_folder_id(&app, &pair.session).await;
    app.upload(&pair.session, &folder, "written-there.txt", b"a remote change").await;
    eventually("a remote change reaches here", || async { pair.read("written-there.txt").is_some() }).await;
    assert_eq!(pair.read("written-there.txt").as_deref(), Some(&b"a remote change"[..]));
    assert!(watching.try_wait().unwrap().is_none(), "it keeps watching");
    watching.start_kill().unwrap();
    let _ = watching.wait().await;
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
}

/// The next `summary` line of a watching `nubo --json sync --watch`.
async fn next_summary<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut tokio::io::Lines<R>) -> Value {
    let next = tokio::time::timeout(Duration::from_secs(120), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Ok(event) = serde_json::from_str::<Value>(&line)
                && event["event"] == "summary"
            {
                return Some(event);
            }
        }
        None
    });
    next.await.ok().flatten().expect("a summary")
}

async fn a_watched_steady_state_looks_only_at_what_the_watcher_saw_change(app: TestApp) {
    let pair = Pair::new(&app, "journal@nubo.test", &app.base_url).await;
    for index in 0..30 {
        pair.write(&format!("keep/{index:02}.txt"), b"left alone");
    }
    pair.write("edit.txt", b"before");
    pair.write("gone.txt", b"deleted here");
    pair.write("old/x.txt", b"in a folder renamed here");
    let tree = pair.local("");
    let args = ["--json", "sync", "--watch", tree.to_str().unwrap(), "/sync"];
    let mut watching = pair.command(&args, &[]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(watching.stdout.take().unwrap()).lines();
    let first = next_summary(&mut lines).await;
    assert_eq!((first["converged"].clone(), first["local_scan"].clone()), (json!(true), json!("full")), "{first}");

    // Changes of every kind here: an edit, a deletion, a folder renamed, a folder made with a
    // folder and a file in it.
    tick().await;
    pair.write("edit.txt", b"after, and longer");
    std::fs::remove_file(pair.local("gone.txt")).unwrap();
    std::fs::rename(pair.local("old"), pair.local("new")).unwrap();
    pair.write("made/deep/c.txt", b"made here");
    let mut scans = Vec::new();
    loop {
        let summary = next_summary(&mut lines).await;
        scans.push(summary["local_scan"].clone());
        if summary["converged"] == true && remote_tree(&app, &pair.session).await == pair.local_tree() {
            break;
        }
        assert!(scans.len() < 20, "the watched runs converge: {scans:?}");
    }
    let local = pair.local_tree();
    assert_eq!(local["edit.txt"], Some(b"after, and longer".to_vec()));
    assert!(!local.contains_key("gone.txt") && !local.contains_key("old/x.txt"));
    assert_eq!(remote_tree(&app, &pair.session).await, local, "every change reached the server");
    // Every watched run after the first looked at the journal's few paths, never the 35 files.
    for scan in &scans {
        let looked_at = scan["journal"].as_u64().unwrap_or_else(|| panic!("a journal run, not {scan}"));
        assert!(looked_at < 15, "only the changed paths: {scans:?}");
    }
    watching.start_kill().unwrap();
    let _ = watching.wait().await;
}

async fn one_way_runs_leave_the_other_direction_for_later(app: TestApp) {
    let pair = Pair::new(&app, "oneway@nubo.test", &app.base_url).await;
    let folder = sync_folder_id(&app, &pair.session).await;
    app.upload(&pair.session, &folder, "from-server.txt", b"remote").await;
    pair.write("from-here.txt", b"local");

    let push = pair.sync_with(&["--push"], &[]).await;
    push.converged();
    assert!(pair.read("from-server.txt").is_none(), "--push brings nothing here");
    assert!(remote_objects(&app, &pair.session, "/sync").await.contains_key("from-here.txt"));

    std::fs::remove_file(pair.local("from-here.txt")).unwrap();
    let pull = pair.sync_with(&["--pull"], &[]).await;
    pull.converged();
    assert_eq!(pair.read("from-server.txt").as_deref(), Some(&b"remote"[..]), "--pull brings it");
    assert!(
        remote_objects(&app, &pair.session, "/sync").await.contains_key("from-here.txt"),
        "--pull deletes nothing there"
    );

    // Both ways: the local deletion the one-way run left now reaches the server.
    pair.sync().await.converged();
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
    assert!(!pair.local_tree().contains_key("from-here.txt"));
}

/// Runs `nubo sync` until a run's summary says `listed_remote` is `listed` (the server's change
/// feed reaches the account a moment after a write); that run, after at most four.
async fn sync_until_listed_is(pair: &Pair, listed: bool) -> Run {
    for _ in 0..4 {
        let run = pair.sync().await;
        run.converged();
        if run.summary()["listed_remote"] == listed {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!("no run with listed_remote = {listed}");
}

async fn a_server_unchanged_since_the_last_run_is_not_listed_again(app: TestApp) {
    let pair = Pair::new(&app, "quiet@nubo.test", &app.base_url).await;
    let folder = sync_folder_id(&app, &pair.session).await;
    pair.write("docs/a.txt", b"one");
    let b = app.upload(&pair.session, &folder, "b.txt", b"two").await["id"].as_str().unwrap().to_owned();
    let first = pair.sync().await;
    first.converged();
    assert_eq!(first.summary()["listed_remote"], true, "a first run lists the server");

    // Its own uploads are changes on the server: a run lists once more, then the server is
    // known to be as agreed and is not listed again.
    sync_until_listed_is(&pair, false).await;

    // A local change alone goes up without a listing.
    pair.write("docs/a.txt", b"one, edited");
    let run = pair.sync().await;
    run.converged();
    assert_eq!(run.summary()["listed_remote"], false);
    assert_eq!(run.count("upload"), 1);

    // A change on the server is listed and fetched.
    overwrite_remote(&app, &pair.session, &b, b"two, edited there").await;
    let run = sync_until_listed_is(&pair, true).await;
    assert_eq!(run.count("download"), 1);
    assert_eq!(pair.read("b.txt").as_deref(), Some(&b"two, edited there"[..]));

    // A one-way run does not leave the server known: a file it did not bring is found by the
    // next two-way run.
    sync_until_listed_is(&pair, false).await;
    app.upload(&pair.session, &folder, "c.txt", b"three").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    pair.sync_with(&["--push"], &[]).await.converged();
    assert!(pair.read("c.txt").is_none());
    let run = pair.sync().await;
    run.converged();
    assert_eq!(run.summary()["listed_remote"], true, "after a one-way run the server is listed");
    assert_eq!(pair.read("c.txt").as_deref(), Some(&b"three"[..]));
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
}

/// A tmpfs mounted at a folder for as long as it lives (the tests run as root).
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path) -> Mount {
        let status =
            std::process::Command::new("mount").args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"]).arg(at).status();
        assert!(status.unwrap().success(), "mount a tmpfs (as root) at {}", at.display());
        Mount(at.to_owned())
    }

    fn unmount(&self) {
        let status = std::process::Command::new("umount").arg(&self.0).status().unwrap();
        assert!(status.success(), "umount {}", self.0.display());
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).stderr(Stdio::null()).status();
    }
}

async fn trash_count(app: &TestApp, session: &Session) -> u64 {
    let trash: Value = app.call(Method::GET, "/trash", Some(&session.access), None).await.json().await.unwrap();
    trash["count"].as_u64().unwrap()
}

async fn an_unmounted_disk_or_a_mass_deletion_is_refused_not_carried_to_the_server(app: TestApp) {
    let pair = Pair::new(&app, "unmounted@nubo.test", &app.base_url).await;
    let disk = Mount::tmpfs(&pair.local(""));
    for i in 0..40 {
        pair.write(&format!("photos/{i:02}.txt"), format!("photo {i}").as_bytes());
    }
    pair.sync().await.converged();
    assert_eq!(remote_objects(&app, &pair.session, "/sync").await.len(), 41);

    // The disk unmounted: its mount point is an empty folder on another file system.
    disk.unmount();
    let run = pair.sync().await;
    assert_eq!(run.code, 9, "refused as unsafe: {run:?}");
    assert!(run.error()["message"].as_str().unwrap().contains("another file system"), "{}", run.stderr);
    assert_eq!(remote_objects(&app, &pair.session, "/sync").await.len(), 41, "nothing trashed");
    assert_eq!(trash_count(&app, &pair.session).await, 0);
    // Something written into the mount point does not make it the synced disk.
    pair.write("stray.txt", b"written while unmounted");
    assert_eq!(pair.sync().await.code, 9);
    std::fs::remove_file(pair.local("stray.txt")).unwrap();

    // Mounted again (a tmpfs is another file system each time: accepted by the override), the
    // files back as they were: nothing to do but agree.
    let disk = Mount::tmpfs(&pair.local(""));
    let run = pair.sync().await;
    assert_eq!(run.code, 9, "{run:?}");
    for i in 0..40 {
        pair.write(&format!("photos/{i:02}.txt"), format!("photo {i}").as_bytes());
    }
    let run = pair.sync_with(&["--allow-mass-delete"], &[]).await;
    run.converged();
    assert_eq!((run.count("upload"), run.count("trash_remote")), (0, 0), "{}", run.stdout);

    // The folder emptied, or most of it deleted at once: refused; with the override, done.
    std::fs::remove_dir_all(pair.local("photos")).unwrap();
    let run = pair.sync().await;
    assert_eq!(run.code, 9, "an empty folder: {run:?}");
    assert!(run.error()["message"].as_str().unwrap().contains("empty"), "{}", run.stderr);
    for i in 0..10 {
        pair.write(&format!("photos/{i:02}.txt"), format!("photo {i}").as_bytes());
    }
    let run = pair.sync().await;
    assert_eq!(run.code, 9, "30 of 41 deleted at once: {run:?}");
    assert!(run.error()["message"].as_str().unwrap().contains("would delete 30 of 41"), "{}", run.stderr);
    assert_eq!(remote_objects(&app, &pair.session, "/sync").await.len(), 41, "nothing trashed");
    std::fs::remove_file(pair.local("photos/09.txt")).unwrap();
    let run = pair.sync_with(&["--allow-mass-delete"], &[]).await;
    run.converged();
    assert_eq!(run.count("trash_remote"), 31);
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
    // A few deletions are ordinary.
    for i in 0..3 {
        std::fs::remove_file(pair.local(&format!("photos/{i:02}.txt"))).unwrap();
    }
    pair.sync().await.converged();
    disk.unmount();
}

async fn a_server_restored_from_a_backup_is_merged_as_a_first_run_where_nothing_is_deleted(app: TestApp) {
    let mut app = app;
    let pair = Pair::new(&app, "restored@nubo.test", &app.base_url).await;
    pair.write("kept.txt", b"before the backup");
    pair.write("deleted-after.txt", b"deleted after the backup");
    pair.sync().await.converged();
    sync_until_listed_is(&pair, false).await;
    app.back_up().await;

    // After the backup: a file written here and uploaded, a file deleted here and trashed there.
    pair.write("written-after.txt", b"its only other copy is in the lost part of the server");
    std::fs::remove_file(pair.local("deleted-after.txt")).unwrap();
    let run = pair.sync().await;
    run.converged();
    assert_eq!((run.count("upload"), run.count("trash_remote")), (1, 1), "{}", run.stdout);
    sync_until_listed_is(&pair, false).await;

    // The server restored: its cursor is behind this pair's, and it lacks what was done since.
    app.restore_backup().await;
    let run = pair.sync().await;
    run.converged();
    assert_eq!(run.summary()["merged_as_first_run"], true, "{}", run.stdout);
    assert_eq!(run.summary()["listed_remote"], true);
    assert_eq!((run.count("delete_local"), run.count("trash_remote")), (0, 0), "nothing deleted: {}", run.stdout);
    let local = pair.local_tree();
    assert_eq!(local["written-after.txt"], Some(b"its only other copy is in the lost part of the server".to_vec()));
    assert_eq!(local["deleted-after.txt"], Some(b"deleted after the backup".to_vec()), "the union brings it back");
    assert_eq!(remote_tree(&app, &pair.session).await, local, "the server has the file again");

    // Once the server's feed passes the old cursor, nothing here is taken as deleted there.
    let folder = sync_folder_id(&app, &pair.session).await;
    for i in 0..8 {
        app.mkdir(&pair.session, &folder, &format!("later {i}")).await;
    }
    let run = pair.sync().await;
    run.converged();
    assert_eq!(run.summary()["merged_as_first_run"], false, "the new history is trusted again");
    assert_eq!(run.count("delete_local"), 0);
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
    sync_until_listed_is(&pair, false).await;

    // Another database (another epoch): a local deletion is not carried over, the file comes back.
    app.sql("UPDATE server_epoch SET epoch = 'another-database'").await;
    std::fs::remove_file(pair.local("kept.txt")).unwrap();
    let run = pair.sync().await;
    run.converged();
    assert_eq!(run.summary()["merged_as_first_run"], true, "{}", run.stdout);
    assert_eq!(run.count("trash_remote"), 0);
    assert_eq!(pair.read("kept.txt").as_deref(), Some(&b"before the backup"[..]));
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
}

async fn two_devices_syncing_at_once_never_trash_each_others_changes(app: TestApp) {
    let laptop = Pair::new(&app, "devices@nubo.test", &app.base_url).await;
    let desktop = Pair::another_device(&app, "devices@nubo.test", &app.base_url).await;
    for i in 0..10 {
        laptop.write(&format!("project/{i}.txt"), format!("version 1 of {i}").as_bytes());
    }
    laptop.write("notes.txt", b"notes, version 1");
    laptop.sync().await.converged();
    desktop.sync().await.converged();
    assert_eq!(desktop.local_tree(), laptop.local_tree());

    // The laptop deletes the project folder and the notes; the desktop edits a file of each, and
    // syncs while the laptop's run is between its plan and its deletions.
    std::fs::remove_dir_all(laptop.local("project")).unwrap();
    std::fs::remove_file(laptop.local("notes.txt")).unwrap();
    tick().await;
    desktop.write("project/3.txt", b"version 2 of 3, written on the desktop");
    desktop.write("notes.txt", b"notes, version 2, written on the desktop");
    let flag = laptop.home.path().join("go");
    let tree = laptop.local("");
    let args = ["--json", "sync", "--allow-mass-delete", tree.to_str().unwrap(), "/sync"];
    let flag_env = flag.to_str().unwrap();
    let mut running = laptop.command(&args, &[("NUBO_CLI_PAUSE_BEFORE_TRASH", flag_env)]).spawn().unwrap();
    let mut stderr = tokio::io::BufReader::new(running.stderr.take().unwrap()).lines();
    let waiting = tokio::time::timeout(Duration::from_secs(120), async {
        while let Ok(Some(line)) = stderr.next_line().await {
            if line.contains("waiting before the remote deletions") {
                return true;
            }
        }
        false
    });
    assert_eq!(waiting.await, Ok(true), "the laptop's run planned its deletions");
    let run = desktop.sync().await;
    run.converged();
    assert_eq!(run.count("upload"), 2, "{}", run.stdout);
    std::fs::write(&flag, b"").unwrap();
    let output = tokio::time::timeout(Duration::from_secs(120), running.wait_with_output()).await.unwrap().unwrap();
    let run = Run::of(output);
    run.converged();
    assert!(run.count("replan") >= 2, "the server refused what changed: {}", run.stdout);

    // The desktop's edits survive on the server, the rest of the laptop's deletions went through.
    let remote = remote_tree(&app, &laptop.session).await;
    assert_eq!(
        remote.get("project/3.txt"),
        Some(&Some(b"version 2 of 3, written on the desktop".to_vec())),
        "{remote:?}"
    );
    assert_eq!(remote.get("notes.txt"), Some(&Some(b"notes, version 2, written on the desktop".to_vec())));
    assert!(!remote.contains_key("project/0.txt"), "{remote:?}");
    assert_eq!(laptop.local_tree(), remote, "the laptop has the edits back");
    desktop.sync().await.converged();
    assert_eq!(desktop.local_tree(), remote, "and the desktop keeps them");
}

async fn a_users_own_part_named_files_are_synced_and_never_deleted(app: TestApp) {
    let pair = Pair::new(&app, "parts@nubo.test", &app.base_url).await;
    let folder = sync_folder_id(&app, &pair.session).await;
    pair.write(".nubo-part-mine.txt", b"a user's file, whatever its name");
    pair.write("docs/.nubo-part-2026", b"another");
    app.upload(&pair.session, &folder, ".nubo-part-theirs.txt", b"made on another device").await;
    pair.sync().await.converged();
    pair.sync().await.converged();
    assert_eq!(pair.read(".nubo-part-mine.txt").as_deref(), Some(&b"a user's file, whatever its name"[..]));
    assert_eq!(pair.read("docs/.nubo-part-2026").as_deref(), Some(&b"another"[..]));
    assert_eq!(pair.read(".nubo-part-theirs.txt").as_deref(), Some(&b"made on another device"[..]));
    let remote = remote_objects(&app, &pair.session, "/sync").await;
    assert!(remote.contains_key(".nubo-part-mine.txt") && remote.contains_key("docs/.nubo-part-2026"), "{remote:?}");
}

async fn a_folder_deleted_here_keeps_what_this_side_could_not_hold(app: TestApp) {
    let pair = Pair::new(&app, "survivors@nubo.test", &app.base_url).await;
    let folder = sync_folder_id(&app, &pair.session).await;
    let inner = app.mkdir(&pair.session, &folder, "shared").await;
    stored_before_the_name_rule(&app, &pair.session, &inner, "back\\slash.txt", b"made on another system").await;
    app.upload(&pair.session, &inner, "plain.txt", b"plain").await;
    pair.write("other.txt", b"not an empty folder");
    assert_eq!(pair.sync().await.code, 8, "the name is skipped here");
    assert_eq!(pair.read("shared/plain.txt").as_deref(), Some(&b"plain"[..]));

    std::fs::remove_dir_all(pair.local("shared")).unwrap();
    let run = pair.sync().await;
    assert_eq!(run.code, 8, "{run:?}");
    let remote = remote_objects(&app, &pair.session, "/sync").await;
    assert!(remote.contains_key("shared/back\\slash.txt"), "what this side never held survives: {remote:?}");
    assert!(!remote.contains_key("shared/plain.txt"), "the rest of the deletion went through");
    assert!(pair.local("shared").is_dir(), "the folder is made again here, for the survivor");
}

async fn the_clis_own_configuration_and_state_are_never_synced(app: TestApp) {
    let pair = Pair::new(&app, "itself@nubo.test", &app.base_url).await;
    // The folder synced holds the CLI's configuration (`config/nubo`) and state (`data/nubo`).
    let home = pair.home.path().to_path_buf();
    let folder = sync_folder_id(&app, &pair.session).await;
    let config = app.mkdir(&pair.session, &folder, "config").await;
    let nubo = app.mkdir(&pair.session, &config, "nubo").await;
    app.upload(&pair.session, &nubo, "credentials.json", b"another device's credentials").await;
    pair.write("mine.txt", b"mine");
    let credentials = std::fs::read(home.join("config/nubo/credentials.json")).unwrap();
    let sync_home = || {
        let args = ["--json", "sync", "-P", "8", home.to_str().unwrap(), "/sync"];
        let child = pair.command(&args, &[]).spawn().unwrap();
        async move { Run::of(child.wait_with_output().await.unwrap()) }
    };
    let first = sync_home().await;
    first.converged();
    assert_eq!(std::fs::read(home.join("config/nubo/credentials.json")).unwrap(), credentials, "never overwritten");
    let remote = remote_objects(&app, &pair.session, "/sync").await;
    assert!(remote.contains_key("tree/mine.txt"), "{remote:?}");
    assert!(!remote.keys().any(|path| path.starts_with("data/nubo/sync")), "no sync state went up: {remote:?}");
    assert_eq!(remote["config/nubo/credentials.json"]["size"], "another device's credentials".len(), "left alone");
    let again = sync_home().await;
    again.converged();
    let moved: usize = ["upload", "download", "trash_remote", "delete_local"].iter().map(|e| again.count(e)).sum();
    assert_eq!(moved, 0, "a second run has nothing to do: {}", again.stdout);
}

/// Reads `lines` (a run's standard error) until one contains `text`; whether one did (within 120 s).
async fn read_until<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut tokio::io::Lines<R>, text: &str) -> bool {
    let found = tokio::time::timeout(Duration::from_secs(120), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(text) {
                return true;
            }
        }
        false
    });
    found.await == Ok(true)
}

fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    std::fs::OpenOptions::new().append(true).open(path).unwrap().write_all(bytes).unwrap();
}

async fn a_file_written_while_it_uploads_is_sent_again_not_kept_as_a_conflict(app: TestApp) {
    let pair = Pair::new(&app, "torn@nubo.test", &app.base_url).await;
    pair.write("log.txt", b"line 1\n");
    let flag = pair.home.path().join("upload");
    let tree = pair.local("");
    let args = ["--json", "sync", tree.to_str().unwrap(), "/sync"];
    let mut running = pair.command(&args, &[("NUBO_CLI_PAUSE_IN_UPLOAD", flag.to_str().unwrap())]).spawn().unwrap();
    let mut stderr = tokio::io::BufReader::new(running.stderr.take().unwrap()).lines();

    // Appended to after the run hashed it and before the upload read it, and again while the
    // bytes went up: the server gets a version of the file that never was the one hashed.
    assert!(read_until(&mut stderr, "waiting in the upload until read").await, "the run planned the upload");
    append(&pair.local("log.txt"), b"line 2\n");
    std::fs::write(flag.with_extension("read"), b"").unwrap();
    assert!(read_until(&mut stderr, "waiting in the upload until sent").await, "the bytes went up");
    append(&pair.local("log.txt"), b"line 3\n");
    std::fs::write(flag.with_extension("sent"), b"").unwrap();
    let output = tokio::time::timeout(Duration::from_secs(120), running.wait_with_output()).await.unwrap().unwrap();
    let torn = Run::of(output);
    assert_eq!(torn.code, 8, "a file changed while it uploads is not in step: {torn:?}");
    assert_eq!(torn.summary()["skipped"][0]["path"], "log.txt", "{}", torn.stdout);

    let run = pair.sync().await;
    run.converged();
    assert_eq!(run.count("conflict"), 0, "{}", run.stdout);
    let expected = BTreeMap::from([("log.txt".to_owned(), Some(b"line 1\nline 2\nline 3\n".to_vec()))]);
    assert_eq!(pair.local_tree(), expected, "the final bytes, and no conflict copy");
    assert_eq!(remote_tree(&app, &pair.session).await, expected, "on the server too");
}

async fn a_folder_move_cut_off_between_its_requests_is_finished_not_undone(app: TestApp) {
    let pair = Pair::new(&app, "halfmove@nubo.test", &app.base_url).await;
    pair.write("old/photos/1.txt", b"photo 1");
    pair.write("old/photos/2.txt", b"photo 2");
    pair.write("new/.keep", b"");
    pair.sync().await.converged();
    let before = remote_objects(&app, &pair.session, "/sync").await;

    // Into another folder under another name: two requests, and the run stops after the first.
    std::fs::rename(pair.local("old/photos"), pair.local("new/pictures")).unwrap();
    let cut = pair.sync_with(&["-P", "8"], &[("NUBO_CLI_STOP_AFTER_MOVE_STEPS", "1")]).await;
    assert_eq!(cut.code, 6, "{cut:?}");
    let half = remote_objects(&app, &pair.session, "/sync").await;
    assert_eq!(id_of(&half, "new/photos"), id_of(&before, "old/photos"), "moved, not yet renamed: {half:?}");

    let run = pair.sync().await;
    run.converged();
    let moved: Vec<usize> = ["move_remote", "upload", "download", "make_local_folder", "trash_remote", "delete_local"]
        .iter()
        .map(|event| run.count(event))
        .collect();
    assert_eq!(moved, [1, 0, 0, 0, 0, 0], "the move is finished, nothing else: {}", run.stdout);
    let after = remote_objects(&app, &pair.session, "/sync").await;
    assert_eq!(id_of(&after, "new/pictures"), id_of(&before, "old/photos"), "the same folder object");
    assert_eq!(id_of(&after, "new/pictures/1.txt"), id_of(&before, "old/photos/1.txt"));
    assert!(!after.contains_key("new/photos"), "the old name is not made again: {after:?}");
    assert!(!pair.local_tree().contains_key("new/photos"), "nor brought back here");
    assert_eq!(remote_tree(&app, &pair.session).await, pair.local_tree());
}
