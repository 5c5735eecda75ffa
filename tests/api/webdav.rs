//! WebDAV: accounts, Basic sign-in, the methods over Nubo's tree, streamed writes that keep
//! nothing on failure, and real clients (litmus, rclone) run against a real master.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use nubo_tests::cluster::TestNode;
use nubo_tests::dav::DavUser;
use nubo_tests::files::{PolicyKind, content};
use nubo_tests::{Session, TestApp, error_body, on_every_backend, on_every_backend_and_storage, settled};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

on_every_backend!(
    accounts_are_the_callers_own_and_changes_reach_sign_in_at_once,
    the_methods_work_on_nubos_tree,
    the_quick_propfind_answers_as_dav_server_does,
    paths_deeper_than_one_walk_statement_resolve,
    a_root_and_read_only_confine_an_account,
    another_users_tree_is_out_of_reach,
    quota_and_max_size_are_enforced_while_bytes_arrive,
    a_new_file_goes_to_a_policy_the_group_may_use,
    a_write_cut_off_mid_body_leaves_nothing,
    an_overwrite_is_atomic_and_releases_the_old_blob,
    a_small_body_the_policy_holds_is_not_stored_again,
    of_two_overlapping_overwrites_the_first_to_finish_wins,
    files_round_trip_on_a_storage_node,
    litmus_passes_every_suite,
    rclone_copies_a_mixed_tree_up_and_back,
);
on_every_backend_and_storage!(files_round_trip_on_every_storage);

/// Runs `litmus` against `/dav`; every suite (basic, copymove, props, locks, http) must pass.
async fn litmus_passes_every_suite(app: TestApp) {
    if Command::new("litmus").arg("--version").output().is_err() {
        assert!(!nubo_tests::services_required(), "litmus is not installed (apt-get install litmus)");
        return;
    }
    let (_session, dav) = app.dav_user("litmus@example.com", "litmus").await;
    nubo_tests::dav::assert_litmus_passes(&dav).await;
}

/// A request body fed by the test: chunked (no `Content-Length`), ended by dropping the sender
/// (complete) or by sending an error (the client gives up mid-body).
fn fed_body() -> (mpsc::Sender<Result<Vec<u8>, std::io::Error>>, reqwest::Body) {
    let (sender, receiver) = mpsc::channel::<Result<Vec<u8>, std::io::Error>>(4);
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|piece| (piece, receiver))
    });
    (sender, reqwest::Body::wrap_stream(stream))
}

/// Names of the objects in the user's root folder.
async fn root_names(app: &TestApp, user: &Session) -> Vec<String> {
    let listing: Value = app.call(Method::GET, "/directory", Some(&user.access), None).await.json().await.unwrap();
    listing["items"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap().to_owned()).collect()
}

/// What the user is charged once the master has dealt with a write that was cut off.
async fn settled_storage(app: &TestApp, user: &Session, expected: i64) -> i64 {
    settled(expected, || app.storage_used(user)).await
}

fn basic_header(dav: &DavUser) -> String {
    let request =
        reqwest::Client::new().get("http://x/").basic_auth(&dav.username, Some(&dav.password)).build().unwrap();
    request.headers()["authorization"].to_str().unwrap().to_owned()
}

