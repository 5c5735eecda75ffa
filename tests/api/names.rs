//! Object names that would mislead or break clients (control characters, newlines, the
//! right-to-left override, only whitespace, a trailing space, a backslash, a noncharacter) are
//! refused on every path that names an object, and nothing is created.

use nubo_tests::{TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(misleading_names_are_refused_on_every_path_that_names_objects);

const BAD_NAMES: &[&str] = &[
    "two\nlines",
    "tab\there",
    "nul\0byte",
    "invoice\u{202E}fdp.exe",
    " ",
    "\u{3000}",
    "trailing ",
    "non\u{FFFE}char",
    "back\\slash",
];

async fn names_in_root(app: &TestApp, token: &str) -> Vec<String> {
    let listing: Value = app.call(Method::GET, "/directory", Some(token), None).await.json().await.unwrap();
    listing["items"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap().to_owned()).collect()
}

async fn misleading_names_are_refused_on_every_path_that_names_objects(app: TestApp) {
    let (user, dav) = app.dav_user("nina@example.com", "desk").await;
    let root = app.root_id(&user).await;
    let folder = app.mkdir(&user, &root, "folder").await;

    for name in BAD_NAMES {
        let mkdir = app
            .call(Method::POST, "/directory", Some(&user.access), Some(json!({"parent_id": root, "name": name})))
            .await;
        let body = error_body(mkdir, 422).await;
        assert_eq!(
            (body["code"].as_str(), body["field"].as_str()),
            (Some("request.invalid_field"), Some("name")),
            "{name:?}"
        );

        let rename = app
            .call(Method::PATCH, &format!("/object/{folder}"), Some(&user.access), Some(json!({"name": name})))
            .await;
        assert_eq!(error_body(rename, 422).await["field"], "name", "rename to {name:?}");

        let upload = app.start_upload(&user, &root, name, 10).await;
        assert_eq!(error_body(upload, 422).await["field"], "file_name", "upload of {name:?}");

        let encoded: String = percent_encode(name);
        // WebDAV has no field errors: 403 (400 where dav-server refuses the path itself, NUL).
        let refused = |status: u16| status == 403 || (status == 400 && name.contains('\0'));
        let put = dav.put(&format!("/{encoded}"), "x").await;
        assert!(refused(put.status().as_u16()), "WebDAV PUT of {name:?}: {}", put.status());
        let mkcol = dav.request("MKCOL", &format!("/{encoded}")).send().await.unwrap();
        assert!(refused(mkcol.status().as_u16()), "WebDAV MKCOL of {name:?}: {}", mkcol.status());
        let moved = dav
            .request("MOVE", "/folder")
            .header("Destination", format!("{}/{encoded}", dav.base))
            .send()
            .await
            .unwrap();
        assert!(refused(moved.status().as_u16()), "WebDAV MOVE to {name:?}: {}", moved.status());
    }
    assert_eq!(names_in_root(&app, &user.access).await, vec!["folder"], "nothing was created or renamed");
    assert_eq!(app.storage_used(&user).await, 0);
}

fn percent_encode(name: &str) -> String {
    name.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b == b'.' { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}
