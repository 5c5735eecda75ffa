//! What sync clients stand on: a folder's whole tree in pages with paths, sizes and content
//! hashes and the change-event cursor taken before it; a catch-up on events that knows where it
//! ends (`ready`'s `head`); files made at once from content their owner already holds; and
//! overwrites that name the content they replace, and trashes that hold to the plan's view of the
//! tree, so a change made meanwhile is never lost.

use std::collections::BTreeSet;
use std::time::Duration;

use futures_util::StreamExt;
use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    a_tree_lists_every_live_descendant_with_its_path_and_hash_in_pages,
    a_tree_page_resumes_after_the_last_entry_of_the_page_before_even_when_it_is_gone,
    a_catch_up_on_events_ends_at_the_head_the_stream_announces,
    a_file_is_made_from_content_its_owner_holds_without_sending_it,
    an_overwrite_naming_the_content_it_replaces_never_replaces_a_change,
    a_trash_with_a_precondition_trashes_nothing_that_changed_since_the_plan,
);

fn hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Every page of `GET /object/{folder}/tree`, `limit` entries at a time; the first cursor.
async fn whole_tree(app: &TestApp, user: &Session, folder: &str, limit: usize) -> (i64, Vec<Value>) {
    let (mut items, mut after, mut cursor, mut pages) = (Vec::new(), None::<String>, None, 0);
    loop {
        let query = match &after {
            Some(after) => format!("/object/{folder}/tree?limit={limit}&after={after}"),
            None => format!("/object/{folder}/tree?limit={limit}"),
        };
        let response = app.call(Method::GET, &query, Some(&user.access), None).await;
        assert_eq!(response.status(), 200);
        let page: Value = response.json().await.unwrap();
        let entries = page["items"].as_array().unwrap();
        assert!(entries.len() <= limit);
        items.extend(entries.iter().cloned());
        cursor.get_or_insert(page["cursor"].as_i64().unwrap());
        pages += 1;
        assert!(pages < 100, "pages end");
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return (cursor.unwrap(), items),
        }
    }
}