async fn accounts_are_the_callers_own_and_changes_reach_sign_in_at_once(app: TestApp) {
    let admin = app.login_admin().await;
    let user = app.register("ada@example.com", "password-123").await;

    // Without a password the server generates one and shows it once.
    let response =
        app.call(Method::POST, "/webdav/accounts", Some(&user.access), Some(json!({"name": "laptop"}))).await;
    assert_eq!(response.status(), 201);
    let created: Value = response.json().await.unwrap();
    let generated = created["password"].as_str().expect("generated password shown").to_owned();
    assert!(generated.len() >= 16, "{generated}");
    assert_eq!(created["root"], "/");
    let id = created["id"].as_str().unwrap().to_owned();
    let listed: Value = app.call(Method::GET, "/webdav/accounts", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(listed[0].get("password").is_none() && listed[0].get("password_hash").is_none(), "{listed}");
    let one: Value =
        app.call(Method::GET, &format!("/webdav/accounts/{id}"), Some(&user.access), None).await.json().await.unwrap();
    assert!(one.get("password").is_none(), "shown once only: {one}");

    let again = app.call(Method::POST, "/webdav/accounts", Some(&user.access), Some(json!({"name": "laptop"}))).await;
    assert_eq!(error_body(again, 409).await["code"], "webdav.name_taken");
    let nowhere = json!({"name": "phone", "root": "/no/such/folder"});
    let response = app.call(Method::POST, "/webdav/accounts", Some(&user.access), Some(nowhere)).await;
    let body = error_body(response, 422).await;
    assert_eq!(
        (body["code"].as_str(), body["field"].as_str()),
        (Some("request.invalid_field"), Some("root")),
        "{body}"
    );

    // Someone else's account is invisible.
    let other = app.register("eve@example.com", "password-123").await;
    for method in [Method::GET, Method::DELETE] {
        let response = app.call(method.clone(), &format!("/webdav/accounts/{id}"), Some(&other.access), None).await;
        assert_eq!(response.status(), 404, "{method} of another user's account");
    }
    let patch = json!({"read_only": true});
    let response = app.call(Method::PATCH, &format!("/webdav/accounts/{id}"), Some(&other.access), Some(patch)).await;
    assert_eq!(response.status(), 404);

    // Sign-in: no credentials and wrong ones are 401 with a Basic challenge.
    let client = reqwest::Client::new();
    let dav_url = format!("{}/dav/", app.base_url);
    let anonymous = client.request(Method::from_bytes(b"PROPFIND").unwrap(), &dav_url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let challenge = anonymous.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(challenge.starts_with("Basic realm="), "{challenge}");
    let wrong = client.get(&dav_url).basic_auth("ada@example.com/laptop", Some("wrong-password")).send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().contains_key("www-authenticate"));
    let signed_in = |password: &str| {
        client
            .request(Method::from_bytes(b"PROPFIND").unwrap(), &dav_url)
            .header("Depth", "0")
            .basic_auth("ada@example.com/laptop", Some(password.to_owned()))
            .send()
    };
    assert_eq!(signed_in(&generated).await.unwrap().status(), 207);
    assert_eq!(signed_in(&generated).await.unwrap().status(), 207, "again, from the cache");

    // A new password works at once and the old one stops working at once (the cache is dropped).
    let change = json!({"password": "a-brand-new-password"});
    let response = app.call(Method::PATCH, &format!("/webdav/accounts/{id}"), Some(&user.access), Some(change)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(signed_in(&generated).await.unwrap().status(), 401, "old password after a change");
    assert_eq!(signed_in("a-brand-new-password").await.unwrap().status(), 207);

    // A ban bites a cached sign-in.
    let response = app
        .call(
            Method::PATCH,
            &format!("/admin/user/{}", user.user_id),
            Some(&admin.access),
            Some(json!({"status": "BANNED"})),
        )
        .await;
    assert_eq!(response.status(), 200);
    let banned = signed_in("a-brand-new-password").await.unwrap();
    assert_eq!(error_body(banned, 403).await["code"], "auth.user_inactive");
    let response = app
        .call(
            Method::PATCH,
            &format!("/admin/user/{}", user.user_id),
            Some(&admin.access),
            Some(json!({"status": "ACTIVE"})),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(signed_in("a-brand-new-password").await.unwrap().status(), 207, "unbanned");

    // Deleting the account ends its sign-in at once.
    let response = app.call(Method::DELETE, &format!("/webdav/accounts/{id}"), Some(&user.access), None).await;
    assert_eq!(response.status(), 204);
    assert_eq!(signed_in("a-brand-new-password").await.unwrap().status(), 401, "deleted account");

    // A group without the WebDAV permission may not create accounts.
    let mut permissions: Value = app
        .call(Method::GET, &format!("/admin/group/{}", app.group_id(&admin, "Users").await), Some(&admin.access), None)
        .await
        .json::<Value>()
        .await
        .unwrap()["permissions"]
        .clone();
    permissions["webdav"] = json!(false);
    app.set_user_group(&admin, json!({"permissions": permissions})).await;
    let response = app.call(Method::POST, "/webdav/accounts", Some(&user.access), Some(json!({"name": "later"}))).await;
    assert_eq!(error_body(response, 401).await["code"], "auth.token_revoked", "the group's claims changed");
    let user = app.login("ada@example.com", "password-123").await;
    let response = app.call(Method::POST, "/webdav/accounts", Some(&user.access), Some(json!({"name": "later"}))).await;
    assert_eq!(error_body(response, 403).await["code"], "webdav.not_allowed");
}

async fn the_methods_work_on_nubos_tree(app: TestApp) {
    let admin = app.login_admin().await;
    let capacity: i64 = 50 * 1024 * 1024;
    app.set_user_group(&admin, json!({"max_storage": capacity})).await;
    let (user, dav) = app.dav_user("ben@example.com", "desk").await;
    let bytes = content(300_000, 3);

    assert_eq!(dav.put("/a.bin", bytes.clone()).await.status(), 201);
    assert_eq!(dav.put("/a.bin", bytes.clone()).await.status(), 204, "overwrite");
    assert_eq!(root_names(&app, &user).await, ["a.bin"], "the file is in the user's tree");
    let got = dav.get("/a.bin").await;
    assert_eq!(got.status(), 200);
    let etag = got.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(got.bytes().await.unwrap().as_ref(), bytes.as_slice());

    let head = dav.request("HEAD", "/a.bin").send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-length"], "300000");
    assert_eq!(head.headers()["etag"].to_str().unwrap(), etag);
    let range = dav.request("GET", "/a.bin").header("Range", "bytes=1000-1999").send().await.unwrap();
    assert_eq!(range.status(), 206);
    assert_eq!(range.headers()["content-range"], "bytes 1000-1999/300000");
    assert_eq!(range.bytes().await.unwrap().as_ref(), &bytes[1000..2000]);
    let tail = dav.request("GET", "/a.bin").header("Range", "bytes=-10").send().await.unwrap();
    assert_eq!(tail.bytes().await.unwrap().as_ref(), &bytes[bytes.len() - 10..]);
    let cached = dav.request("GET", "/a.bin").header("If-None-Match", &etag).send().await.unwrap();
    assert_eq!(cached.status(), 304);
    let beyond = dav.request("GET", "/a.bin").header("Range", "bytes=400000-").send().await.unwrap();
    assert_eq!(beyond.status(), 416);

    // Folders, listing and the refused infinite depth.
    assert_eq!(dav.request("MKCOL", "/docs/").send().await.unwrap().status(), 201);
    assert_eq!(dav.request("MKCOL", "/docs/").send().await.unwrap().status(), 405, "exists");
    assert_eq!(dav.request("MKCOL", "/no/such/").send().await.unwrap().status(), 409, "parent missing");
    assert_eq!(dav.put("/missing/x.txt", "x").await.status(), 409);
    assert_eq!(dav.put("/docs/ünïcødé & co.txt", "hello").await.status(), 201);
    let (status, listing) = dav.propfind("/", "1").await;
    assert_eq!(status, 207);
    assert!(listing.contains("a.bin") && listing.contains("/dav/docs/"), "{listing}");
    assert!(!listing.contains("%C3%BCn"), "depth 1 stops at the root's children: {listing}");
    let (status, listing) = dav.propfind("/docs/", "1").await;
    assert_eq!(status, 207);
    assert!(listing.contains("%C3%BCn%C3%AFc%C3%B8d%C3%A9"), "{listing}");
    let (status, _) = dav.propfind("/", "0").await;
    assert_eq!(status, 207);
    let (status, body) = dav.propfind("/", "infinity").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("propfind-finite-depth"), "{body}");

    // COPY and MOVE, inside the account's tree.
    let copy = dav.request("COPY", "/a.bin").header("Destination", format!("{}/docs/b.bin", dav.base)).send().await;
    assert_eq!(copy.unwrap().status(), 201);
    assert_eq!(dav.get("/docs/b.bin").await.bytes().await.unwrap().as_ref(), bytes.as_slice());
    let refused = dav
        .request("COPY", "/a.bin")
        .header("Destination", format!("{}/docs/b.bin", dav.base))
        .header("Overwrite", "F")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 412, "Overwrite: F onto an existing file");
    let moved = dav.request("MOVE", "/docs/").header("Destination", format!("{}/papers/", dav.base)).send().await;
    assert_eq!(moved.unwrap().status(), 201);
    assert_eq!(dav.get("/papers/b.bin").await.status(), 200);
    assert_eq!(dav.get("/docs/b.bin").await.status(), 404);
    for outside in [app.api("/a.bin"), format!("{}/../api/v1/a.bin", dav.base)] {
        let response = dav.request("COPY", "/a.bin").header("Destination", &outside).send().await.unwrap();
        assert_eq!(error_body(response, 502).await["code"], "dav.destination_outside", "{outside}");
    }

    // PROPPATCH keeps dead properties in the object's metadata.
    let patch = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:example"><D:set><D:prop><Z:colour>teal</Z:colour></D:prop></D:set></D:propertyupdate>"#;
    let response = dav.request("PROPPATCH", "/a.bin").body(patch).send().await.unwrap();
    assert_eq!(response.status(), 207);
    let ask = r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:Z="urn:example"><D:prop><Z:colour/></D:prop></D:propfind>"#;
    let found = dav.request("PROPFIND", "/a.bin").header("Depth", "0").body(ask).send().await.unwrap();
    let found = found.text().await.unwrap();
    assert!(found.contains("teal"), "{found}");

    // Quota properties reflect the user's quota.
    let used = app.storage_used(&user).await;
    let ask = r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:quota-used-bytes/><D:quota-available-bytes/></D:prop></D:propfind>"#;
    let quota = dav.request("PROPFIND", "/").header("Depth", "0").body(ask).send().await.unwrap().text().await.unwrap();
    assert!(quota.contains(&format!("quota-used-bytes>{used}<")), "used {used}: {quota}");
    let available = capacity - used;
    assert!(quota.contains(&format!("quota-available-bytes>{available}<")), "available {available}: {quota}");

    // DELETE moves to the trash.
    assert_eq!(dav.request("DELETE", "/a.bin").send().await.unwrap().status(), 204);
    assert_eq!(dav.get("/a.bin").await.status(), 404);
    let trash: Value = app.call(Method::GET, "/trash", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(trash["count"], 1, "{trash}");
    assert_eq!(trash["items"][0]["name"], "a.bin");
}

/// The common `PROPFIND` (Depth 0 or 1, live properties by name) is answered without
/// dav-server; adding a property nobody has sends the same request to dav-server, which leaves
/// unknown properties out: both answers must be the same bytes.
async fn the_quick_propfind_answers_as_dav_server_does(app: TestApp) {
    let (_, dav) = app.dav_user("pia@example.com", "list").await;
    assert_eq!(dav.request("MKCOL", "/list/").send().await.unwrap().status(), 201);
    assert_eq!(dav.request("MKCOL", "/list/sub/").send().await.unwrap().status(), 201);
    // Names as they go in a URL: `b c#&%.bin` needs its `#` and `%` encoded.
    for (name, body) in [("a.txt", "text"), ("b%20c%23&%25.bin", "bytes"), ("ünï €.json", "{}"), ("empty", "")] {
        assert_eq!(dav.put(&format!("/list/{name}"), body).await.status(), 201, "{name}");
    }
    let props = "<D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/>\
                 <D:getcontenttype/><D:displayname/><D:creationdate/>";
    let quick = format!(r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop>{props}</D:prop></D:propfind>"#);
    let general = format!(
        r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop>{props}<D:no-such-prop/></D:prop></D:propfind>"#
    );
    let propfind = |path: &'static str, depth: &'static str, body: String| {
        let request = dav.request("PROPFIND", path).header("Depth", depth).body(body);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let kind = response.headers()["content-type"].to_str().unwrap().to_owned();
            (status, kind, response.text().await.unwrap())
        }
    };
    for (path, depth, responses) in
        [("/list/", "1", 6), ("/list/", "0", 1), ("/list/a.txt", "0", 1), ("/list/a.txt", "1", 1)]
    {
        let (status, kind, answer) = propfind(path, depth, quick.clone()).await;
        assert_eq!((status, kind.as_str()), (207, "application/xml; charset=utf-8"), "{path} {depth}: {answer}");
        assert_eq!(answer.matches("<D:response>").count(), responses, "{path} {depth}: {answer}");
        let (_, _, reference) = propfind(path, depth, general.clone()).await;
        assert_eq!(answer, reference, "{path} Depth {depth}");
    }
    let (_, _, listing) = propfind("/list/", "1", quick.clone()).await;
    for expected in
        ["/dav/list/sub/", "/dav/list/b%20c%23%26%25.bin", "<D:getcontenttype>application/json<", "<D:collection>"]
    {
        assert!(listing.contains(expected), "{expected}: {listing}");
    }

    // With a dead property in the folder, dav-server answers (and adds the dead properties).
    let patch = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:example"><D:set><D:prop><Z:mood>calm</Z:mood></D:prop></D:set></D:propertyupdate>"#;
    assert_eq!(dav.request("PROPPATCH", "/list/a.txt").body(patch).send().await.unwrap().status(), 207);
    let (status, _, listing) = propfind("/list/", "1", quick).await;
    assert_eq!(status, 207);
    assert!(listing.contains("calm"), "{listing}");
}

/// A path is resolved 16 names per statement: 20 levels take two, and a missing name in the
/// second part is still a 404 (and a 409 for a write below it).
async fn paths_deeper_than_one_walk_statement_resolve(app: TestApp) {
    let (_, dav) = app.dav_user("deb@example.com", "deep").await;
    let mut path = String::new();
    for level in 0..20 {
        path.push_str(&format!("/d{level}"));
        assert_eq!(dav.request("MKCOL", &format!("{path}/")).send().await.unwrap().status(), 201, "{path}");
    }
    assert_eq!(dav.put(&format!("{path}/deep.txt"), "at the bottom").await.status(), 201);
    assert_eq!(dav.get(&format!("{path}/deep.txt")).await.text().await.unwrap(), "at the bottom");
    let (status, listing) = dav.propfind(&format!("{path}/"), "1").await;
    assert_eq!(status, 207);
    assert!(listing.contains("/d19/deep.txt"), "{listing}");
    let missing = path.replace("/d17/", "/nope/");
    assert_eq!(dav.get(&format!("{missing}/deep.txt")).await.status(), 404);
    assert_eq!(dav.put(&format!("{missing}/new.txt"), "x").await.status(), 409);
}

async fn a_root_and_read_only_confine_an_account(app: TestApp) {
    let (user, whole) = app.dav_user("cy@example.com", "all").await;
    assert_eq!(whole.request("MKCOL", "/photos/").send().await.unwrap().status(), 201);
    assert_eq!(whole.put("/photos/cat.jpg", "meow").await.status(), 201);
    assert_eq!(whole.put("/secret.txt", "hidden").await.status(), 201);

    let photos = app.dav_account(&user, "cy@example.com", "photos", json!({"root": "/photos"})).await;
    let (status, listing) = photos.propfind("/", "1").await;
    assert_eq!(status, 207);
    assert!(listing.contains("cat.jpg") && !listing.contains("secret.txt"), "{listing}");
    assert_eq!(photos.get("/cat.jpg").await.text().await.unwrap(), "meow");
    let escape = photos.request("COPY", "/cat.jpg").header("Destination", format!("{}/../cat.jpg", photos.base));
    assert_eq!(error_body(escape.send().await.unwrap(), 502).await["code"], "dav.destination_outside");
    assert_eq!(root_names(&app, &user).await, ["photos", "secret.txt"], "nothing landed outside the root");

    let viewer = app.dav_account(&user, "cy@example.com", "viewer", json!({"read_only": true})).await;
    assert_eq!(viewer.get("/secret.txt").await.text().await.unwrap(), "hidden");
    assert_eq!(viewer.propfind("/", "1").await.0, 207);
    let copy_to = format!("{}/copy.txt", viewer.base);
    let lock = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#;
    let writes = [
        viewer.request("PUT", "/new.txt").body("x"),
        viewer.request("PUT", "/secret.txt").body("changed"),
        viewer.request("MKCOL", "/folder/"),
        viewer.request("DELETE", "/secret.txt"),
        viewer.request("COPY", "/secret.txt").header("Destination", &copy_to),
        viewer.request("MOVE", "/secret.txt").header("Destination", &copy_to),
        viewer.request("PROPPATCH", "/secret.txt").body("<x/>"),
        viewer.request("LOCK", "/secret.txt").body(lock),
    ];
    for write in writes {
        let response = write.send().await.unwrap();
        assert_eq!(error_body(response, 403).await["code"], "webdav.read_only");
    }
    assert_eq!(whole.get("/secret.txt").await.text().await.unwrap(), "hidden", "unchanged");
    assert_eq!(root_names(&app, &user).await, ["photos", "secret.txt"]);

    // An account whose root folder is gone says so, and does not fall back to the whole tree.
    assert_eq!(whole.request("DELETE", "/photos/").send().await.unwrap().status(), 204);
    assert_eq!(error_body(photos.get("/cat.jpg").await, 404).await["code"], "webdav.root_missing");
    assert_eq!(error_body(photos.put("/secret.txt", "x").await, 404).await["code"], "webdav.root_missing");
    assert_eq!(whole.get("/secret.txt").await.text().await.unwrap(), "hidden");
}

/// Paths are walked from the caller's own root: the same path in another user's tree answers
/// as missing, whatever the method, and nothing of it changes.
async fn another_users_tree_is_out_of_reach(app: TestApp) {
    let (owner, mine) = app.dav_user("dora@example.com", "desk").await;
    assert_eq!(mine.request("MKCOL", "/private/").send().await.unwrap().status(), 201);
    assert_eq!(mine.put("/private/secret.txt", "hidden").await.status(), 201);
    let (_intruder, theirs) = app.dav_user("mallory@example.com", "desk").await;
    assert_eq!(theirs.request("MKCOL", "/private/").send().await.unwrap().status(), 201, "a name of their own");
    let moved = format!("{}/private/mine.txt", theirs.base);
    let attempts = [
        theirs.request("GET", "/private/secret.txt"),
        theirs.request("PROPFIND", "/private/secret.txt").header("Depth", "0"),
        theirs.request("PROPPATCH", "/private/secret.txt").body("<x/>"),
        theirs.request("DELETE", "/private/secret.txt"),
        theirs.request("COPY", "/private/secret.txt").header("Destination", &moved),
        theirs.request("MOVE", "/private/secret.txt").header("Destination", &moved),
    ];
    for attempt in attempts {
        let response = attempt.send().await.unwrap();
        assert_eq!(response.status(), 404, "{}", response.url());
    }
    assert_eq!(mine.get("/private/secret.txt").await.text().await.unwrap(), "hidden", "unchanged");
    let (_, listing) = theirs.propfind("/private/", "1").await;
    assert!(!listing.contains("secret.txt") && !listing.contains("mine.txt"), "{listing}");
    assert_eq!(root_names(&app, &owner).await, ["private"]);
}

async fn quota_and_max_size_are_enforced_while_bytes_arrive(app: TestApp) {
    // Without versions: the replaced content is released (versions: tests/api/versions.rs).
    app.keep_no_versions(&app.login_admin().await).await;
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, PolicyKind::Local, 2 * 1024 * 1024).await;
    app.set_user_group(&admin, json!({"max_storage": 1024 * 1024})).await;
    let (user, dav) = app.dav_user("dee@example.com", "sync").await;
    assert_eq!(dav.put("/base.bin", content(700_000, 1)).await.status(), 201);
    let used = app.storage_used(&user).await;
    assert_eq!(used, 700_000);

    // Declared too large: refused before a byte is read.
    let response = dav.put("/declared.bin", content(500_000, 2)).await;
    assert_eq!(error_body(response, 507).await["code"], "storage.quota_exceeded");
    // Chunked: no length, refused when the bytes go beyond the room left (324,288 bytes). The
    // client then waits with its body open: one still writing when the server stops reading
    // could see a broken pipe instead of the answer.
    let (sender, body) = fed_body();
    let feeder = tokio::spawn(async move {
        for seed in 0..4 {
            sender.send(Ok(content(100_000, seed))).await.unwrap();
        }
        std::future::pending::<()>().await;
    });
    let sent = tokio::time::timeout(Duration::from_secs(20), dav.request("PUT", "/chunked.bin").body(body).send());
    let response = sent.await.expect("refused while bytes arrive, not at the end").unwrap();
    assert_eq!(error_body(response, 507).await["code"], "storage.quota_exceeded");
    feeder.abort();
    // The policy's size limit answers 413, declared or chunked.
    let response = dav.put("/huge.bin", vec![0u8; 2 * 1024 * 1024 + 1]).await;
    assert_eq!(error_body(response, 413).await["code"], "file.too_large");

    assert_eq!(settled_storage(&app, &user, used).await, used, "no quota change");
    assert_eq!(root_names(&app, &user).await, ["base.bin"], "no partial file");
    assert_eq!(policy.stored_blobs(&app), 1, "no stray blob");

    // Nothing left at all: even a chunked write of a few bytes is refused at once.
    assert_eq!(dav.put("/fill.bin", content(1024 * 1024 - 700_000, 9)).await.status(), 201);
    let (sender, body) = fed_body();
    sender.send(Ok(b"tiny".to_vec())).await.unwrap();
    drop(sender);
    let response = dav.request("PUT", "/tiny.txt").body(body).send().await.unwrap();
    assert_eq!(error_body(response, 507).await["code"], "storage.quota_exceeded");
    assert_eq!(app.storage_used(&user).await, 1024 * 1024);
    assert_eq!(root_names(&app, &user).await, ["base.bin", "fill.bin"]);
    // An overwrite that fits in the space the old content frees is fine.
    assert_eq!(dav.put("/fill.bin", content(1000, 3)).await.status(), 204);
}

/// A `PUT` reads the group's policy while it walks the path: a group without one is refused
/// and nothing is stored; one given a policy writes there on its next request.
async fn a_new_file_goes_to_a_policy_the_group_may_use(app: TestApp) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, PolicyKind::Local, 0).await;
    let (user, dav) = app.dav_user("pol@example.com", "sync").await;
    app.set_user_group(&admin, json!({"policy_ids": []})).await;
    let response = dav.put("/first.bin", content(10_000, 1)).await;
    assert_eq!(error_body(response, 403).await["code"], "dav.forbidden");
    assert!(root_names(&app, &user).await.is_empty(), "no file");
    assert_eq!(app.storage_used(&user).await, 0, "no charge");
    assert_eq!(policy.stored_blobs(&app), 0, "no blob");

    app.set_user_group(&admin, json!({"policy_ids": [policy.id]})).await;
    assert_eq!(dav.put("/first.bin", content(10_000, 1)).await.status(), 201);
    assert_eq!(app.storage_used(&user).await, 10_000);
    assert_eq!(policy.stored_blobs(&app), 1);
}

