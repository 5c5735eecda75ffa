//! The WOPI host, driven by a scripted WOPI client: sessions and token scope, CheckFileInfo,
//! GetFile/PutFile through the common write path, the lock state machine (Microsoft's WOPI
//! REST rules: 409 with the current lock in `X-WOPI-Lock`), PutRelativeFile, RenameFile, and
//! locks shared by two masters.

use nubo_model::domain::time::now_ms;
use nubo_service::credentials::token::{TokenType, WopiClaims};
use nubo_tests::wopi::{
    DiscoveryServer, ONLYOFFICE_DISCOVERY, Signing, TestKey, WopiClient, lock_header, sign, test_key, ticks,
};
use nubo_tests::{Backend, Session, TestApp, error_body, on_every_backend};
use reqwest::{Method, Response};
use serde_json::{Value, json};

on_every_backend!(
    a_session_needs_read_access_and_edit_needs_write_access,
    check_file_info_describes_the_file_and_the_user,
    get_file_streams_the_content_with_its_version,
    the_lock_state_machine_follows_the_wopi_rules,
    put_file_needs_the_lock_unless_the_file_is_empty,
    put_file_goes_through_max_size_and_quota,
    tokens_are_scoped_to_one_file_one_user_and_a_mode,
    signing_out_everywhere_ends_wopi_tokens,
    put_relative_file_writes_beside_the_file_in_both_modes,
    rename_file_keeps_the_extension_and_respects_the_lock,
    delete_file_moves_an_unlocked_file_to_the_trash,
    locks_are_shared_by_every_master,
    administrators_add_wopi_applications_by_discovery,
    a_session_with_an_application_answers_its_action_url,
    every_request_of_an_application_carries_a_valid_proof,
    a_rotation_of_the_proof_keys_is_followed,
    an_application_without_proof_keys_needs_the_administrator_s_consent,
    viewers_of_an_extension_list_built_in_viewers_and_wopi_applications,
    the_viewer_registry_follows_the_settings_on_every_master,
    pages_may_frame_and_post_to_the_wopi_applications,
);

async fn setup(app: &TestApp, max_size: u64) -> (Session, String) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, max_size).await;
    let user = app.register("wanda@example.com", "wanda-password").await;
    let root = app.root_id(&user).await;
    (user, root)
}

/// Creates `name` in `parent` with `bytes` (`POST /file/content`); answers its id.
async fn create(app: &TestApp, user: &Session, parent: &str, name: &str, bytes: &[u8]) -> String {
    let response = app
        .request(Method::POST, &format!("/file/content?parent_id={parent}&name={name}"))
        .bearer_auth(&user.access)
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "create {name}");
    response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
}

fn version(response: &Response) -> String {
    response.headers().get("x-wopi-itemversion").expect("X-WOPI-ItemVersion").to_str().unwrap().to_owned()
}

async fn a_session_needs_read_access_and_edit_needs_write_access(app: TestApp) {
    let (user, root) = setup(&app, 0).await;
    let file = create(&app, &user, &root, "plan.docx", b"draft").await;
    let before = now_ms();
    let wopi = app.wopi(&user, &file, "edit").await;
    let ten_hours = 10 * 3600 * 1000;
    assert!((before + ten_hours - 5000..=now_ms() + ten_hours).contains(&wopi.ttl), "ttl in ms since the epoch");
    let session: Value = app.wopi_session(&user, &file, "view").await.json().await.unwrap();
    assert_eq!(session["wopi_src"], format!("{}/wopi/files/{file}", app.base_url));
    assert!(session["action_url"].is_null(), "no WOPI application chosen");

    let stranger = app.register("mallory@example.com", "mallory-password").await;
    for mode in ["view", "edit"] {
        let refused = app.wopi_session(&stranger, &file, mode).await;
        assert_eq!(error_body(refused, 404).await["code"], "object.not_found", "{mode}");
    }
    let folder = app.mkdir(&user, &root, "docs").await;
    let refused = app.wopi_session(&user, &folder, "view").await;
    assert_eq!(error_body(refused, 409).await["code"], "object.not_a_file");
    let anonymous = app.call(Method::POST, &format!("/file/{file}/wopi_session"), None, Some(json!({}))).await;
    assert_eq!(error_body(anonymous, 401).await["code"], "auth.missing_token");
}

async fn check_file_info_describes_the_file_and_the_user(app: TestApp) {
    let (user, root) = setup(&app, 0).await;
    let file = create(&app, &user, &root, "report.docx", b"hello").await;
    let info = app.wopi(&user, &file, "edit").await.info().await;
    assert_eq!(info["BaseFileName"], "report.docx");
    assert_eq!(info["Size"], 5);
    assert_eq!(info["OwnerId"], user.user_id);
    assert_eq!(info["UserId"], user.user_id);
    assert_eq!(info["UserFriendlyName"], "wanda");
    assert_eq!(info["FileExtension"], ".docx");
    assert_eq!(info["PostMessageOrigin"], app.base_url);
    for (field, expected) in [
        ("UserCanWrite", true),
        ("ReadOnly", false),
        ("UserCanRename", true),
        ("UserCanNotWriteRelative", false),
        ("SupportsLocks", true),
        ("SupportsGetLock", true),
        ("SupportsUpdate", true),
        ("SupportsRename", true),
        ("SupportsExtendedLockLength", true),
    ] {
        assert_eq!(info[field], expected, "{field}");
    }
    assert!(info["Version"].as_str().is_some_and(|v| !v.is_empty()));
    let viewer = app.wopi(&user, &file, "view").await.info().await;
    assert_eq!((viewer["UserCanWrite"].as_bool(), viewer["ReadOnly"].as_bool()), (Some(false), Some(true)));
    assert_eq!(viewer["Version"], info["Version"], "the version belongs to the content");
}

