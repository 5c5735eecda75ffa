//! Tags: the caller's own, manual ones attached and detached by id, automatic ones following
//! their rule over current and future files.

use nubo_tests::{TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(manual_and_automatic_tags_reach_the_callers_objects);

async fn manual_and_automatic_tags_reach_the_callers_objects(app: TestApp) {
    let ann = app.register("ann@example.com", "ann-password-1").await;
    let bob = app.register("bob@example.com", "bob-password-1").await;
    let root = app.root_id(&ann).await;
    let photo = app.upload(&ann, &root, "Holiday.JPG", b"jpeg").await["id"].as_str().unwrap().to_owned();
    let notes = app.upload(&ann, &root, "notes.txt", b"text").await["id"].as_str().unwrap().to_owned();
    let folder = app.mkdir(&ann, &root, "pictures.jpg.d").await;
    let bob_root = app.root_id(&bob).await;
    let bobs = app.upload(&bob, &bob_root, "bob.jpg", b"jpeg").await["id"].as_str().unwrap().to_owned();
    let call = |method: Method, path: String, body: Option<Value>, who: &nubo_tests::Session| {
        let (app, access) = (&app, who.access.clone());
        async move { app.call(method, &path, Some(&access), body).await }
    };
    let names = |page: Value| -> Vec<String> {
        page["items"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap().to_owned()).collect()
    };

    // A manual tag: attached to the caller's objects only, listed, detached.
    let created =
        call(Method::POST, "/tag".into(), Some(json!({"name": "work", "type": "manual", "color": "#f00"})), &ann).await;
    assert_eq!(created.status(), 201);
    let work = created.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let objects = format!("/tag/{work}/objects");
    let attach = call(Method::PUT, objects.clone(), Some(json!({"ids": [notes, folder]})), &ann).await;
    assert_eq!(attach.status(), 204);
    let again = call(Method::PUT, objects.clone(), Some(json!({"ids": [notes]})), &ann).await;
    assert_eq!(again.status(), 204, "attaching twice is harmless");
    let strangers = call(Method::PUT, objects.clone(), Some(json!({"ids": [bobs]})), &ann).await;
    assert_eq!(error_body(strangers, 404).await["code"], "object.not_found");
    let listed: Value = call(Method::GET, objects.clone(), None, &ann).await.json().await.unwrap();
    assert_eq!(
        (listed["count"].as_i64(), names(listed)),
        (Some(2), vec!["notes.txt".to_owned(), "pictures.jpg.d".to_owned()])
    );
    call(Method::DELETE, objects.clone(), Some(json!({"ids": [folder]})), &ann).await;
    let listed: Value = call(Method::GET, objects.clone(), None, &ann).await.json().await.unwrap();
    assert_eq!(names(listed), ["notes.txt"]);
    // Trashed objects drop out of the listing.
    call(Method::DELETE, "/object".into(), Some(json!({"ids": [notes]})), &ann).await;
    assert_eq!(call(Method::GET, objects.clone(), None, &ann).await.json::<Value>().await.unwrap()["count"], 0);

    // An automatic tag: files whose names match, in any case, now and later; no manual links.
    let rule = json!({"name": "pictures", "type": "automatic", "rule": "*.jpg, *.png"});
    let pictures = call(Method::POST, "/tag".into(), Some(rule), &ann).await.json::<Value>().await.unwrap();
    let pictures_objects = format!("/tag/{}/objects", pictures["id"].as_str().unwrap());
    let listed: Value = call(Method::GET, pictures_objects.clone(), None, &ann).await.json().await.unwrap();
    assert_eq!(names(listed), ["Holiday.JPG"], "files only, the caller's only, any case");
    app.upload(&ann, &root, "later.png", b"png").await;
    app.upload(&ann, &root, "x_png", b"not a picture").await;
    let listed: Value = call(Method::GET, pictures_objects.clone(), None, &ann).await.json().await.unwrap();
    assert_eq!(names(listed), ["Holiday.JPG", "later.png"]);
    let manual = call(Method::PUT, pictures_objects.clone(), Some(json!({"ids": [photo]})), &ann).await;
    assert_eq!(error_body(manual, 409).await["code"], "tag.automatic");

    // Names are unique per user; rules are checked; tags are the caller's own.
    let clash = call(Method::POST, "/tag".into(), Some(json!({"name": "work", "type": "manual"})), &ann).await;
    assert_eq!(error_body(clash, 409).await["code"], "tag.name_taken");
    let same_name = call(Method::POST, "/tag".into(), Some(json!({"name": "work", "type": "manual"})), &bob).await;
    assert_eq!(same_name.status(), 201, "another user's tag may share the name");
    let no_rule = call(Method::POST, "/tag".into(), Some(json!({"name": "auto", "type": "automatic"})), &ann).await;
    assert_eq!(error_body(no_rule, 422).await["field"], "rule");
    let bad_rule = json!({"name": "auto", "type": "automatic", "rule": "a/b"});
    assert_eq!(error_body(call(Method::POST, "/tag".into(), Some(bad_rule), &ann).await, 422).await["field"], "rule");
    let foreign = call(Method::GET, format!("/tag/{work}"), None, &bob).await;
    assert_eq!(error_body(foreign, 404).await["code"], "tag.not_found");
    let mine: Value = call(Method::GET, "/tag".into(), None, &ann).await.json().await.unwrap();
    let listed: Vec<&str> = mine.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(listed, ["pictures", "work"]);

    // Renamed, turned automatic (its links go), deleted.
    let path = format!("/tag/{work}");
    let changed =
        call(Method::PATCH, path.clone(), Some(json!({"name": "texts", "type": "automatic", "rule": "*.TXT"})), &ann)
            .await;
    let changed: Value = changed.json().await.unwrap();
    assert_eq!((changed["name"].as_str(), changed["type"].as_str()), (Some("texts"), Some("automatic")));
    app.upload(&ann, &root, "todo.txt", b"t").await;
    assert_eq!(names(call(Method::GET, objects.clone(), None, &ann).await.json().await.unwrap()), ["todo.txt"]);
    assert_eq!(call(Method::DELETE, path.clone(), None, &ann).await.status(), 204);
    assert_eq!(call(Method::GET, path, None, &ann).await.status(), 404);
}