async fn a_write_cut_off_mid_body_leaves_nothing(app: TestApp) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, PolicyKind::Local, 0).await;
    let (user, dav) = app.dav_user("eli@example.com", "backup").await;
    assert_eq!(dav.put("/keep.bin", content(10_000, 1)).await.status(), 201);
    let used = app.storage_used(&user).await;

    // A client that declares 1 MiB, sends 300 KiB and hangs up; and one that does the same with
    // a body small enough to be held until it ends (32 KiB declared, 10 KB sent).
    hang_up_mid_body(&app, &dav, "/cut.bin", 1024 * 1024, content(300_000, 2)).await;
    hang_up_mid_body(&app, &dav, "/small-cut.bin", 32 * 1024, content(10_000, 4)).await;

    // A chunked client whose body fails half-way.
    let (sender, body) = fed_body();
    let request = tokio::spawn(dav.request("PUT", "/broken.bin").body(body).send());
    sender.send(Ok(content(200_000, 3))).await.unwrap();
    sender.send(Err(std::io::Error::other("client gave up"))).await.unwrap();
    drop(sender);
    assert!(request.await.unwrap().is_err(), "the client saw its own failure");

    assert_eq!(settled_storage(&app, &user, used).await, used, "no quota change");
    assert_eq!(root_names(&app, &user).await, ["keep.bin"], "no partial file");
    assert_eq!(policy.settled_blobs(&app, 1).await, 1, "the partial bytes are gone from storage");
}

