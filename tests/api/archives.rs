//! Archives: a ZIP of chosen files and folders holds exactly the tree (unpacked here and compared
//! by content hash), with UTF-8 names and empty folders; the token works once and only for
//! the caller's own objects; a share's archive counts one download, needs the share's grant,
//! and never reaches outside the share; a file that cannot be read breaks the transfer.

use std::collections::BTreeMap;
use std::io::{Cursor, Read};

use nubo_tests::files::{content, files_below};
use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    an_archive_holds_the_chosen_tree_byte_for_byte,
    an_archive_token_works_once_and_only_for_the_callers_objects,
    a_share_archive_counts_one_download_and_stays_inside_the_share,
    a_file_that_cannot_be_read_breaks_the_archive_instead_of_shortening_it,
);

/// What was uploaded: each entry's path in the archive and the blake3 of its content (`None`
/// for a folder).
type Expected = BTreeMap<String, Option<String>>;

fn hash(bytes: &[u8]) -> Option<String> {
    Some(blake3::hash(bytes).to_hex().to_string())
}

fn id_of(object: &Value) -> String {
    object["id"].as_str().unwrap().to_owned()
}

/// A tree with nested folders, non-ASCII names, an empty folder, an empty file and a file of a
/// few MiB: (`docs` folder id, `notes.txt` id, what an archive of both holds).
async fn tree(app: &TestApp, owner: &Session) -> (String, String, Expected) {
    let root = app.root_id(owner).await;
    let mut expected = Expected::new();
    let docs = app.mkdir(owner, &root, "docs").await;
    expected.insert("docs/".into(), None);
    let anger = app.mkdir(owner, &docs, "Ärger").await;
    expected.insert("docs/Ärger/".into(), None);
    let overview = "Ünïcødé all the way down: 日本語".as_bytes();
    app.upload(owner, &anger, "übersicht.txt", overview).await;
    expected.insert("docs/Ärger/übersicht.txt".into(), hash(overview));
    let deep = app.mkdir(owner, &anger, "tief").await;
    expected.insert("docs/Ärger/tief/".into(), None);
    let big = content(3 * 1024 * 1024 + 123, 7);
    app.upload(owner, &deep, "big.bin", &big).await;
    expected.insert("docs/Ärger/tief/big.bin".into(), hash(&big));
    app.mkdir(owner, &docs, "empty").await;
    expected.insert("docs/empty/".into(), None);
    app.upload(owner, &docs, "zero.txt", b"").await;
    expected.insert("docs/zero.txt".into(), hash(b""));
    let notes = b"loose notes next to the folder";
    let notes_id = id_of(&app.upload(owner, &root, "notes.txt", notes).await);
    expected.insert("notes.txt".into(), hash(notes));
    // Trashed things stay out of an archive.
    let trashed = app.upload(owner, &docs, "trashed.txt", b"gone").await;
    let trash = app.call(Method::DELETE, "/object", Some(&owner.access), Some(json!({"ids": [id_of(&trashed)]}))).await;
    assert!(trash.status().is_success(), "trash: {}", trash.status());
    (docs, notes_id, expected)
}

/// Unpacks `bytes`: each entry's path and content hash, checking every entry's name is
/// flagged UTF-8 (general purpose bit 11 of its central directory header).
fn unpack(bytes: &[u8]) -> Expected {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).expect("a readable ZIP");
    let mut found = Expected::new();
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).expect("entry");
        let header = entry.central_header_start() as usize;
        let flags = u16::from_le_bytes([bytes[header + 8], bytes[header + 9]]);
        let name = String::from_utf8(entry.name_raw().to_vec()).expect("UTF-8 name");
        assert_ne!(flags & 0x0800, 0, "{name} is not flagged UTF-8");
        if entry.is_dir() {
            found.insert(name, None);
        } else {
            let mut data = Vec::new();
            entry.read_to_end(&mut data).expect("entry content (its CRC is checked at the end)");
            found.insert(name, hash(&data));
        }
    }
    found
}

async fn token(app: &TestApp, path: &str, access: Option<&str>, headers: &[(&str, &str)], body: Value) -> Value {
    let response = archive_request(app, path, access, headers, body).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
    response.json().await.unwrap()
}