async fn get_file_streams_the_content_with_its_version(app: TestApp) {
    let (user, root) = setup(&app, 0).await;
    let bytes = nubo_tests::files::content(200_000, 7);
    let file = create(&app, &user, &root, "big.odt", &bytes).await;
    let wopi = app.wopi(&user, &file, "view").await;
    let info = wopi.info().await;
    let response = wopi.get_file().await;
    assert_eq!(response.status(), 200);
    assert_eq!(version(&response), info["Version"].as_str().unwrap());
    assert_eq!(response.bytes().await.unwrap().to_vec(), bytes);
    let too_big = wopi.request(Method::GET, "/contents").header("X-WOPI-MaxExpectedSize", "1000").send().await.unwrap();
    assert_eq!(error_body(too_big, 412).await["code"], "wopi.too_large");
}

async fn expect_mismatch(response: Response, current: &str) {
    assert_eq!(lock_header(&response).as_deref(), Some(current), "X-WOPI-Lock names the current lock");
    assert!(response.headers().contains_key("x-wopi-lockfailurereason"));
    assert_eq!(error_body(response, 409).await["code"], "wopi.lock_mismatch");
}

async fn the_lock_state_machine_follows_the_wopi_rules(app: TestApp) {
    let (user, root) = setup(&app, 0).await;
    let file = create(&app, &user, &root, "locks.docx", b"content").await;
    let wopi = app.wopi(&user, &file, "edit").await;
    let unlocked = wopi.get_lock().await;
    assert_eq!((unlocked.status().as_u16(), lock_header(&unlocked).as_deref()), (200, Some("")), "GET_LOCK unlocked");

    // Missing lock: every operation that needs one is refused; on an unlocked file a lock id
    // that matches nothing is a mismatch with an empty current lock.
    for operation in ["LOCK", "REFRESH_LOCK", "UNLOCK"] {
        let response = wopi.operation(operation, &[], Vec::new()).await;
        assert_eq!(error_body(response, 400).await["code"], "wopi.bad_lock", "{operation} without X-WOPI-Lock");
    }
    expect_mismatch(wopi.operation("REFRESH_LOCK", &[("X-WOPI-Lock", "A")], Vec::new()).await, "").await;
    expect_mismatch(wopi.operation("UNLOCK", &[("X-WOPI-Lock", "A")], Vec::new()).await, "").await;
    let relock = wopi.operation("LOCK", &[("X-WOPI-Lock", "B"), ("X-WOPI-OldLock", "A")], Vec::new()).await;
    expect_mismatch(relock, "").await;

    // LOCK takes it; the same LOCK again refreshes; another lock id is refused.
    let locked = wopi.lock("A").await;
    assert_eq!(locked.status(), 200);
    assert!(locked.headers().contains_key("x-wopi-itemversion"));
    assert_eq!(wopi.lock("A").await.status(), 200, "same lock: refresh");
    expect_mismatch(wopi.lock("B").await, "A").await;
    assert_eq!(lock_header(&wopi.get_lock().await).as_deref(), Some("A"));

    // REFRESH_LOCK and UNLOCK: matching and mismatched.
    assert_eq!(wopi.operation("REFRESH_LOCK", &[("X-WOPI-Lock", "A")], Vec::new()).await.status(), 200);
    expect_mismatch(wopi.operation("REFRESH_LOCK", &[("X-WOPI-Lock", "B")], Vec::new()).await, "A").await;
    expect_mismatch(wopi.operation("UNLOCK", &[("X-WOPI-Lock", "B")], Vec::new()).await, "A").await;

    // UNLOCK_AND_RELOCK: old lock mismatched, then matching.
    let wrong = wopi.operation("LOCK", &[("X-WOPI-Lock", "C"), ("X-WOPI-OldLock", "B")], Vec::new()).await;
    expect_mismatch(wrong, "A").await;
    let relocked = wopi.operation("LOCK", &[("X-WOPI-Lock", "C"), ("X-WOPI-OldLock", "A")], Vec::new()).await;
    assert_eq!(relocked.status(), 200);
    assert_eq!(lock_header(&wopi.get_lock().await).as_deref(), Some("C"));

    assert_eq!(wopi.operation("UNLOCK", &[("X-WOPI-Lock", "C")], Vec::new()).await.status(), 200);
    assert_eq!(lock_header(&wopi.get_lock().await).as_deref(), Some(""), "unlocked");
    // Lock ids up to 1024 characters; a view-only token takes no lock.
    assert_eq!(wopi.lock(&"x".repeat(1024)).await.status(), 200);
    let long = wopi.operation("UNLOCK", &[("X-WOPI-Lock", &"x".repeat(1025))], Vec::new()).await;
    assert_eq!(error_body(long, 400).await["code"], "wopi.bad_lock");
    let viewer = app.wopi(&user, &file, "view").await;
    assert_eq!(error_body(viewer.lock("V").await, 401).await["code"], "wopi.read_only");
    assert_eq!(lock_header(&viewer.get_lock().await).map(|l| l.len()), Some(1024), "GET_LOCK is a read");
    let unknown = wopi.operation("PUT_USER_INFO", &[], Vec::new()).await;
    assert_eq!(error_body(unknown, 501).await["code"], "wopi.not_supported");
}