/// Sends a `PUT` declaring `declared` bytes, only `sent` of them, and closes the connection.
async fn hang_up_mid_body(app: &TestApp, dav: &DavUser, path: &str, declared: usize, sent: Vec<u8>) {
    let address = app.base_url.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "PUT /dav{path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: {}\r\nContent-Length: {declared}\r\n\r\n",
        basic_header(dav)
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(&sent).await.unwrap();
    socket.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(socket);
}

async fn an_overwrite_is_atomic_and_releases_the_old_blob(app: TestApp) {
    // Without versions: the replaced content is released (versions: tests/api/versions.rs).
    app.keep_no_versions(&app.login_admin().await).await;
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, PolicyKind::Local, 0).await;
    let (user, dav) = app.dav_user("fay@example.com", "edit").await;
    let old = content(400_000, 1);
    let new = content(600_000, 2);
    assert_eq!(dav.put("/doc.bin", old.clone()).await.status(), 201);

    let (sender, body) = fed_body();
    let request = tokio::spawn(dav.request("PUT", "/doc.bin").body(body).send());
    sender.send(Ok(new[..300_000].to_vec())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let during = dav.get("/doc.bin").await.bytes().await.unwrap();
    assert_eq!(during.as_ref(), old.as_slice(), "the old version stays readable during the write");
    sender.send(Ok(new[300_000..].to_vec())).await.unwrap();
    drop(sender);
    assert_eq!(request.await.unwrap().unwrap().status(), 204);

    assert_eq!(dav.get("/doc.bin").await.bytes().await.unwrap().as_ref(), new.as_slice());
    assert_eq!(app.storage_used(&user).await, 600_000, "charged for the new content only");
    assert_eq!(policy.settled_blobs(&app, 1).await, 1, "the old blob's reference was released");

    // A failed overwrite keeps the current version and its charge, whether its body was large
    // enough to stream (100 KB) or small enough to be held (10 KB).
    for (size, seed) in [(100_000, 5), (10_000, 6)] {
        let (sender, body) = fed_body();
        let request = tokio::spawn(dav.request("PUT", "/doc.bin").body(body).send());
        sender.send(Ok(content(size, seed))).await.unwrap();
        sender.send(Err(std::io::Error::other("cut"))).await.unwrap();
        drop(sender);
        assert!(request.await.unwrap().is_err());
        assert_eq!(settled_storage(&app, &user, 600_000).await, 600_000);
        assert_eq!(dav.get("/doc.bin").await.bytes().await.unwrap().as_ref(), new.as_slice());
    }
    // A small overwrite that completes replaces the content and settles the charge.
    let small = content(10_000, 7);
    assert_eq!(dav.put("/doc.bin", small.clone()).await.status(), 204);
    assert_eq!(dav.get("/doc.bin").await.bytes().await.unwrap().as_ref(), small.as_slice());
    assert_eq!(app.storage_used(&user).await, 10_000);
    assert_eq!(policy.settled_blobs(&app, 1).await, 1, "the replaced blob is gone");
}