async fn a_tree_lists_every_live_descendant_with_its_path_and_hash_in_pages(app: TestApp) {
    let user = app.register("tia@example.com", "tia-password").await;
    let other = app.register("ole@example.com", "ole-password").await;
    let root = app.root_id(&user).await;
    let docs = app.mkdir(&user, &root, "docs").await;
    let sub = app.mkdir(&user, &docs, "sub").await;
    app.mkdir(&user, &docs, "empty").await;
    app.upload(&user, &docs, "a.txt", b"alpha").await;
    app.upload(&user, &sub, "b.txt", b"beta!").await;
    app.upload(&user, &sub, "same.txt", b"alpha").await;
    let gone = app.upload(&user, &sub, "gone.txt", b"trashed").await["id"].as_str().unwrap().to_owned();
    let trashed = app.call(Method::DELETE, "/object", Some(&user.access), Some(json!({"ids": [gone]}))).await;
    assert!(trashed.status().is_success());
    app.upload(&user, &root, "outside.txt", b"not below docs").await;

    let (cursor, items) = whole_tree(&app, &user, &docs, 2).await;
    let seen: BTreeSet<(String, String, i64, Option<String>)> = items
        .iter()
        .map(|item| {
            let blake3 = item["blake3"].as_str().map(str::to_owned);
            (
                item["path"].as_str().unwrap().to_owned(),
                item["kind"].as_str().unwrap().to_owned(),
                item["size"].as_i64().unwrap(),
                blake3,
            )
        })
        .collect();
    let expected: BTreeSet<(String, String, i64, Option<String>)> = [
        ("sub", "folder", 0, None),
        ("empty", "folder", 0, None),
        ("a.txt", "file", 5, Some(hash(b"alpha"))),
        ("sub/b.txt", "file", 5, Some(hash(b"beta!"))),
        ("sub/same.txt", "file", 5, Some(hash(b"alpha"))),
    ]
    .into_iter()
    .map(|(path, kind, size, blake3)| (path.to_owned(), kind.to_owned(), size, blake3))
    .collect();
    assert_eq!(seen, expected, "every live descendant once, in its place, nothing trashed or outside");
    assert_eq!(items.len(), 5, "no entry twice across pages");
    let order: Vec<&str> = items.iter().map(|item| item["path"].as_str().unwrap()).collect();
    assert_eq!(
        order,
        ["a.txt", "empty", "sub", "sub/b.txt", "sub/same.txt"],
        "a folder's entries by name, then each subfolder's tree: a folder before what it holds"
    );
    let sub_entry = items.iter().find(|item| item["path"] == "sub").unwrap();
    assert_eq!(sub_entry["id"], sub.as_str());
    assert_eq!(sub_entry["parent_id"], docs.as_str());
    let b = items.iter().find(|item| item["path"] == "sub/b.txt").unwrap();
    assert_eq!(b["parent_id"], sub.as_str());
    assert_eq!(b["name"], "b.txt");
    assert!(b["updated_at"].is_string());

    // Changes after the listing are there to follow from its cursor.
    app.mkdir(&user, &docs, "later").await;
    // The hub delivers within its poll interval: a catch-up a moment later has it.
    let heard = || async {
        let (_, changes) = EventStream::open(&app, &user, cursor).await.catch_up().await;
        changes.iter().any(|change| change["name"] == "later" && change["kind"] == "created")
    };
    assert!(nubo_tests::settled(true, heard).await, "the change after the listing follows its cursor");

    // Only the owner's folders, only folders, sane pages.
    let theirs = app.call(Method::GET, &format!("/object/{docs}/tree"), Some(&other.access), None).await;
    assert_eq!(error_body(theirs, 404).await["code"], "object.not_found");
    let file = items.iter().find(|item| item["path"] == "a.txt").unwrap()["id"].as_str().unwrap().to_owned();
    let of_file = app.call(Method::GET, &format!("/object/{file}/tree"), Some(&user.access), None).await;
    assert_eq!(error_body(of_file, 422).await["field"], "id");
    for bad in ["limit=0", "limit=5001", "after=not-a-token"] {
        let response = app.call(Method::GET, &format!("/object/{docs}/tree?{bad}"), Some(&user.access), None).await;
        assert_eq!(error_body(response, 422).await["code"], "request.invalid_field", "{bad}");
    }
    let everything = whole_tree(&app, &user, &root, 1000).await.1;
    assert_eq!(everything.len(), 8, "from the root: docs, its six entries and `later`, and outside.txt");
}

async fn a_tree_page_resumes_after_the_last_entry_of_the_page_before_even_when_it_is_gone(app: TestApp) {
    let user = app.register("rua@example.com", "rua-password").await;
    let root = app.root_id(&user).await;
    let top = app.mkdir(&user, &root, "top").await;
    let a = app.mkdir(&user, &top, "a").await;
    let b = app.mkdir(&user, &top, "b").await;
    let one = app.upload(&user, &a, "1.txt", b"one").await["id"].as_str().unwrap().to_owned();
    app.upload(&user, &a, "2.txt", b"two").await;
    app.upload(&user, &b, "3.txt", b"three").await;
    app.upload(&user, &top, "c.txt", b"c").await;
    let page = |after: Option<String>| {
        let url = match after {
            Some(after) => format!("/object/{top}/tree?limit=4&after={after}"),
            None => format!("/object/{top}/tree?limit=4"),
        };
        let (app, user) = (&app, &user);
        async move {
            let response = app.call(Method::GET, &url, Some(&user.access), None).await;
            assert_eq!(response.status(), 200);
            response.json::<Value>().await.unwrap()
        }
    };
    let paths = |page: &Value| -> Vec<String> {
        page["items"].as_array().unwrap().iter().map(|item| item["path"].as_str().unwrap().to_owned()).collect()
    };
    let first = page(None).await;
    assert_eq!(paths(&first), ["a", "b", "c.txt", "a/1.txt"]);
    // The last entry of the page is trashed before the next page is read: the walk goes on
    // after its name.
    let trashed = app.call(Method::DELETE, "/object", Some(&user.access), Some(json!({"ids": [one]}))).await;
    assert!(trashed.status().is_success());
    let second = page(Some(first["next"].as_str().expect("a next page").to_owned())).await;
    assert_eq!(paths(&second), ["a/2.txt", "b/3.txt"]);
    assert!(second["next"].is_null(), "the last page says so");
    // A folder on the token's path trashed meanwhile: the walk goes on after it.
    let first = page(None).await;
    let trashed = app.call(Method::DELETE, "/object", Some(&user.access), Some(json!({"ids": [a]}))).await;
    assert!(trashed.status().is_success());
    let second = page(Some(first["next"].as_str().expect("a next page").to_owned())).await;
    assert_eq!(paths(&first), ["a", "b", "c.txt", "a/2.txt"]);
    assert_eq!(paths(&second), ["b/3.txt"]);
}