async fn archive_request(
    app: &TestApp,
    path: &str,
    access: Option<&str>,
    headers: &[(&str, &str)],
    body: Value,
) -> reqwest::Response {
    let mut request = app.request(Method::POST, path).json(&body);
    if let Some(access) = access {
        request = request.bearer_auth(access);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

async fn fetch(app: &TestApp, token: &Value) -> reqwest::Response {
    app.client.get(format!("{}{}", app.base_url, token["url"].as_str().unwrap())).send().await.unwrap()
}

async fn an_archive_holds_the_chosen_tree_byte_for_byte(app: TestApp) {
    let owner = app.register("owner@example.com", "archive-owner-password").await;
    let (docs, notes, expected) = tree(&app, &owner).await;

    let ticket = token(&app, "/file/archive", Some(&owner.access), &[], json!({"ids": [docs, notes]})).await;
    assert!(ticket["url"].as_str().unwrap().starts_with("/api/v1/file/archive/"), "{ticket}");
    assert!(ticket["access_token"].as_str().unwrap().len() >= 43, "32 random bytes");
    let response = fetch(&app, &ticket).await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "application/zip");
    assert!(headers.get("content-length").is_none(), "streamed as it is written");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert!(headers["content-disposition"].to_str().unwrap().contains("archive.zip"));
    let bytes = response.bytes().await.unwrap();
    assert_eq!(unpack(&bytes), expected);

    // One folder chosen: the archive is named after it.
    let ticket = token(&app, "/file/archive", Some(&owner.access), &[], json!({"ids": [docs]})).await;
    let response = fetch(&app, &ticket).await;
    assert!(response.headers()["content-disposition"].to_str().unwrap().contains("docs.zip"));
    let only_docs: Expected = expected.into_iter().filter(|(path, _)| path.starts_with("docs/")).collect();
    assert_eq!(unpack(&response.bytes().await.unwrap()), only_docs);
}

async fn an_archive_token_works_once_and_only_for_the_callers_objects(app: TestApp) {
    let owner = app.register("owner@example.com", "archive-owner-password").await;
    let stranger = app.register("stranger@example.com", "archive-stranger-password").await;
    let (docs, _, _) = tree(&app, &owner).await;

    let ticket = token(&app, "/file/archive", Some(&owner.access), &[], json!({"ids": [docs]})).await;
    let head = app.client.head(format!("{}{}", app.base_url, ticket["url"].as_str().unwrap())).send().await.unwrap();
    assert_eq!(head.status(), 200, "HEAD does not use the token up");
    assert_eq!(fetch(&app, &ticket).await.status(), 200);
    assert_eq!(error_body(fetch(&app, &ticket).await, 409).await["code"], "archive.token_used");

    // Two masters sharing Redis (the PostgreSQL runs; SQLite runs with the in-memory store, one
    // master by design): a token made on one is used on the other, and only once.
    if app.backend == nubo_tests::Backend::Postgres {
        let peer = app.spawn_peer().await;
        let ticket = token(&app, "/file/archive", Some(&owner.access), &[], json!({"ids": [docs]})).await;
        let on_peer = format!("http://{}{}", peer.addr, ticket["url"].as_str().unwrap());
        let first = app.client.get(&on_peer).send().await.unwrap();
        assert_eq!(first.status(), 200, "first use, on the second master");
        assert!(!unpack(&first.bytes().await.unwrap()).is_empty());
        assert_eq!(error_body(fetch(&app, &ticket).await, 409).await["code"], "archive.token_used");
    }
    let made_up = app.get("/file/archive/bm90LWEtcmVhbC10b2tlbi1hdC1hbGwtbm90LWF0LWFsbA").await;
    assert_eq!(error_body(made_up, 404).await["code"], "archive.not_found");

    // Someone else's folder, a made-up id: missing, as everywhere.
    for foreign in [docs.clone(), uuid::Uuid::new_v4().to_string()] {
        let response =
            archive_request(&app, "/file/archive", Some(&stranger.access), &[], json!({"ids": [foreign]})).await;
        assert_eq!(error_body(response, 404).await["code"], "object.not_found");
    }
    let anonymous = archive_request(&app, "/file/archive", None, &[], json!({"ids": [docs]})).await;
    assert_eq!(anonymous.status(), 401);
    let empty = archive_request(&app, "/file/archive", Some(&owner.access), &[], json!({"ids": []})).await;
    assert_eq!(error_body(empty, 422).await["field"], "ids");

    // Trashed after the token was made: the archive is refused, not served without it.
    let ticket = token(&app, "/file/archive", Some(&owner.access), &[], json!({"ids": [docs]})).await;
    let trash = app.call(Method::DELETE, "/object", Some(&owner.access), Some(json!({"ids": [docs]}))).await;
    assert!(trash.status().is_success());
    assert_eq!(error_body(fetch(&app, &ticket).await, 404).await["code"], "object.not_found");
}

async fn share(app: &TestApp, owner: &Session, body: Value) -> String {
    let response = app.call(Method::POST, "/share", Some(&owner.access), Some(body)).await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap_or_default());
    response.json::<Value>().await.unwrap()["code"].as_str().unwrap().to_owned()
}