/// A small body whose content the policy already holds is not stored again: a new file, or a
/// file's new content, refers to that blob. Such writes succeed even while the storage cannot
/// take a byte, and are charged.
async fn a_small_body_the_policy_holds_is_not_stored_again(app: TestApp) {
    // Without versions: the replaced content is released (versions: tests/api/versions.rs).
    app.keep_no_versions(&app.login_admin().await).await;
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, PolicyKind::Local, 0).await;
    let (user, dav) = app.dav_user("gus@example.com", "same").await;
    let body = content(4096, 11);
    assert_eq!(dav.put("/a.bin", body.clone()).await.status(), 201);
    // d.bin's content is also e.bin's, so overwriting d.bin releases no blob (that would need
    // the storage, which the test takes away).
    for name in ["/d.bin", "/e.bin"] {
        assert_eq!(dav.put(name, content(1000, 13)).await.status(), 201);
    }
    assert_eq!(policy.stored_blobs(&app), 2);

    // The storage takes no byte while its root is a plain file.
    let root = app.config.data_dir.join("small");
    let aside = app.config.data_dir.join("small-aside");
    std::fs::rename(&root, &aside).unwrap();
    std::fs::write(&root, b"not a folder").unwrap();
    let same = dav.put("/b.bin", body.clone()).await.status();
    let overwrite = dav.put("/d.bin", body.clone()).await.status();
    let itself = dav.put("/a.bin", body.clone()).await.status();
    let other = dav.put("/c.bin", content(4096, 12)).await.status();
    std::fs::remove_file(&root).unwrap();
    std::fs::rename(&aside, &root).unwrap();
    assert_eq!(same, 201, "the same content needs no storage");
    assert_eq!(overwrite, 204, "nor does an overwrite with it");
    assert_eq!(itself, 204, "nor an overwrite with the file's own content");
    assert!(other.is_server_error(), "new content does: {other}");

    for name in ["/a.bin", "/b.bin", "/d.bin"] {
        assert_eq!(dav.get(name).await.bytes().await.unwrap().as_ref(), body.as_slice(), "{name}");
    }
    assert_eq!(dav.get("/e.bin").await.bytes().await.unwrap().as_ref(), content(1000, 13).as_slice());
    assert_eq!(root_names(&app, &user).await, ["a.bin", "b.bin", "d.bin", "e.bin"]);
    assert_eq!(app.storage_used(&user).await, 3 * 4096 + 1000, "each file is charged for its content");
    assert_eq!(policy.stored_blobs(&app), 2, "no blob was added");
}