/// A Server-Sent Events stream of `GET /events?since=`.
struct EventStream {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: String,
}

impl EventStream {
    async fn open(app: &TestApp, user: &Session, since: i64) -> Self {
        let url = format!("{}/api/v1/events?since={since}", app.base_url);
        let response = app.client.get(url).bearer_auth(&user.access).send().await.unwrap();
        assert_eq!(response.status(), 200);
        Self { body: Box::pin(response.bytes_stream()), buffer: String::new() }
    }

    /// The next event's type and data (comments skipped).
    async fn next(&mut self) -> (String, Value) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let event = block.lines().find_map(|l| l.strip_prefix("event:")).map(str::trim).unwrap_or_default();
                let data: String = block.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
                if !data.is_empty() {
                    return (event.to_owned(), serde_json::from_str(&data).unwrap());
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.body.next()).await.expect("an event");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk.expect("the stream goes on").unwrap()));
        }
    }

    /// Reads `ready`, then changes until one reaches its `head`: the ready data and the changes.
    async fn catch_up(&mut self) -> (Value, Vec<Value>) {
        let (event, ready) = self.next().await;
        assert_eq!(event, "ready");
        let head = ready["head"].as_i64().expect("ready says where the catch-up ends");
        let mut changes = Vec::new();
        let mut at = ready["cursor"].as_i64().unwrap();
        while at < head {
            let (event, change) = self.next().await;
            assert_eq!(event, "change");
            at = change["cursor"].as_i64().unwrap();
            changes.push(change);
        }
        (ready, changes)
    }
}