async fn put_file_needs_the_lock_unless_the_file_is_empty(app: TestApp) {
    let (user, root) = setup(&app, 0).await;
    let file = create(&app, &user, &root, "doc.docx", b"version one").await;
    let wopi = app.wopi(&user, &file, "edit").await;
    let first = wopi.info().await["Version"].as_str().unwrap().to_owned();

    let unlocked = wopi.put_file(None, b"sneaky".to_vec()).await;
    expect_mismatch(unlocked, "").await;
    expect_mismatch(wopi.put_file(Some("L"), b"sneaky".to_vec()).await, "").await;
    assert_eq!(wopi.lock("L").await.status(), 200);
    expect_mismatch(wopi.put_file(Some("other"), b"sneaky".to_vec()).await, "L").await;
    expect_mismatch(wopi.put_file(None, b"sneaky".to_vec()).await, "L").await;

    let written = wopi.put_file(Some("L"), b"version two".to_vec()).await;
    assert_eq!(written.status(), 200);
    let second = version(&written);
    assert_ne!(second, first, "the version changes with the content");
    let info = wopi.info().await;
    assert_eq!((info["Version"].as_str(), info["Size"].as_i64()), (Some(second.as_str()), Some(11)));
    let content = wopi.get_file().await;
    assert_eq!(version(&content), second);
    assert_eq!(content.bytes().await.unwrap().as_ref(), b"version two");
    assert_eq!(app.download(&user, &file).await, b"version two", "the same file as the API's");

    // A new, empty file (as `editnew` makes) takes its first content without a lock.
    let empty = create(&app, &user, &root, "new.docx", b"").await;
    let fresh = app.wopi(&user, &empty, "edit").await;
    assert_eq!(fresh.put_file(None, b"first words".to_vec()).await.status(), 200);
    expect_mismatch(fresh.put_file(None, b"second words".to_vec()).await, "").await;
    // A view-only token writes nothing.
    let viewer = app.wopi(&user, &file, "view").await;
    assert_eq!(error_body(viewer.put_file(Some("L"), b"x".to_vec()).await, 401).await["code"], "wopi.read_only");
    assert_eq!(app.download(&user, &file).await, b"version two");
}

async fn put_file_goes_through_max_size_and_quota(app: TestApp) {
    // Without versions: the replaced content is released (versions: tests/api/versions.rs).
    app.keep_no_versions(&app.login_admin().await).await;
    let (user, root) = setup(&app, 1000).await;
    let file = create(&app, &user, &root, "sheet.xlsx", &[b'a'; 500]).await;
    let wopi = app.wopi(&user, &file, "edit").await;
    assert_eq!(wopi.lock("Q").await.status(), 200);
    let too_big = wopi.put_file(Some("Q"), vec![b'b'; 1001]).await;
    assert_eq!(error_body(too_big, 413).await["code"], "file.too_large");
    let admin = app.login_admin().await;
    app.set_user_group(&admin, json!({"max_storage": 800})).await;
    let user = app.refresh(&user).await;
    let over_quota = wopi.put_file(Some("Q"), vec![b'c'; 900]).await;
    assert_eq!(error_body(over_quota, 507).await["code"], "storage.quota_exceeded");
    assert_eq!(app.download(&user, &file).await, vec![b'a'; 500], "nothing changed");
    assert_eq!(app.storage_used(&user).await, 500);
    assert_eq!(wopi.put_file(Some("Q"), vec![b'd'; 700]).await.status(), 200);
    assert_eq!(app.storage_used(&user).await, 700, "the quota is settled by the difference");
}

async fn tokens_are_scoped_to_one_file_one_user_and_a_mode(app: TestApp) {
    let (user, root) = setup(&app, 0).await;
    let file = create(&app, &user, &root, "mine.docx", b"mine").await;
    let other = create(&app, &user, &root, "other.docx", b"other").await;
    let wopi = app.wopi(&user, &file, "edit").await;
    assert_eq!(wopi.check_file_info().await.status(), 200);

    let elsewhere = wopi.on_file(&other);
    assert_eq!(error_body(elsewhere.check_file_info().await, 401).await["code"], "auth.invalid_token");
    assert_eq!(error_body(elsewhere.get_file().await, 401).await["code"], "auth.invalid_token");
    let missing = wopi.with_token("");
    assert_eq!(error_body(missing.check_file_info().await, 401).await["code"], "auth.missing_token");
    let garbage = wopi.with_token("not-a-token");
    assert_eq!(error_body(garbage.check_file_info().await, 401).await["code"], "auth.invalid_token");
    let api_token = wopi.with_token(&user.access);
    assert_eq!(error_body(api_token.check_file_info().await, 401).await["code"], "auth.invalid_token");

    let now = now_ms() / 1000;
    let claims = WopiClaims {
        sub: user.user_id.parse().unwrap(),
        jti: uuid::Uuid::new_v4(),
        obj: file.parse().unwrap(),
        edit: true,
        app: None,
        iat: now - 40_000,
        exp: now - 10,
        typ: TokenType::Wopi,
        user_version: 0,
    };
    let expired = wopi.with_token(&app.context().tokens().sign(&claims));
    assert_eq!(error_body(expired.check_file_info().await, 401).await["code"], "auth.token_expired");

    // A file in the trash is gone for WOPI.
    let trashed = create(&app, &user, &root, "trashed.docx", b"bye").await;
    let doomed = app.wopi(&user, &trashed, "view").await;
    let response = app.call(Method::DELETE, "/object", Some(&user.access), Some(json!({"ids": [trashed]}))).await;
    assert_eq!(response.status(), 204);
    assert_eq!(error_body(doomed.check_file_info().await, 404).await["code"], "object.not_found");

    // A banned user's tokens stop at once.
    let admin = app.login_admin().await;
    let path = format!("/admin/user/{}", user.user_id);
    let banned = app.call(Method::PATCH, &path, Some(&admin.access), Some(json!({"status": "BANNED"}))).await;
    assert_eq!(banned.status(), 200);
    assert_eq!(error_body(wopi.check_file_info().await, 401).await["code"], "auth.token_revoked");
    assert_eq!(error_body(wopi.put_file(None, b"x".to_vec()).await, 401).await["code"], "auth.token_revoked");
}