/// Two overwrites of one file that overlap both plan against the same content. The first to
/// finish replaces it; the second is refused and leaves the file, the charge and the blobs as
/// the first left them (it must not drop the reference the first already dropped). A write
/// into a file that went to the trash meanwhile is refused the same way.
async fn of_two_overlapping_overwrites_the_first_to_finish_wins(app: TestApp) {
    // Without versions: the replaced content is released (versions: tests/api/versions.rs).
    app.keep_no_versions(&app.login_admin().await).await;
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, PolicyKind::Local, 0).await;
    let (user, dav) = app.dav_user("hal@example.com", "edit").await;
    let (original, first, second) = (content(100_000, 1), content(200_000, 2), content(300_000, 3));
    assert_eq!(dav.put("/doc.bin", original).await.status(), 201);
    let (first_sender, first_body) = fed_body();
    let first_request = tokio::spawn(dav.request("PUT", "/doc.bin").body(first_body).send());
    let (second_sender, second_body) = fed_body();
    let second_request = tokio::spawn(dav.request("PUT", "/doc.bin").body(second_body).send());
    first_sender.send(Ok(first[..100_000].to_vec())).await.unwrap();
    second_sender.send(Ok(second[..100_000].to_vec())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    first_sender.send(Ok(first[100_000..].to_vec())).await.unwrap();
    drop(first_sender);
    assert_eq!(first_request.await.unwrap().unwrap().status(), 204);
    second_sender.send(Ok(second[100_000..].to_vec())).await.unwrap();
    drop(second_sender);
    assert_eq!(second_request.await.unwrap().unwrap().status(), 403, "the file changed meanwhile");

    assert_eq!(dav.get("/doc.bin").await.bytes().await.unwrap().as_ref(), first.as_slice());
    assert_eq!(settled_storage(&app, &user, 200_000).await, 200_000);
    assert_eq!(policy.settled_blobs(&app, 1).await, 1, "the original and the refused content are gone");
    // Writing the same content again refers to the blob already there.
    assert_eq!(dav.put("/doc.bin", first.clone()).await.status(), 204);
    assert_eq!(dav.get("/doc.bin").await.bytes().await.unwrap().as_ref(), first.as_slice());
    assert_eq!(policy.settled_blobs(&app, 1).await, 1);
    assert_eq!(app.storage_used(&user).await, 200_000);

    // A file moved to the trash while new content arrives keeps the content it had.
    let (sender, body) = fed_body();
    let request = tokio::spawn(dav.request("PUT", "/doc.bin").body(body).send());
    sender.send(Ok(second[..100_000].to_vec())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(dav.request("DELETE", "/doc.bin").send().await.unwrap().status(), 204);
    sender.send(Ok(second[100_000..].to_vec())).await.unwrap();
    drop(sender);
    assert_eq!(request.await.unwrap().unwrap().status(), 403, "the file went to the trash meanwhile");
    assert_eq!(policy.settled_blobs(&app, 1).await, 1, "the trashed file keeps its blob, nothing else stays");
    assert_eq!(app.storage_used(&user).await, 200_000, "the trash still counts, the refused write does not");
}

/// Local disk and S3: bytes round-trip, identical content is stored once, a copy shares it.
async fn files_round_trip_on_every_storage(app: TestApp, kind: PolicyKind) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, kind, 0).await;
    let (user, dav) = app.dav_user("gil@example.com", "any").await;
    let bytes = content(policy.chunk * 2 + 12_345, 4);
    assert_eq!(dav.put("/one.bin", bytes.clone()).await.status(), 201);
    assert_eq!(dav.put("/two.bin", bytes.clone()).await.status(), 201);
    let copy = dav.request("COPY", "/one.bin").header("Destination", format!("{}/three.bin", dav.base));
    assert_eq!(copy.send().await.unwrap().status(), 201);
    for name in ["one.bin", "two.bin", "three.bin"] {
        assert_eq!(dav.get(&format!("/{name}")).await.bytes().await.unwrap().as_ref(), bytes.as_slice(), "{name}");
    }
    let range = dav.request("GET", "/two.bin").header("Range", "bytes=100000-100099").send().await.unwrap();
    assert_eq!(range.bytes().await.unwrap().as_ref(), &bytes[100_000..100_100]);
    // The second write's own copy is removed after its answer.
    assert_eq!(policy.settled_blobs(&app, 1).await, 1, "identical content stored once");
    assert_eq!(app.storage_used(&user).await, 3 * bytes.len() as i64, "each file is charged");
}