async fn a_catch_up_on_events_ends_at_the_head_the_stream_announces(app: TestApp) {
    let user = app.register("cal@example.com", "cal-password").await;
    let root = app.root_id(&user).await;
    app.mkdir(&user, &root, "before").await;
    let (cursor, listed) = whole_tree(&app, &user, &root, 1000).await;
    assert_eq!(listed.len(), 1);
    for name in ["one", "two", "three"] {
        app.mkdir(&user, &root, name).await;
    }
    let names = || async {
        let mut stream = EventStream::open(&app, &user, cursor).await;
        let (ready, changes) = stream.catch_up().await;
        assert_eq!(ready["cursor"], cursor);
        // A change the listing already showed may come again (the cursor is taken before it).
        let new = changes.iter().map(|change| change["name"].as_str().unwrap().to_owned()).filter(|n| n != "before");
        new.collect::<Vec<_>>()
    };
    // The hub delivers within its poll interval: the catch-up sees all three once it has.
    let seen = nubo_tests::settled(vec!["one".to_owned(), "two".to_owned(), "three".to_owned()], names).await;
    assert_eq!(seen, ["one", "two", "three"], "exactly what came after the listing, and the catch-up ended");

    // Caught up already: ready's head is its cursor, and nothing is to be read; another user's
    // changes do not move it.
    let mut stream = EventStream::open(&app, &user, cursor).await;
    let (ready, _) = stream.catch_up().await;
    let caught_up = ready["head"].as_i64().unwrap();
    let other = app.register("cy@example.com", "cy-password").await;
    let other_root = app.root_id(&other).await;
    app.mkdir(&other, &other_root, "not a change of cal's").await;
    app.mkdir(&user, &root, "after the others").await;
    // Once the hub delivered cal's newest change, the head is that change: the other user's
    // (made before it) is not in cal's stream.
    let moved_on = || async {
        let (ready, changes) = EventStream::open(&app, &user, caught_up).await.catch_up().await;
        (ready["head"] != ready["cursor"]).then(|| changes.iter().map(|c| c["name"].clone()).collect::<Vec<_>>())
    };
    let seen = nubo_tests::settled(Some(vec![json!("after the others")]), moved_on).await;
    assert_eq!(seen, Some(vec![json!("after the others")]));
    let mut again = EventStream::open(&app, &user, caught_up).await;
    let (ready, changes) = again.catch_up().await;
    let head = ready["head"].as_i64().unwrap();
    assert_eq!(changes.last().unwrap()["cursor"], head, "the catch-up ends at cal's newest change");
    let (ready, changes) = EventStream::open(&app, &user, head).await.catch_up().await;
    assert_eq!(ready["head"], ready["cursor"], "nothing of cal's since");
    assert!(changes.is_empty());
}

async fn a_file_is_made_from_content_its_owner_holds_without_sending_it(app: TestApp) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, nubo_tests::files::PolicyKind::Local, 0).await;
    let user = app.register("hal@example.com", "hal-password").await;
    let other = app.register("ida@example.com", "ida-password").await;
    let root = app.root_id(&user).await;
    let content = nubo_tests::files::content(3 * policy.chunk + 17, 9);
    app.upload(&user, &root, "first.bin", &content).await;
    let blobs = policy.stored_blobs(&app);
    let used = app.storage_used(&user).await;

    let by_hash = |session: &Session, parent: &str, name: &str, size: usize, blake3: &str| {
        let body = json!({"file_name": name, "file_size": size, "parent_id": parent, "blake3": blake3});
        let (app, access) = (&app, session.access.clone());
        async move { app.call(Method::POST, "/file/upload", Some(&access), Some(body)).await }
    };
    let response = by_hash(&user, &root, "second.bin", content.len(), &hash(&content).to_uppercase()).await;
    assert_eq!(response.status(), 201);
    let made: Value = response.json().await.unwrap();
    assert_eq!(made["total_chunks"], 0, "no chunk to send: {made}");
    let second = made["object"]["id"].as_str().expect("the file, made at once").to_owned();
    assert_eq!(made["object"]["size"], content.len());
    assert_eq!(app.download(&user, &second).await, content);
    assert_eq!(app.storage_used(&user).await, used + content.len() as i64, "charged as an upload");
    assert_eq!(policy.stored_blobs(&app), blobs, "no byte stored again");

    // It also gives an existing file new content (overwrite).
    let third = app.upload(&user, &root, "third.bin", b"old").await["id"].as_str().unwrap().to_owned();
    let body = json!({"file_name": "third.bin", "file_size": content.len(), "parent_id": root,
        "blake3": hash(&content), "overwrite": true});
    let response = app.call(Method::POST, "/file/upload", Some(&user.access), Some(body)).await;
    assert_eq!(response.status(), 201);
    assert_eq!(response.json::<Value>().await.unwrap()["object"]["id"], third.as_str());
    assert_eq!(app.download(&user, &third).await, content);

    // Without proof of holding the bytes, the bytes are asked for: another user's content, a
    // different size, an unknown hash.
    let other_root = app.root_id(&other).await;
    for (session, parent, size, blake3) in [
        (&other, &other_root, content.len(), hash(&content)),
        (&user, &root, content.len() - 1, hash(&content)),
        (&user, &root, content.len(), hash(b"never uploaded")),
    ] {
        let response = by_hash(session, parent, "asked.bin", size, &blake3).await;
        assert_eq!(response.status(), 201);
        let session_view: Value = response.json().await.unwrap();
        assert!(session_view["object"].is_null(), "a session that waits for bytes: {session_view}");
        assert!(session_view["total_chunks"].as_i64().unwrap() > 0);
        let id = session_view["id"].as_str().unwrap();
        let aborted = app.call(Method::DELETE, &format!("/file/upload/{id}"), Some(&session.access), None).await;
        assert!(aborted.status().is_success());
    }
    for bad in ["abc", &"g".repeat(64)] {
        let response = by_hash(&user, &root, "bad.bin", content.len(), bad).await;
        assert_eq!(error_body(response, 422).await["field"], "blake3");
    }
    // A name taken is still 409 (no overwrite asked).
    let response = by_hash(&user, &root, "second.bin", content.len(), &hash(&content)).await;
    assert_eq!(error_body(response, 409).await["code"], "object.name_taken");
}