/// A WOPI token (ten hours) ends with the sessions of its user: a password change, and a
/// password an administrator sets, sign the user out everywhere, editors included, on every
/// master; a token issued afterwards works.
async fn signing_out_everywhere_ends_wopi_tokens(app: TestApp) {
    let (user, root) = setup(&app, 0).await;
    let file = create(&app, &user, &root, "notes.docx", b"notes").await;
    let before = app.wopi(&user, &file, "edit").await;
    assert_eq!(before.check_file_info().await.status(), 200);

    let change = json!({"old_password": "wanda-password", "new_password": "wanda-new-password"});
    let changed = app.call(Method::PATCH, "/user/settings/password", Some(&user.access), Some(change)).await;
    assert_eq!(changed.status(), 204);
    assert_eq!(error_body(before.check_file_info().await, 401).await["code"], "auth.token_revoked");
    assert_eq!(error_body(before.put_file(None, b"x".to_vec()).await, 401).await["code"], "auth.token_revoked");
    let old_access = app.call(Method::GET, "/user/me", Some(&user.access), None).await;
    assert_eq!(error_body(old_access, 401).await["code"], "auth.token_revoked", "access tokens end with it");

    let user = app.login("wanda@example.com", "wanda-new-password").await;
    let after = app.wopi(&user, &file, "edit").await;
    assert_eq!(after.check_file_info().await.status(), 200, "a token issued afterwards works");

    let admin = app.login_admin().await;
    let path = format!("/admin/user/{}", user.user_id);
    let reset = app.call(Method::PATCH, &path, Some(&admin.access), Some(json!({"password": "set-by-admin-1"}))).await;
    assert_eq!(reset.status(), 200);
    assert_eq!(error_body(after.check_file_info().await, 401).await["code"], "auth.token_revoked");
    assert_eq!(app.call(Method::GET, "/user/me", Some(&user.access), None).await.status(), 401);
}

async fn put_relative_file_writes_beside_the_file_in_both_modes(app: TestApp) {
    let (user, root) = setup(&app, 0).await;
    let file = create(&app, &user, &root, "thesis.docx", b"original").await;
    let wopi = app.wopi(&user, &file, "edit").await;
    let put_relative = |headers: Vec<(&'static str, String)>, body: &'static [u8]| {
        let wopi = wopi.clone();
        async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            wopi.operation("PUT_RELATIVE", &headers, body.to_vec()).await
        }
    };

    // Suggested mode: an extension keeps the name; a taken name gets a free one.
    let response = put_relative(vec![("X-WOPI-SuggestedTarget", ".pdf".into())], b"as pdf").await;
    assert_eq!(response.status(), 200);
    let created: Value = response.json().await.unwrap();
    assert_eq!(created["Name"], "thesis.pdf");
    let url = created["Url"].as_str().unwrap();
    assert!(url.starts_with(&format!("{}/wopi/files/", app.base_url)), "{url}");
    let info: Value = app.client.get(url).send().await.unwrap().json().await.unwrap();
    assert_eq!((info["BaseFileName"].as_str(), info["Size"].as_i64()), (Some("thesis.pdf"), Some(6)));
    let response = put_relative(vec![("X-WOPI-SuggestedTarget", "thesis.docx".into())], b"copy").await;
    assert_eq!(response.json::<Value>().await.unwrap()["Name"], "thesis (1).docx");
    // UTF-7 names.
    let response = put_relative(vec![("X-WOPI-SuggestedTarget", "+ZeVnLIqe-.docx".into())], b"jp").await;
    assert_eq!(response.json::<Value>().await.unwrap()["Name"], "\u{65e5}\u{672c}\u{8a9e}.docx");

    // Relative mode: exactly that name; a taken one only with overwrite, and not when locked.
    let response = put_relative(vec![("X-WOPI-RelativeTarget", "final.docx".into())], b"final").await;
    assert_eq!(response.json::<Value>().await.unwrap()["Name"], "final.docx");
    let taken = put_relative(vec![("X-WOPI-RelativeTarget", "final.docx".into())], b"again").await;
    assert_eq!(taken.headers()["x-wopi-validrelativetarget"], "final (1).docx");
    assert_eq!(error_body(taken, 409).await["code"], "wopi.target_exists");
    let overwrite =
        vec![("X-WOPI-RelativeTarget", "final.docx".into()), ("X-WOPI-OverwriteRelativeTarget", "true".into())];
    let replaced = put_relative(overwrite.clone(), b"replaced").await;
    assert_eq!(replaced.status(), 200);
    let final_url = replaced.json::<Value>().await.unwrap()["Url"].as_str().unwrap().to_owned();
    let final_content = app.client.get(final_url.replace("?", "/contents?")).send().await.unwrap();
    assert_eq!(final_content.bytes().await.unwrap().as_ref(), b"replaced");
    let final_id = final_url.split("/wopi/files/").nth(1).unwrap().split('?').next().unwrap().to_owned();
    let final_wopi = app.wopi(&user, &final_id, "edit").await;
    assert_eq!(final_wopi.lock("F").await.status(), 200);
    let locked = put_relative(overwrite, b"refused").await;
    assert_eq!(lock_header(&locked).as_deref(), Some("F"));
    assert_eq!(error_body(locked, 409).await["code"], "wopi.target_exists");

    // Both or neither target: not implemented, as the specification says; bad names: 400.
    let both =
        put_relative(vec![("X-WOPI-SuggestedTarget", ".pdf".into()), ("X-WOPI-RelativeTarget", "x.pdf".into())], b"x")
            .await;
    assert_eq!(error_body(both, 501).await["code"], "wopi.not_supported");
    assert_eq!(put_relative(vec![], b"x").await.status(), 501);
    let invalid = put_relative(vec![("X-WOPI-RelativeTarget", "a/b.docx".into())], b"x").await;
    assert!(invalid.headers().contains_key("x-wopi-invalidfilenameerror"));
    assert_eq!(error_body(invalid, 400).await["code"], "wopi.invalid_name");
    let viewer = app.wopi(&user, &file, "view").await;
    let refused = viewer.operation("PUT_RELATIVE", &[("X-WOPI-SuggestedTarget", ".txt")], b"x".to_vec()).await;
    assert_eq!(error_body(refused, 401).await["code"], "wopi.read_only");
}