/// A policy on a storage node: the master streams WebDAV bytes to and from the node.
async fn files_round_trip_on_a_storage_node(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    app.use_node_policy(&admin, &node, true).await;
    let (_user, dav) = app.dav_user("hal@example.com", "node").await;
    let bytes = content(3 * 64 * 1024 + 77, 6);
    assert_eq!(dav.put("/on-node.bin", bytes.clone()).await.status(), 201);
    assert_eq!(node.blobs().len(), 1, "the bytes are on the node");
    assert_eq!(dav.get("/on-node.bin").await.bytes().await.unwrap().as_ref(), bytes.as_slice());
    let range = dav.request("GET", "/on-node.bin").header("Range", "bytes=70000-70009").send().await.unwrap();
    assert_eq!(range.bytes().await.unwrap().as_ref(), &bytes[70_000..70_010]);
}

/// Writes the tree rclone copies: nested folders, non-ASCII and awkward names, empty files and
/// folders, and one 100 MiB file.
fn write_mixed_tree(root: &Path) {
    let files: [(&str, usize); 13] = [
        ("readme.txt", 1200),
        ("nested/a/b/c/deep.txt", 5000),
        ("nested/a/sibling.bin", 70_000),
        ("ünïcødé/日本語のファイル.md", 3000),
        ("ünïcødé/émoji 🎉.txt", 42),
        ("awkward/space in name.txt", 10),
        ("awkward/percent%20literal.txt", 11),
        ("awkward/hash#and?query.txt", 12),
        ("awkward/quote'semi;plus+amp&.txt", 13),
        ("awkward/brackets [1] (2) {3}.txt", 14),
        ("empty/nothing.txt", 0),
        ("empty.txt", 0),
        ("big/hundred.bin", 100 * 1024 * 1024),
    ];
    for (index, (name, size)) in files.iter().enumerate() {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content(*size, index as u8)).unwrap();
    }
    std::fs::create_dir_all(root.join("nested/empty folder")).unwrap();
}

