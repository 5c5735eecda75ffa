//! `/admin`: access control on every route, users with filters, groups, every user's files.

use nubo_tests::{TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    non_admins_get_403_on_every_admin_route,
    user_list_filters_and_pages,
    groups_are_managed_and_a_group_with_users_cannot_be_deleted,
    administrators_cannot_ban_or_delete_themselves,
    the_last_administrator_cannot_give_up_administration,
    deleted_users_lose_access_at_once,
    first_start_seeds_groups_and_the_configured_administrator,
    administrators_find_and_delete_any_users_files,
);

async fn non_admins_get_403_on_every_admin_route(app: TestApp) {
    let user = app.register("rita@example.com", "rita-password").await;
    let doc: Value = app.get("/openapi.json").await.json().await.unwrap();
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let Some(relative) = path.strip_prefix("/api/v1") else { continue };
        if !relative.starts_with("/admin") {
            continue;
        }
        let concrete = relative.replace("{id}", &uuid::Uuid::new_v4().to_string());
        for method in item.as_object().unwrap().keys() {
            let method: Method = method.to_uppercase().parse().unwrap();
            let response = app.call(method.clone(), &concrete, Some(&user.access), Some(json!({}))).await;
            let body = error_body(response, 403).await;
            assert_eq!(body["code"], "auth.admin_required", "{method} {concrete}");
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} admin operations found");
}

async fn user_list_filters_and_pages(app: TestApp) {
    let admin = app.login_admin().await;
    for name in ["sam", "sara", "tom"] {
        app.register(&format!("{name}@example.com"), "some-password").await;
    }
    let list = |query: &str| {
        let path = format!("/admin/user?{query}");
        let app = &app;
        let token = admin.access.clone();
        async move { app.call(Method::GET, &path, Some(&token), None).await.json::<Value>().await.unwrap() }
    };
    assert_eq!(list("").await["count"], 4, "three users and the administrator");
    let sa = list("email_contains=SA").await;
    assert_eq!(sa["count"], 2);
    let emails: Vec<&str> = sa["items"].as_array().unwrap().iter().map(|u| u["email"].as_str().unwrap()).collect();
    assert!(emails.contains(&"sam@example.com") && emails.contains(&"sara@example.com"));
    assert_eq!(list("nickname_contains=tom").await["count"], 1);
    assert_eq!(list("email_contains=%25").await["count"], 0, "LIKE wildcards match literally");

    let groups: Value = app.call(Method::GET, "/admin/group", Some(&admin.access), None).await.json().await.unwrap();
    let users_group =
        groups.as_array().unwrap().iter().find(|g| g["name"] == "Users").unwrap()["id"].as_str().unwrap().to_owned();
    assert_eq!(list(&format!("group_id={users_group}")).await["count"], 3);
    assert_eq!(list("status=ACTIVE").await["count"], 4);
    assert_eq!(list("status=BANNED").await["count"], 0);

    let page = list("limit=2&offset=1").await;
    assert_eq!(page["count"], 4);
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    for bad in ["limit=0", "limit=1001", "offset=-1"] {
        let response = app.call(Method::GET, &format!("/admin/user?{bad}"), Some(&admin.access), None).await;
        assert_eq!(response.status(), 422, "{bad}");
    }
    let response = app.call(Method::GET, "/admin/user?status=SLEEPING", Some(&admin.access), None).await;
    assert_eq!(error_body(response, 400).await["code"], "request.invalid_query");
}

