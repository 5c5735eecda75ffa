//! Search over the caller's own live tree (names in any case by Unicode's rules, by kind, tag
//! and folder), and the tags objects show in listings and `GET /object/{id}`.

use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(search_finds_names_in_any_case_in_the_callers_live_tree);
on_every_backend!(listings_and_objects_show_their_tags);

fn id(object: &Value) -> String {
    object["id"].as_str().unwrap().to_owned()
}

async fn search(app: &TestApp, who: &Session, query: &str) -> Value {
    let response = app.call(Method::GET, &format!("/search?{query}"), Some(&who.access), None).await;
    assert_eq!(response.status(), 200, "search {query}");
    response.json().await.unwrap()
}

/// The paths a search answers, in order.
async fn paths(app: &TestApp, who: &Session, query: &str) -> Vec<String> {
    let page = search(app, who, query).await;
    page["items"].as_array().unwrap().iter().map(|o| o["path"].as_str().unwrap().to_owned()).collect()
}

fn encoded(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

async fn search_finds_names_in_any_case_in_the_callers_live_tree(app: TestApp) {
    let ann = app.register("ann@example.com", "ann-password-1").await;
    let bob = app.register("bob@example.com", "bob-password-1").await;
    let root = app.root_id(&ann).await;
    let trouble = app.mkdir(&ann, &root, "Ärger").await;
    app.upload(&ann, &trouble, "Übersicht.txt", b"u").await;
    let notes = id(&app.upload(&ann, &trouble, "notes.md", b"n").await);
    let docs = app.mkdir(&ann, &root, "docs").await;
    let report = id(&app.upload(&ann, &docs, "ärger-2026.pdf", b"p").await);
    let deep = app.mkdir(&ann, &docs, "deep").await;
    let log = id(&app.upload(&ann, &deep, "ÄRGER.log", b"l").await);
    // Decomposed, as macOS sends it: A + combining diaeresis.
    app.upload(&ann, &root, "A\u{308}pfel.txt", b"a").await;
    app.upload(&ann, &root, "100%_done.txt", b"d").await;
    app.upload(&ann, &root, "100x.txt", b"x").await;
    let bob_root = app.root_id(&bob).await;
    app.upload(&bob, &bob_root, "ärger.txt", b"b").await;

    // Either case, composed or not, and only the caller's; ordered by lower-case name.
    let found = ["/Ärger", "/docs/ärger-2026.pdf", "/docs/deep/ÄRGER.log"];
    assert_eq!(paths(&app, &ann, &format!("q={}", encoded("ärger"))).await, found);
    assert_eq!(paths(&app, &ann, &format!("q={}", encoded("RGER"))).await, found);
    assert_eq!(paths(&app, &ann, &format!("q={}", encoded("A\u{308}RG"))).await, found);
    assert_eq!(paths(&app, &ann, &format!("q={}", encoded("äpfel"))).await, ["/A\u{308}pfel.txt"]);
    assert_eq!(paths(&app, &bob, &format!("q={}", encoded("ärger"))).await, ["/ärger.txt"]);
    // LIKE's wildcards are plain characters.
    assert_eq!(paths(&app, &ann, "q=100%25").await, ["/100%_done.txt"]);
    assert_eq!(paths(&app, &ann, "q=_").await, ["/100%_done.txt"]);
    assert!(paths(&app, &ann, "q=nothing-like-this").await.is_empty());

    // By kind, below a folder; paging keeps the count.
    let query = format!("q={}", encoded("ärger"));
    assert_eq!(paths(&app, &ann, &format!("{query}&type=file")).await, found[1..]);
    assert_eq!(paths(&app, &ann, &format!("{query}&type=folder")).await, ["/Ärger"]);
    assert_eq!(paths(&app, &ann, &format!("{query}&under={docs}")).await, found[1..]);
    assert_eq!(paths(&app, &ann, &format!("{query}&under={deep}")).await, ["/docs/deep/ÄRGER.log"]);
    assert_eq!(paths(&app, &ann, &format!("under={trouble}")).await, ["/Ärger/notes.md", "/Ärger/Übersicht.txt"]);
    let second = search(&app, &ann, &format!("{query}&limit=1&offset=1")).await;
    assert_eq!((second["count"].as_i64(), second["items"][0]["path"].as_str()), (Some(3), Some(found[1])));

    // By tag: a manual one's links, an automatic one's rule; each object shows its tags.
    let tag = |body: Value| {
        let (app, access) = (&app, ann.access.clone());
        async move { id(&app.call(Method::POST, "/tag", Some(&access), Some(body)).await.json::<Value>().await.unwrap()) }
    };
    let work = tag(json!({"name": "work", "type": "manual"})).await;
    let logs = tag(json!({"name": "logs", "type": "automatic", "rule": "*.LOG"})).await;
    let attach = app
        .call(Method::PUT, &format!("/tag/{work}/objects"), Some(&ann.access), Some(json!({"ids": [notes, trouble]})))
        .await;
    assert_eq!(attach.status(), 204);
    assert_eq!(paths(&app, &ann, &format!("tag={work}")).await, ["/Ärger/notes.md", "/Ärger"], "n before ä");
    assert_eq!(paths(&app, &ann, &format!("tag={work}&q=NOTES")).await, ["/Ärger/notes.md"]);
    assert_eq!(paths(&app, &ann, &format!("tag={logs}")).await, ["/docs/deep/ÄRGER.log"]);
    let page = search(&app, &ann, &query).await;
    let tag_names = |object: &Value| -> Vec<String> {
        object["tags"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    };
    let shown: Vec<Vec<String>> = page["items"].as_array().unwrap().iter().map(tag_names).collect();
    assert_eq!(shown, [vec!["work".to_owned()], vec![], vec!["logs".to_owned()]]);

    // The trash is not searched; a restored object is found again.
    let trashed = app.call(Method::DELETE, "/object", Some(&ann.access), Some(json!({"ids": [report]}))).await;
    assert_eq!(trashed.status(), 204);
    assert_eq!(paths(&app, &ann, &query).await, ["/Ärger", "/docs/deep/ÄRGER.log"]);
    let restored = app.call(Method::PATCH, "/trash/restore", Some(&ann.access), Some(json!({"ids": [report]}))).await;
    assert!(restored.status().is_success(), "restore: {}", restored.status());
    assert_eq!(paths(&app, &ann, &query).await, found);
    // A rename is searched under its new name.
    let renamed = app
        .call(Method::PATCH, &format!("/object/{log}"), Some(&ann.access), Some(json!({"name": "Ölwechsel.log"})))
        .await;
    assert_eq!(renamed.status(), 200);
    assert_eq!(paths(&app, &ann, &format!("q={}", encoded("ÖL"))).await, ["/docs/deep/Ölwechsel.log"]);

    // Someone else's tag or folder, a file as the folder, bad input.
    let bob_folder = app.mkdir(&bob, &bob_root, "private").await;
    let call = |query: String| {
        let (app, access) = (&app, ann.access.clone());
        async move { app.call(Method::GET, &format!("/search?{query}"), Some(&access), None).await }
    };
    assert_eq!(error_body(call(format!("under={bob_folder}")).await, 404).await["code"], "object.not_found");
    assert_eq!(error_body(call(format!("under={notes}")).await, 409).await["code"], "object.not_a_folder");
    let bob_tag = app.call(Method::POST, "/tag", Some(&bob.access), Some(json!({"name": "b", "type": "manual"}))).await;
    let bob_tag = id(&bob_tag.json::<Value>().await.unwrap());
    assert_eq!(error_body(call(format!("tag={bob_tag}")).await, 404).await["code"], "tag.not_found");
    assert_eq!(error_body(call(format!("q={}", "x".repeat(256))).await, 422).await["field"], "q");
    assert_eq!(call("type=link".into()).await.status(), 400);
    assert_eq!(call("limit=0".into()).await.status(), 422);
    let anonymous = app.call(Method::GET, "/search?q=a", None, None).await;
    assert_eq!(anonymous.status(), 401);
}

async fn listings_and_objects_show_their_tags(app: TestApp) {
    let ann = app.register("ann@example.com", "ann-password-1").await;
    let root = app.root_id(&ann).await;
    let uploaded = app.upload(&ann, &root, "Beach.PNG", b"png").await;
    assert!(uploaded.get("tags").is_none(), "answers of changes carry no tags: {uploaded}");
    let photo = id(&uploaded);
    let folder = app.mkdir(&ann, &root, "trips").await;
    let create = |body: Value| {
        let (app, access) = (&app, ann.access.clone());
        async move { app.call(Method::POST, "/tag", Some(&access), Some(body)).await.json::<Value>().await.unwrap() }
    };
    let pictures = create(json!({"name": "pictures", "type": "automatic", "rule": "*.png", "color": "#0a0"})).await;
    let favourite = create(json!({"name": "favourite", "type": "manual"})).await;
    let attach = app
        .call(
            Method::PUT,
            &format!("/tag/{}/objects", id(&favourite)),
            Some(&ann.access),
            Some(json!({"ids": [photo, folder]})),
        )
        .await;
    assert_eq!(attach.status(), 204);

    let object: Value =
        app.call(Method::GET, &format!("/object/{photo}"), Some(&ann.access), None).await.json().await.unwrap();
    let expected = json!([
        {"id": favourite["id"], "name": "favourite", "color": null},
        {"id": pictures["id"], "name": "pictures", "color": "#0a0"},
    ]);
    assert_eq!(object["tags"], expected, "manual and automatic, by name");
    let listing: Value = app.call(Method::GET, "/directory/", Some(&ann.access), None).await.json().await.unwrap();
    assert_eq!(listing["folder"]["tags"], json!([]));
    let items = listing["items"].as_array().unwrap();
    let by_name = |name: &str| items.iter().find(|o| o["name"] == name).unwrap()["tags"].clone();
    assert_eq!(by_name("Beach.PNG"), expected);
    assert_eq!(by_name("trips"), json!([{"id": favourite["id"], "name": "favourite", "color": null}]));
    // A folder never carries an automatic tag, even when its name matches.
    let matching_folder = app.mkdir(&ann, &root, "album.png").await;
    let folder_view: Value = app
        .call(Method::GET, &format!("/object/{matching_folder}"), Some(&ann.access), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(folder_view["tags"], json!([]));
}