async fn rename_file_keeps_the_extension_and_respects_the_lock(app: TestApp) {
    let (user, root) = setup(&app, 0).await;
    let file = create(&app, &user, &root, "draft.docx", b"words").await;
    create(&app, &user, &root, "taken.docx", b"other").await;
    let wopi = app.wopi(&user, &file, "edit").await;
    let rename = |name: &'static str, lock: Option<&'static str>| {
        let wopi = wopi.clone();
        async move {
            let mut headers = vec![("X-WOPI-RequestedName", name)];
            headers.extend(lock.map(|lock| ("X-WOPI-Lock", lock)));
            wopi.operation("RENAME_FILE", &headers, Vec::new()).await
        }
    };
    let renamed = rename("chapter one", None).await;
    assert_eq!(renamed.status(), 200);
    assert_eq!(renamed.json::<Value>().await.unwrap()["Name"], "chapter one");
    assert_eq!(wopi.info().await["BaseFileName"], "chapter one.docx");

    assert_eq!(wopi.lock("R").await.status(), 200);
    expect_mismatch(rename("chapter two", Some("other")).await, "R").await;
    expect_mismatch(rename("chapter two", None).await, "R").await;
    assert_eq!(rename("chapter two", Some("R")).await.status(), 200);
    let clash = rename("taken", Some("R")).await;
    assert!(clash.headers().contains_key("x-wopi-invalidfilenameerror"));
    assert_eq!(error_body(clash, 400).await["code"], "wopi.invalid_name");
    assert_eq!(wopi.info().await["BaseFileName"], "chapter two.docx");
}