/// Every file below `root`, by path relative to it, with its bytes' hash; folders too.
fn tree_listing(root: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, found: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                found.insert(format!("{relative}/"), String::new());
                walk(root, &path, found);
            } else {
                let hash = blake3::hash(&std::fs::read(&path).unwrap()).to_hex().to_string();
                found.insert(relative, hash);
            }
        }
    }
    let mut found = BTreeMap::new();
    walk(root, root, &mut found);
    found
}

fn rclone(dav: &DavUser, args: &[&str]) -> std::process::Output {
    let obscured = Command::new("rclone").args(["obscure", &dav.password]).output().expect("rclone obscure");
    let obscured = String::from_utf8(obscured.stdout).unwrap().trim().to_owned();
    Command::new("rclone")
        .env("RCLONE_CONFIG", "/dev/null")
        .env("RCLONE_CONFIG_NUBO_TYPE", "webdav")
        .env("RCLONE_CONFIG_NUBO_URL", &dav.base)
        .env("RCLONE_CONFIG_NUBO_VENDOR", "other")
        .env("RCLONE_CONFIG_NUBO_USER", &dav.username)
        .env("RCLONE_CONFIG_NUBO_PASS", obscured)
        .args(args)
        .output()
        .expect("rclone runs")
}

/// rclone copies a mixed tree up, finds no difference byte for byte, and copies it back intact.
async fn rclone_copies_a_mixed_tree_up_and_back(app: TestApp) {
    if Command::new("rclone").arg("version").output().is_err() {
        assert!(!nubo_tests::services_required(), "rclone is not installed (apt-get install rclone)");
        return;
    }
    let (user, dav) = app.dav_user("ivy@example.com", "rclone").await;
    let work = tempfile::tempdir().unwrap();
    let source = work.path().join("source");
    let back = work.path().join("back");
    write_mixed_tree(&source);
    let (source_text, back_text) = (source.to_string_lossy().into_owned(), back.to_string_lossy().into_owned());
    let outcome = tokio::task::spawn_blocking(move || {
        let up = rclone(&dav, &["copy", "--create-empty-src-dirs", &source_text, "nubo:up"]);
        let check = rclone(&dav, &["check", "--download", &source_text, "nubo:up"]);
        let down = rclone(&dav, &["copy", "--create-empty-src-dirs", "nubo:up", &back_text]);
        [("copy up", up), ("check --download", check), ("copy back", down)]
    })
    .await
    .unwrap();
    for (step, output) in &outcome {
        assert!(
            output.status.success(),
            "rclone {step} failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let check_report = String::from_utf8_lossy(&outcome[1].1.stderr);
    assert!(check_report.contains("0 differences found"), "{check_report}");
    assert_eq!(tree_listing(&back), tree_listing(&source), "the tree came back identical");
    let listing: Value =
        app.call(Method::GET, "/directory/up/big", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(listing["items"][0]["size"], 100 * 1024 * 1024, "{listing}");
}