async fn an_overwrite_naming_the_content_it_replaces_never_replaces_a_change(app: TestApp) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, nubo_tests::files::PolicyKind::Local, 0).await;
    app.keep_no_versions(&admin).await;
    let user = app.register("rex@example.com", "rex-password").await;
    let root = app.root_id(&user).await;
    let file = app.upload(&user, &root, "a.txt", b"first").await["id"].as_str().unwrap().to_owned();
    let overwrite = |replaces: String, size: usize| {
        let body = json!({"file_name": "a.txt", "file_size": size, "parent_id": root, "overwrite": true,
            "replaces_blake3": replaces});
        let (app, access) = (&app, user.access.clone());
        async move { app.call(Method::POST, "/file/upload", Some(&access), Some(body)).await }
    };

    // The file as the client saw it: replaced.
    let response = overwrite(hash(b"first"), 6).await;
    assert_eq!(response.status(), 201);
    let id = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    assert_eq!(app.put_chunk(&user, &id, 0, b"second".to_vec()).await.status(), 200);
    assert_eq!(app.download(&user, &file).await, b"second");

    // Changed by someone else while the upload was on its way: refused at completion, the
    // change kept, nothing left behind.
    let response = overwrite(hash(b"second"), 5).await;
    assert_eq!(response.status(), 201);
    let id = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let changed = app.request(Method::PATCH, &format!("/file/content?id={file}")).bearer_auth(&user.access);
    assert_eq!(changed.body("their change").send().await.unwrap().status(), 200);
    let refused = app.put_chunk(&user, &id, 0, b"third".to_vec()).await;
    assert_eq!(error_body(refused, 409).await["code"], "object.changed");
    assert_eq!(app.download(&user, &file).await, b"their change", "the change made meanwhile survives");
    assert_eq!(app.storage_used(&user).await, "their change".len() as i64, "no reservation left over");
    assert_eq!(policy.settled_blobs(&app, 1).await, 1, "the refused bytes are gone (and no version is kept)");

    // Already changed when the session opens, or gone: 409 at once.
    let response = overwrite(hash(b"second"), 5).await;
    assert_eq!(error_body(response, 409).await["code"], "object.changed");
    let body = json!({"file_name": "new.txt", "file_size": 5, "parent_id": root, "overwrite": true,
        "replaces_blake3": hash(b"second")});
    let response = app.call(Method::POST, "/file/upload", Some(&user.access), Some(body)).await;
    assert_eq!(error_body(response, 409).await["code"], "object.changed", "nothing to replace");
    let body = json!({"file_name": "fresh.txt", "file_size": 5, "parent_id": root, "replaces_blake3": hash(b"x")});
    let response = app.call(Method::POST, "/file/upload", Some(&user.access), Some(body)).await;
    assert_eq!(error_body(response, 422).await["field"], "replaces_blake3", "only with overwrite");
}