async fn delete_file_moves_an_unlocked_file_to_the_trash(app: TestApp) {
    let (user, root) = setup(&app, 0).await;
    let file = create(&app, &user, &root, "old.docx", b"old").await;
    let wopi = app.wopi(&user, &file, "edit").await;
    assert_eq!(wopi.lock("D").await.status(), 200);
    expect_mismatch(wopi.operation("DELETE", &[], Vec::new()).await, "D").await;
    assert_eq!(wopi.operation("UNLOCK", &[("X-WOPI-Lock", "D")], Vec::new()).await.status(), 200);
    assert_eq!(wopi.operation("DELETE", &[], Vec::new()).await.status(), 200);
    assert_eq!(wopi.check_file_info().await.status(), 404);
    let trash: Value = app.call(Method::GET, "/trash", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(trash["count"], 1);
}

async fn locks_are_shared_by_every_master(app: TestApp) {
    let (user, root) = setup(&app, 0).await;
    let file = create(&app, &user, &root, "shared.docx", b"shared").await;
    let wopi = app.wopi(&user, &file, "edit").await;
    let peer = app.spawn_peer().await;
    let on_peer: WopiClient = wopi.through(&format!("http://{}", peer.addr));
    assert_eq!(on_peer.check_file_info().await.status(), 200, "a token works on every master");
    assert_eq!(wopi.lock("M").await.status(), 200);
    // SQLite runs with the in-memory store (one master by design); PostgreSQL with Redis, which
    // both masters share.
    if app.backend == nubo_tests::Backend::Postgres {
        assert_eq!(lock_header(&on_peer.get_lock().await).as_deref(), Some("M"));
        expect_mismatch(on_peer.lock("N").await, "M").await;
        expect_mismatch(on_peer.put_file(Some("N"), b"x".to_vec()).await, "M").await;
        assert_eq!(on_peer.put_file(Some("M"), b"from the peer".to_vec()).await.status(), 200);
        assert_eq!(on_peer.operation("UNLOCK", &[("X-WOPI-Lock", "M")], Vec::new()).await.status(), 200);
        assert_eq!(lock_header(&wopi.get_lock().await).as_deref(), Some(""));
    }
    peer.shutdown(std::time::Duration::from_secs(5)).await.unwrap();
}

async fn administrators_add_wopi_applications_by_discovery(app: TestApp) {
    let admin = app.login_admin().await;
    let server = DiscoveryServer::start().await;
    // The SSRF guard refuses the loopback address unless the application is marked internal.
    let guarded = app.add_wopi_app(&admin, "Collabora (guarded)", &server.url(), false).await;
    assert!(guarded["error"].as_str().unwrap().contains("not allowed"), "{guarded}");
    assert_eq!(guarded["extensions"], json!([]));

    let collabora = app.add_wopi_app(&admin, "Collabora", &server.url(), true).await;
    assert!(collabora["error"].is_null(), "{collabora}");
    assert_eq!((collabora["proof_key"].as_bool(), collabora["old_proof_key"].as_bool()), (Some(true), Some(true)));
    let extensions = collabora["extensions"].as_array().unwrap();
    let docx = extensions.iter().find(|e| e["ext"] == "docx").expect("docx");
    assert_eq!(docx["actions"], json!(["edit"]));
    assert!(collabora["refreshed_at"].is_string());
    let id = collabora["id"].as_str().unwrap();

    // A broken discovery is reported, never a panic; the last good one stays in use.
    server.serve_raw("<html>not discovery</html>");
    let path = format!("/admin/wopi/{id}/refresh");
    let broken: Value = app.call(Method::POST, &path, Some(&admin.access), None).await.json().await.unwrap();
    assert!(broken["error"].as_str().unwrap().contains("not WOPI discovery"), "{broken}");
    assert!(!broken["extensions"].as_array().unwrap().is_empty(), "the last good discovery stays");

    // OnlyOffice's format: view, edit and editnew per extension.
    server.serve(ONLYOFFICE_DISCOVERY, Some(TestKey::Current), None);
    let body = json!({"name": "OnlyOffice", "discovery_url": server.url(), "internal": true, "allow_unsigned": false});
    let path = format!("/admin/wopi/{id}");
    let changed: Value = app.call(Method::PUT, &path, Some(&admin.access), Some(body)).await.json().await.unwrap();
    assert!(changed["error"].is_null(), "{changed}");
    assert_eq!(changed["name"], "OnlyOffice");
    let docx = changed["extensions"].as_array().unwrap().iter().find(|e| e["ext"] == "docx").cloned().unwrap();
    assert_eq!(docx["actions"], json!(["view", "embedview", "edit", "editnew"]));
    assert_eq!(changed["old_proof_key"], false);

    let listed: Value = app.call(Method::GET, "/admin/wopi", Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    let clash = json!({"name": "OnlyOffice", "discovery_url": server.url()});
    let response = app.call(Method::POST, "/admin/wopi", Some(&admin.access), Some(clash)).await;
    assert_eq!(error_body(response, 409).await["code"], "wopi.app_name_taken");
    let bad = json!({"name": "x", "discovery_url": "ftp://example.com/discovery"});
    let response = app.call(Method::POST, "/admin/wopi", Some(&admin.access), Some(bad)).await;
    assert_eq!(error_body(response, 422).await["field"], "discovery_url");
    let user = app.register("wanda@example.com", "wanda-password").await;
    let response = app.call(Method::GET, "/admin/wopi", Some(&user.access), None).await;
    assert_eq!(error_body(response, 403).await["code"], "auth.admin_required");
    assert_eq!(app.call(Method::DELETE, &path, Some(&admin.access), None).await.status(), 204);
    let response = app.call(Method::GET, &path, Some(&admin.access), None).await;
    assert_eq!(error_body(response, 404).await["code"], "wopi.app_not_found");
}

/// A user with a file `name` and an application on a fresh discovery server.
async fn with_application(app: &TestApp, name: &str) -> (Session, String, String, DiscoveryServer) {
    let (user, root) = setup(app, 0).await;
    let file = create(app, &user, &root, name, b"signed content").await;
    let admin = app.login_admin().await;
    let server = DiscoveryServer::start().await;
    let added = app.add_wopi_app(&admin, "Collabora", &server.url(), true).await;
    (user, file, added["id"].as_str().unwrap().to_owned(), server)
}

async fn a_session_with_an_application_answers_its_action_url(app: TestApp) {
    let (user, file, app_id, server) = with_application(&app, "letter.docx").await;
    let wopi = app.wopi_with(&user, &file, json!({"mode": "edit", "app_id": app_id}), Signing::CURRENT).await;
    let src: String = percent_encoding::utf8_percent_encode(
        &format!("{}/wopi/files/{file}", app.base_url),
        percent_encoding::NON_ALPHANUMERIC,
    )
    .to_string();
    assert_eq!(wopi.action_url, format!("{}/browser/0b27e85/cool.html?WOPISrc={src}", server.base));
    assert_eq!(wopi.check_file_info().await.status(), 200);

    let (root, other) = (app.root_id(&user).await, "song.mp3");
    let music = create(&app, &user, &root, other, b"la").await;
    let refused = app.wopi_session_with(&user, &music, json!({"mode": "view", "app_id": app_id})).await;
    assert_eq!(error_body(refused, 409).await["code"], "wopi.no_action");
    let missing = json!({"mode": "view", "app_id": uuid::Uuid::new_v4()});
    let refused = app.wopi_session_with(&user, &file, missing).await;
    assert_eq!(error_body(refused, 404).await["code"], "wopi.app_not_found");
}

async fn expect_proof_refused(response: Response) {
    assert_eq!(error_body(response, 500).await["code"], "wopi.proof_invalid");
}

async fn every_request_of_an_application_carries_a_valid_proof(app: TestApp) {
    let (user, file, app_id, _server) = with_application(&app, "signed.docx").await;
    let wopi = app.wopi_with(&user, &file, json!({"mode": "edit", "app_id": app_id}), Signing::CURRENT).await;
    assert_eq!(wopi.check_file_info().await.status(), 200, "current key on X-WOPI-Proof");
    assert_eq!(wopi.lock("P").await.status(), 200);
    assert_eq!(wopi.put_file(Some("P"), b"signed".to_vec()).await.status(), 200);
    assert_eq!(wopi.get_file().await.bytes().await.unwrap().as_ref(), b"signed");

    let old_on_proof = Signing { proof: Some(TestKey::Old), ..Signing::CURRENT };
    assert_eq!(wopi.signing(old_on_proof).check_file_info().await.status(), 200, "old key on X-WOPI-Proof");
    let current_on_old = Signing { proof: None, proof_old: Some(TestKey::Current), ..Signing::CURRENT };
    assert_eq!(wopi.signing(current_on_old).check_file_info().await.status(), 200, "current key on ProofOld");
    let old_on_old = Signing { proof: None, proof_old: Some(TestKey::Old), ..Signing::CURRENT };
    expect_proof_refused(wopi.signing(old_on_old).check_file_info().await).await;

    expect_proof_refused(wopi.signing(Signing::NONE).check_file_info().await).await;
    expect_proof_refused(wopi.signing(Signing::NONE).put_file(Some("P"), b"unsigned".to_vec()).await).await;
    let stale = Signing { age_ms: 21 * 60 * 1000, ..Signing::CURRENT };
    expect_proof_refused(wopi.signing(stale).check_file_info().await).await;
    let recent = Signing { age_ms: 19 * 60 * 1000, ..Signing::CURRENT };
    assert_eq!(wopi.signing(recent).check_file_info().await.status(), 200, "19 minutes is still fresh");
    let tampered = Signing { tamper: true, ..Signing::CURRENT };
    expect_proof_refused(wopi.signing(tampered).check_file_info().await).await;
    expect_proof_refused(wopi.signing(tampered).lock("P").await).await;
    // A proof is bound to its token: another session's token with this session's proof fails.
    let other = app.wopi_with(&user, &file, json!({"mode": "view", "app_id": app_id}), Signing::CURRENT).await;
    let timestamp = ticks(now_ms());
    let proof = sign(test_key(TestKey::Current), &wopi.token, &wopi.url(""), timestamp);
    let borrowed = app
        .client
        .get(other.url(""))
        .header("X-WOPI-TimeStamp", timestamp.to_string())
        .header("X-WOPI-Proof", proof)
        .send()
        .await
        .unwrap();
    expect_proof_refused(borrowed).await;
    assert_eq!(other.check_file_info().await.status(), 200, "its own proof works");
    assert_eq!(app.download(&user, &file).await, b"signed", "no refused request changed anything");
}

async fn a_rotation_of_the_proof_keys_is_followed(app: TestApp) {
    let (user, file, app_id, server) = with_application(&app, "rotated.docx").await;
    let admin = app.login_admin().await;
    // The application rotates: the old key is gone, a new one is current.
    server.serve(nubo_tests::wopi::COLLABORA_DISCOVERY, Some(TestKey::Old), None);
    let path = format!("/admin/wopi/{app_id}/refresh");
    assert_eq!(app.call(Method::POST, &path, Some(&admin.access), None).await.status(), 200);
    let wopi = app.wopi_with(&user, &file, json!({"mode": "view", "app_id": app_id}), Signing::CURRENT).await;
    expect_proof_refused(wopi.check_file_info().await).await;
    let rotated = Signing { proof: Some(TestKey::Old), ..Signing::CURRENT };
    assert_eq!(wopi.signing(rotated).check_file_info().await.status(), 200);
    // Removing the application ends its sessions.
    let path = format!("/admin/wopi/{app_id}");
    assert_eq!(app.call(Method::DELETE, &path, Some(&admin.access), None).await.status(), 204);
    expect_proof_refused(wopi.signing(rotated).check_file_info().await).await;
}

async fn an_application_without_proof_keys_needs_the_administrator_s_consent(app: TestApp) {
    let (user, file, app_id, server) = with_application(&app, "plain.docx").await;
    let admin = app.login_admin().await;
    server.serve(nubo_tests::wopi::COLLABORA_DISCOVERY, None, None);
    let path = format!("/admin/wopi/{app_id}/refresh");
    let view: Value = app.call(Method::POST, &path, Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(view["proof_key"], false);
    let wopi = app.wopi_with(&user, &file, json!({"mode": "view", "app_id": app_id}), Signing::NONE).await;
    expect_proof_refused(wopi.check_file_info().await).await;
    let body = json!({"name": "Collabora", "discovery_url": server.url(), "internal": true, "allow_unsigned": true});
    let path = format!("/admin/wopi/{app_id}");
    assert_eq!(app.call(Method::PUT, &path, Some(&admin.access), Some(body)).await.status(), 200);
    assert_eq!(wopi.check_file_info().await.status(), 200, "allowed by the administrator");
}

async fn viewers_of_an_extension_list_built_in_viewers_and_wopi_applications(app: TestApp) {
    let admin = app.login_admin().await;
    let user = app.register("wanda@example.com", "wanda-password").await;
    let viewers = |ext: &'static str| {
        let (app, user) = (&app, &user);
        async move { app.call(Method::GET, &format!("/file/viewers?ext={ext}"), Some(&user.access), None).await }
    };
    let names = |body: &Value| -> Vec<(String, bool)> {
        body["viewers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["name"].as_str().unwrap().to_owned(), v["can_edit"].as_bool().unwrap()))
            .collect()
    };
    let png: Value = viewers("PNG").await.json().await.unwrap();
    assert_eq!(png["ext"], "png");
    assert_eq!(names(&png), [("image".to_owned(), false)]);
    let md: Value = viewers(".md").await.json().await.unwrap();
    assert_eq!(names(&md), [("markdown".to_owned(), true), ("text".to_owned(), true)]);
    let docx: Value = viewers("docx").await.json().await.unwrap();
    assert_eq!(docx["viewers"], json!([]), "no application yet");

    let server = DiscoveryServer::start().await;
    server.serve(ONLYOFFICE_DISCOVERY, Some(TestKey::Current), None);
    let added = app.add_wopi_app(&admin, "OnlyOffice", &server.url(), true).await;
    let docx: Value = viewers("docx").await.json().await.unwrap();
    let office = &docx["viewers"][0];
    assert_eq!((office["kind"].as_str(), office["name"].as_str()), (Some("wopi"), Some("OnlyOffice")));
    assert_eq!(office["app_id"], added["id"]);
    assert_eq!(office["actions"], json!(["view", "embedview", "edit", "editnew"]));
    assert_eq!(office["can_edit"], true);
    let doc: Value = viewers("doc").await.json().await.unwrap();
    assert_eq!(doc["viewers"][0]["can_edit"], false, "OnlyOffice only views .doc");

    assert_eq!(error_body(viewers("tar.gz").await, 422).await["field"], "ext");
    let anonymous = app.call(Method::GET, "/file/viewers?ext=png", None, None).await;
    assert_eq!(error_body(anonymous, 401).await["code"], "auth.missing_token");
}

async fn the_viewer_registry_follows_the_settings_on_every_master(app: TestApp) {
    let admin = app.login_admin().await;
    let user = app.register("vera@example.com", "vera-password").await;
    let get = |base: String, ext: &'static str, etag: Option<String>| {
        let (app, user) = (&app, &user);
        async move {
            let mut request = app.client.get(format!("{base}/api/v1/file/viewers?ext={ext}")).bearer_auth(&user.access);
            if let Some(etag) = etag {
                request = request.header("if-none-match", etag);
            }
            request.send().await.unwrap()
        }
    };
    let here = app.base_url.clone();
    let names = |body: Value| -> Vec<String> {
        body["viewers"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap().to_owned()).collect()
    };
    let first = get(here.clone(), "md", None).await;
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(names(first.json().await.unwrap()), ["markdown", "text"]);
    let unchanged = get(here.clone(), "md", Some(etag.clone())).await;
    assert_eq!(unchanged.status(), 304, "the same settings version answers 304");

    // The catalog describes the setting, and its default lists every built-in viewer.
    let catalog: Value =
        app.call(Method::GET, "/admin/settings/catalog", Some(&admin.access), None).await.json().await.unwrap();
    let entry = catalog.as_array().unwrap().iter().find(|e| e["name"] == "viewers").unwrap().clone();
    assert_eq!((entry["group"].as_str(), entry["type"].as_str()), (Some("VIEWER"), Some("viewers")));
    assert_eq!(entry["default"].as_array().unwrap().len(), 6);

    // A peer master builds its registry before the change (on PostgreSQL: both share Redis).
    let peer = if app.backend == Backend::Postgres { Some(app.spawn_peer().await) } else { None };
    if let Some(peer) = &peer {
        let there = get(format!("http://{}", peer.addr), "md", None).await;
        assert_eq!(names(there.json().await.unwrap()), ["markdown", "text"]);
    }

    let viewers = json!([
        {"id": "markdown", "enabled": false, "can_edit": true, "extensions": ["md"]},
        {"id": "text", "enabled": true, "can_edit": false, "extensions": ["md", ".NFO"]},
        {"id": "image", "enabled": true, "can_edit": false, "extensions": ["png"]}
    ]);
    let saved =
        app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(json!({"viewers": viewers}))).await;
    assert_eq!(saved.status(), 204);
    let changed = get(here.clone(), "md", Some(etag.clone())).await;
    assert_eq!(changed.status(), 200, "a new settings version is a new answer");
    assert_ne!(changed.headers()["etag"].to_str().unwrap(), etag);
    let body: Value = changed.json().await.unwrap();
    assert_eq!(names(body.clone()), ["text"], "markdown is disabled");
    assert_eq!(body["viewers"][0]["can_edit"], false, "text may no longer save");
    assert_eq!(names(get(here.clone(), "nfo", None).await.json().await.unwrap()), ["text"]);
    assert!(names(get(here.clone(), "pdf", None).await.json().await.unwrap()).is_empty(), "pdf is not listed");
    if let Some(peer) = &peer {
        let there = get(format!("http://{}", peer.addr), "md", None).await;
        assert_eq!(names(there.json().await.unwrap()), ["text"], "the peer rebuilt at once");
    }

    // Only known viewers, each once, and editing only where the viewer can save.
    for (bad, why) in [
        (json!([{"id": "image", "enabled": true, "can_edit": true, "extensions": []}]), "only markdown and text"),
        (json!([{"id": "flash", "enabled": true, "can_edit": false, "extensions": []}]), "unknown viewer"),
        (json!([{"id": "text", "enabled": true, "can_edit": false, "extensions": ["a b"]}]), "invalid extension"),
        (json!({"id": "text"}), "must be a list"),
    ] {
        let refused =
            app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(json!({"viewers": bad}))).await;
        let body = error_body(refused, 422).await;
        assert_eq!(body["field"], "viewers");
        assert!(body["message"].as_str().unwrap().contains(why), "{body}");
    }
    let catalog: Value =
        app.call(Method::GET, "/admin/settings/catalog", Some(&admin.access), None).await.json().await.unwrap();
    let entry = catalog.as_array().unwrap().iter().find(|e| e["name"] == "viewers").unwrap().clone();
    assert_eq!(entry["value"][1]["extensions"], json!(["md", "nfo"]), "the stored list, normalised");
}