async fn downloads_of(app: &TestApp, owner: &Session, code: &str) -> i64 {
    let list: Value = app.call(Method::GET, "/share", Some(&owner.access), None).await.json().await.unwrap();
    let share = list["items"].as_array().unwrap().iter().find(|s| s["code"] == code).cloned().expect("listed");
    share["downloads"].as_i64().unwrap()
}

async fn a_share_archive_counts_one_download_and_stays_inside_the_share(app: TestApp) {
    let owner = app.register("owner@example.com", "archive-owner-password").await;
    let (docs, notes, expected) = tree(&app, &owner).await;
    let code = share(&app, &owner, json!({"object_id": docs, "max_downloads": 2})).await;
    let path = format!("/share/{code}/archive");

    // The whole share, by default, with no account.
    let ticket = token(&app, &path, None, &[], json!({})).await;
    let bytes = fetch(&app, &ticket).await.bytes().await.unwrap();
    let only_docs: Expected =
        expected.iter().filter(|(p, _)| p.starts_with("docs/")).map(|(p, h)| (p.clone(), h.clone())).collect();
    assert_eq!(unpack(&bytes), only_docs);
    assert_eq!(downloads_of(&app, &owner, &code).await, 1, "one archive, one download");

    // Objects outside the share, whatever else is chosen with them.
    let inside: Value =
        app.call(Method::GET, &format!("/share/{code}/children"), None, None).await.json().await.unwrap();
    let anger = inside["items"].as_array().unwrap().iter().find(|e| e["name"] == "Ärger").unwrap()["id"].clone();
    for outside in [notes.clone(), uuid::Uuid::new_v4().to_string()] {
        let response = archive_request(&app, &path, None, &[], json!({"ids": [anger, outside]})).await;
        assert_eq!(error_body(response, 404).await["code"], "object.not_found", "{outside}");
    }
    let chosen = token(&app, &path, None, &[], json!({"ids": [anger]})).await;
    let bytes = fetch(&app, &chosen).await.bytes().await.unwrap();
    assert!(unpack(&bytes).contains_key("Ärger/tief/big.bin"), "a folder chosen inside the share is the archive's top");
    assert_eq!(downloads_of(&app, &owner, &code).await, 2);

    // The limit is reached: a token is refused, and so would be one made before.
    let over = archive_request(&app, &path, None, &[], json!({})).await;
    assert_eq!(error_body(over, 410).await["code"], "share.download_limit_reached");

    // A password-protected share needs its grant.
    let locked = share(&app, &owner, json!({"object_id": docs, "password": "open sesame"})).await;
    let locked_path = format!("/share/{locked}/archive");
    let refused = archive_request(&app, &locked_path, None, &[], json!({})).await;
    assert_eq!(error_body(refused, 401).await["code"], "share.password_required");
    let view: Value = app
        .request(Method::GET, &format!("/share/{locked}"))
        .header("x-share-password", "open sesame")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let grant = view["grant"].as_str().unwrap();
    let ticket = token(&app, &locked_path, None, &[("x-share-grant", grant)], json!({})).await;
    assert_eq!(unpack(&fetch(&app, &ticket).await.bytes().await.unwrap()), only_docs);
}

async fn a_file_that_cannot_be_read_breaks_the_archive_instead_of_shortening_it(app: TestApp) {
    let owner = app.register("owner@example.com", "archive-owner-password").await;
    let root = app.root_id(&owner).await;
    let folder = app.mkdir(&owner, &root, "broken").await;
    app.upload(&owner, &folder, "a-fine.bin", &content(512 * 1024, 1)).await;
    let damaged = content(2 * 1024 * 1024, 2);
    app.upload(&owner, &folder, "b-damaged.bin", &damaged).await;
    // Cut the second blob short on disk, behind the master's back.
    let blob = files_below(&app.config.data_dir)
        .into_iter()
        .find(|path| std::fs::metadata(path).map(|m| m.len()).ok() == Some(damaged.len() as u64))
        .expect("the damaged file's blob");
    std::fs::OpenOptions::new().write(true).open(&blob).unwrap().set_len(1000).unwrap();

    let ticket = token(&app, "/file/archive", Some(&owner.access), &[], json!({"ids": [folder]})).await;
    let response = fetch(&app, &ticket).await;
    assert_eq!(response.status(), 200, "the answer started before the damage was met");
    assert!(response.bytes().await.is_err(), "the transfer breaks rather than ending as a valid ZIP");
}