/// The whole tree below `folder` and its cursor, once the master's hub delivered every change
/// made so far (a sync client's plan made a moment after its last write).
async fn planned(app: &TestApp, user: &Session, folder: &str) -> (i64, Vec<Value>) {
    let newest = || async {
        let (seq,): (Option<i64>,) =
            sqlx::query_as("SELECT MAX(seq) FROM change_events").fetch_one(app.context().db().reader()).await.unwrap();
        seq.unwrap_or(0)
    };
    for _ in 0..100 {
        let (cursor, items) = whole_tree(app, user, folder, 100).await;
        if cursor == newest().await {
            return (cursor, items);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the hub never caught up");
}

async fn a_trash_with_a_precondition_trashes_nothing_that_changed_since_the_plan(app: TestApp) {
    let user = app.register("pia@example.com", "pia-password").await;
    let root = app.root_id(&user).await;
    let docs = app.mkdir(&user, &root, "docs").await;
    let sub = app.mkdir(&user, &docs, "sub").await;
    let a = app.upload(&user, &docs, "a.txt", b"alpha").await["id"].as_str().unwrap().to_owned();
    let b = app.upload(&user, &sub, "b.txt", b"beta").await["id"].as_str().unwrap().to_owned();
    let solo = app.upload(&user, &root, "solo.txt", b"solo").await["id"].as_str().unwrap().to_owned();
    // The plan's view: the tree and the cursor taken before it.
    let (cursor, items) = planned(&app, &user, &root).await;
    assert_eq!(items.len(), 5);
    let trash = |body: Value| {
        let (app, access) = (&app, user.access.clone());
        async move { app.call(Method::DELETE, "/object", Some(&access), Some(body)).await }
    };
    let trashed = || async {
        let trash: Value = app.call(Method::GET, "/trash", Some(&user.access), None).await.json().await.unwrap();
        trash["count"].as_i64().unwrap()
    };

    // A file changed after the plan: neither its content nor the cursor holds; nothing trashed,
    // not even the other object of the same request.
    let changed = app.request(Method::PATCH, &format!("/file/content?id={b}")).bearer_auth(&user.access);
    assert_eq!(changed.body("beta, edited").send().await.unwrap().status(), 200);
    let refused = trash(json!({"ids": [solo, b], "expect": [{"id": b, "blake3": hash(b"beta")}]})).await;
    assert_eq!(error_body(refused, 409).await["code"], "object.changed");
    let refused = trash(json!({"ids": [solo, docs], "unchanged_since": cursor})).await;
    let body = error_body(refused, 409).await;
    assert_eq!(body["code"], "object.changed", "a change below the folder: {body}");
    assert_eq!(trashed().await, 0, "nothing went to the trash");

    // A file added below a folder, or moved into it, counts as a change there too.
    let (cursor, _) = planned(&app, &user, &root).await;
    let extra = app.mkdir(&user, &root, "extra").await;
    let moved =
        app.call(Method::PATCH, "/object", Some(&user.access), Some(json!({"src_ids": [extra], "dst_id": sub})));
    assert!(moved.await.status().is_success());
    let refused = trash(json!({"ids": [docs], "unchanged_since": cursor})).await;
    assert_eq!(error_body(refused, 409).await["code"], "object.changed");

    // As planned: trashed.
    let (cursor, _) = planned(&app, &user, &root).await;
    let body =
        json!({"ids": [docs, solo], "unchanged_since": cursor, "expect": [{"id": solo, "blake3": hash(b"solo")}]});
    assert_eq!(trash(body).await.status(), 204);
    assert_eq!(trashed().await, 2);
    let (_, left) = whole_tree(&app, &user, &root, 100).await;
    assert!(left.iter().all(|item| item["id"] != a.as_str() && item["id"] != b.as_str()), "{left:?}");
    let bad = trash(json!({"ids": [root], "unchanged_since": -1})).await;
    assert_eq!(error_body(bad, 422).await["field"], "unchanged_since");
}