async fn pages_may_frame_and_post_to_the_wopi_applications(app: TestApp) {
    let admin = app.login_admin().await;
    let policy = |app: &TestApp| {
        let client = app.client.clone();
        let url = format!("{}/files", app.base_url);
        async move {
            let page = client.get(url).send().await.unwrap();
            page.headers().get("content-security-policy").map(|v| v.to_str().unwrap().to_owned())
        }
    };
    let Some(before) = policy(&app).await else { return }; // built without the web app
    let server = DiscoveryServer::start().await;
    let origin = server.url().split("/hosting").next().unwrap().to_owned();
    assert!(!before.contains(&origin), "{before}");
    server.serve(ONLYOFFICE_DISCOVERY, Some(TestKey::Current), None);
    let added = app.add_wopi_app(&admin, "OnlyOffice", &server.url(), true).await;
    let after = policy(&app).await.unwrap();
    assert!(after.contains(&format!("form-action 'self' {origin};")), "{after}");
    assert!(after.contains(&format!("frame-src 'self' {origin} blob:;")), "{after}");
    let path = format!("/admin/wopi/{}", added["id"].as_str().unwrap());
    assert_eq!(app.call(Method::DELETE, &path, Some(&admin.access), None).await.status(), 204);
    assert!(!policy(&app).await.unwrap().contains(&origin), "gone with the application");
}