async fn groups_are_managed_and_a_group_with_users_cannot_be_deleted(app: TestApp) {
    let admin = app.login_admin().await;
    let five_gib = 5_i64 * 1024 * 1024 * 1024;
    let body = json!({"name": "Family", "max_storage": five_gib, "permissions": {"share": true, "webdav": false}});
    let response = app.call(Method::POST, "/admin/group", Some(&admin.access), Some(body.clone())).await;
    assert_eq!(response.status(), 201);
    let group: Value = response.json().await.unwrap();
    assert_eq!(group["max_storage"], five_gib, "sizes above 4 GiB survive");
    assert_eq!(group["permissions"]["share"], true);
    let id = group["id"].as_str().unwrap().to_owned();
    assert_eq!(
        error_body(app.call(Method::POST, "/admin/group", Some(&admin.access), Some(body)).await, 409).await["code"],
        "group.name_taken"
    );

    let unknown_policy =
        json!({"name": "Family", "is_admin": false, "max_storage": 1, "policy_ids": [uuid::Uuid::new_v4()]});
    let response =
        app.call(Method::PUT, &format!("/admin/group/{id}"), Some(&admin.access), Some(unknown_policy)).await;
    assert_eq!(error_body(response, 422).await["field"], "policy_ids");
    let negative = json!({"name": "Family", "is_admin": false, "max_storage": -1});
    let response = app.call(Method::PUT, &format!("/admin/group/{id}"), Some(&admin.access), Some(negative)).await;
    assert_eq!(error_body(response, 422).await["field"], "max_storage");

    let member = app.register("uma@example.com", "uma-password").await;
    let response = app
        .call(
            Method::PATCH,
            &format!("/admin/user/{}", member.user_id),
            Some(&admin.access),
            Some(json!({"group_id": id})),
        )
        .await;
    assert_eq!(response.status(), 200);
    let response = app.call(Method::DELETE, &format!("/admin/group/{id}"), Some(&admin.access), None).await;
    assert_eq!(error_body(response, 409).await["code"], "group.has_users");
    let group: Value =
        app.call(Method::GET, &format!("/admin/group/{id}"), Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(group["member_count"], 1);

    let response =
        app.call(Method::DELETE, &format!("/admin/user/{}", member.user_id), Some(&admin.access), None).await;
    assert_eq!(response.status(), 204);
    assert_eq!(app.call(Method::DELETE, &format!("/admin/group/{id}"), Some(&admin.access), None).await.status(), 204);
    let response = app.call(Method::GET, &format!("/admin/group/{id}"), Some(&admin.access), None).await;
    assert_eq!(error_body(response, 404).await["code"], "group.not_found");
}

async fn administrators_cannot_ban_or_delete_themselves(app: TestApp) {
    let admin = app.login_admin().await;
    let path = format!("/admin/user/{}", admin.user_id);
    let response = app.call(Method::PATCH, &path, Some(&admin.access), Some(json!({"status": "BANNED"}))).await;
    assert_eq!(error_body(response, 409).await["code"], "user.cannot_ban_self");
    let response = app.call(Method::DELETE, &path, Some(&admin.access), None).await;
    assert_eq!(error_body(response, 409).await["code"], "user.cannot_delete_self");
    assert_eq!(app.call(Method::GET, "/user/me", Some(&admin.access), None).await.status(), 200);
}

async fn deleted_users_lose_access_at_once(app: TestApp) {
    let admin = app.login_admin().await;
    let user = app.register("vera@example.com", "vera-password").await;
    assert_eq!(
        app.call(Method::DELETE, &format!("/admin/user/{}", user.user_id), Some(&admin.access), None).await.status(),
        204
    );
    // A deleted user's token answers 401 `auth.user_not_found` (docs/src/errors.md), not 403.
    assert_eq!(app.call(Method::GET, "/user/session", Some(&user.access), None).await.status(), 401);
    assert_eq!(app.call(Method::GET, "/user/me", Some(&user.access), None).await.status(), 401);
    let response = app.call(Method::GET, &format!("/admin/user/{}", user.user_id), Some(&admin.access), None).await;
    assert_eq!(error_body(response, 404).await["code"], "user.not_found");
}

/// The ids of the seeded `Administrators` and `Users` groups.
async fn seeded_groups(app: &TestApp, admin: &nubo_tests::Session) -> (String, String) {
    let groups: Value = app.call(Method::GET, "/admin/group", Some(&admin.access), None).await.json().await.unwrap();
    let id = |name: &str| {
        groups.as_array().unwrap().iter().find(|g| g["name"] == name).unwrap()["id"].as_str().unwrap().to_owned()
    };
    (id("Administrators"), id("Users"))
}

/// Neither moving the last administrator to another group nor taking `is_admin` from their
/// group (left out of a `PUT`, or false) leaves the site without one; with a second
/// administrator, either may step down.
async fn the_last_administrator_cannot_give_up_administration(app: TestApp) {
    let admin = app.login_admin().await;
    let (admins, users) = seeded_groups(&app, &admin).await;
    let me = format!("/admin/user/{}", admin.user_id);
    let group_path = format!("/admin/group/{admins}");
    let group: Value = app.call(Method::GET, &group_path, Some(&admin.access), None).await.json().await.unwrap();
    let replacement = |is_admin: Option<bool>| {
        let mut body = json!({"name": group["name"], "max_storage": group["max_storage"],
                              "permissions": group["permissions"], "policy_ids": group["policy_ids"]});
        if let Some(is_admin) = is_admin {
            body["is_admin"] = is_admin.into();
        }
        body
    };

    let moved = app.call(Method::PATCH, &me, Some(&admin.access), Some(json!({"group_id": users}))).await;
    assert_eq!(error_body(moved, 409).await["code"], "group.last_administrator");
    let left_out = app.call(Method::PUT, &group_path, Some(&admin.access), Some(replacement(None))).await;
    assert!(
        left_out.status().is_client_error() && left_out.status() != 409,
        "is_admin is required: {}",
        left_out.status()
    );
    let unset = app.call(Method::PUT, &group_path, Some(&admin.access), Some(replacement(Some(false)))).await;
    assert_eq!(error_body(unset, 409).await["code"], "group.last_administrator");
    let still: Value = app.call(Method::GET, &group_path, Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(still["is_admin"], true, "nothing changed");
    assert_eq!(
        app.call(Method::GET, &me, Some(&admin.access), None).await.json::<Value>().await.unwrap()["group"]["id"],
        admins.as_str()
    );
    let kept = app.call(Method::PUT, &group_path, Some(&admin.access), Some(replacement(Some(true)))).await;
    assert_eq!(kept.status(), 200, "a replacement that keeps administration goes through");

    // A second administrator: now the first may step down.
    let second = app.register("second@example.com", "second-password").await;
    let promoted = app
        .call(
            Method::PATCH,
            &format!("/admin/user/{}", second.user_id),
            Some(&admin.access),
            Some(json!({"group_id": admins})),
        )
        .await;
    assert_eq!(promoted.status(), 200);
    let moved = app.call(Method::PATCH, &me, Some(&admin.access), Some(json!({"group_id": users}))).await;
    assert_eq!(moved.status(), 200, "another administrator is left");
    let second = app.refresh(&second).await;
    let second_path = format!("/admin/user/{}", second.user_id);
    let back = app.call(Method::PATCH, &second_path, Some(&second.access), Some(json!({"group_id": users}))).await;
    assert_eq!(error_body(back, 409).await["code"], "group.last_administrator", "the second is the last one now");
}

async fn first_start_seeds_groups_and_the_configured_administrator(app: TestApp) {
    let admin = app.login_admin().await;
    let groups: Value = app.call(Method::GET, "/admin/group", Some(&admin.access), None).await.json().await.unwrap();
    let names: Vec<&str> = groups.as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["Administrators", "Users"]);
    let users: Value = app.call(Method::GET, "/admin/user", Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(users["count"], 1);
    assert_eq!(users["items"][0]["email"], nubo_tests::ADMIN_EMAIL);
    assert_eq!(users["items"][0]["group"]["name"], "Administrators");
}

async fn administrators_find_and_delete_any_users_files(app: TestApp) {
    let admin = app.login_admin().await;
    let ann = app.register("ann@example.com", "ann-password-1").await;
    let bob = app.register("bob@example.com", "bob-password-1").await;
    let ann_root = app.root_id(&ann).await;
    let bob_root = app.root_id(&bob).await;
    let report = app.upload(&ann, &ann_root, "Report_2026.PDF", &[1; 500]).await;
    let notes = app.upload(&ann, &ann_root, "notes.txt", &[2; 40]).await;
    let big = app.upload(&bob, &bob_root, "report-big.bin", &[3; 3000]).await;
    app.mkdir(&bob, &bob_root, "a folder named report").await;
    let id = |object: &Value| object["id"].as_str().unwrap().to_owned();
    let list = |query: &str| {
        let (app, access, path) = (&app, admin.access.clone(), format!("/admin/file{query}"));
        async move {
            let response = app.call(Method::GET, &path, Some(&access), None).await;
            assert_eq!(response.status(), 200, "{path}");
            let page: Value = response.json().await.unwrap();
            let mut names: Vec<String> =
                page["items"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap().to_owned()).collect();
            names.sort();
            names
        }
    };
    assert_eq!(list("?name_contains=report").await, ["Report_2026.PDF", "report-big.bin"], "files only, any case");
    assert_eq!(list(&format!("?owner_id={}", ann.user_id)).await, ["Report_2026.PDF", "notes.txt"]);
    assert_eq!(list("?min_size=100&max_size=1000").await, ["Report_2026.PDF"]);
    assert_eq!(list("?name_contains=_2026").await, ["Report_2026.PDF"], "a wildcard character matches itself");
    assert_eq!(list("?name_contains=%25").await, Vec::<String>::new());
    let negative = app.call(Method::GET, "/admin/file?min_size=-1", Some(&admin.access), None).await;
    assert_eq!(error_body(negative, 422).await["field"], "min_size");
    // Each file names its owner and where it lives.
    let deep = app.mkdir(&bob, &bob_root, "archive").await;
    let deeper = app.mkdir(&bob, &deep, "2026").await;
    app.upload(&bob, &deeper, "q1.csv", b"a,b").await;
    let page: Value =
        app.call(Method::GET, "/admin/file?limit=100", Some(&admin.access), None).await.json().await.unwrap();
    let seen: Vec<(String, String, String)> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let text = |key: &str| f[key].as_str().unwrap_or_default().to_owned();
            (text("path"), text("owner_email"), text("owner_nickname"))
        })
        .collect();
    let bob_nickname: Value = app.call(Method::GET, "/user/me", Some(&bob.access), None).await.json().await.unwrap();
    let bob_nickname = bob_nickname["nickname"].as_str().unwrap().to_owned();
    assert!(
        seen.contains(&("/archive/2026/q1.csv".to_owned(), "bob@example.com".to_owned(), bob_nickname)),
        "{seen:?}"
    );
    assert!(seen.iter().any(|(path, email, _)| path == "/notes.txt" && email == "ann@example.com"), "{seen:?}");

    // To the owner's trash, or for good; members may not.
    let refused = app.call(Method::DELETE, "/admin/file", Some(&bob.access), Some(json!({"ids": [id(&notes)]}))).await;
    assert_eq!(error_body(refused, 403).await["code"], "auth.admin_required");
    let trashed = json!({"ids": [id(&notes), id(&big)]});
    assert_eq!(app.call(Method::DELETE, "/admin/file", Some(&admin.access), Some(trashed)).await.status(), 204);
    let trash: Value = app.call(Method::GET, "/trash", Some(&ann.access), None).await.json().await.unwrap();
    assert_eq!(trash["items"][0]["name"], "notes.txt");
    assert_eq!(app.storage_used(&bob).await, 3003, "the trash still counts (and q1.csv)");
    let again = app.call(Method::DELETE, "/admin/file", Some(&admin.access), Some(json!({"ids": [id(&big)]}))).await;
    assert_eq!(error_body(again, 404).await["code"], "object.not_found");
    let purge = json!({"ids": [id(&report)], "purge": true});
    assert_eq!(app.call(Method::DELETE, "/admin/file", Some(&admin.access), Some(purge)).await.status(), 204);
    assert_eq!(app.storage_used(&ann).await, 40, "purged bytes are released");
    assert_eq!(list(&format!("?owner_id={}", ann.user_id)).await, Vec::<String>::new());
    let root = json!({"ids": [ann_root]});
    let refused = app.call(Method::DELETE, "/admin/file", Some(&admin.access), Some(root)).await;
    assert_eq!(error_body(refused, 403).await["code"], "object.root");
}
