//! WebDAV hardening (issue 30): bounded locks, refused partial writes, paths and destinations
//! outside `/dav`, copy and move cycles, a PUT race on a new name, folder membership under a
//! depth-0 lock, `PROPFIND` without `Depth`, and file answers that cannot script our origin.

use nubo_tests::dav::DavUser;
use nubo_tests::{TestApp, error_body, on_every_backend, settled};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

on_every_backend!(
    locks_are_bounded_in_owner_lifetime_and_number,
    a_partial_put_or_patch_is_refused_and_changes_nothing,
    a_path_or_destination_outside_dav_is_refused,
    a_folder_is_not_copied_or_moved_into_itself,
    of_two_puts_racing_on_a_new_name_the_second_gets_409,
    a_depth_zero_lock_on_a_folder_guards_its_members,
    a_propfind_without_depth_is_refused_as_infinity,
    get_serves_active_content_as_an_attachment_that_cannot_script,
);

fn lock_body(scope: &str, owner: &str) -> String {
    format!(
        r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:{scope}/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>{owner}</D:owner></D:lockinfo>"#
    )
}

async fn lock(dav: &DavUser, path: &str, scope: &str, owner: &str) -> reqwest::Response {
    dav.request("LOCK", path).header("Timeout", "Infinite").body(lock_body(scope, owner)).send().await.unwrap()
}

fn token_of(response: &reqwest::Response) -> String {
    let header = response.headers()["lock-token"].to_str().unwrap();
    header.trim_matches(|c| c == '<' || c == '>').to_owned()
}

async fn locks_are_bounded_in_owner_lifetime_and_number(app: TestApp) {
    let (_user, dav) = app.dav_user("lock@example.com", "locks").await;
    for name in 0..11 {
        assert_eq!(dav.put(&format!("/f{name}.txt"), "x").await.status(), 201);
    }

    // An owner over 4 KiB is refused, and no lock is taken.
    let response = lock(&dav, "/f0.txt", "shared", &"o".repeat(5000)).await;
    let body = error_body(response, 413).await;
    assert_eq!(body["code"], "dav.lock_owner_too_large");
    let (_, listing) = dav.propfind("/f0.txt", "0").await;
    assert!(!listing.contains("activelock"), "{listing}");

    // An infinite timeout is granted as one hour, and the answer says so.
    let response = lock(&dav, "/f0.txt", "shared", &"o".repeat(4000)).await;
    assert_eq!(response.status(), 200);
    let granted = response.text().await.unwrap();
    assert!(granted.contains("Second-3600"), "{granted}");

    // 100 locks per resource.
    for _ in 1..100 {
        assert_eq!(lock(&dav, "/f0.txt", "shared", "me").await.status(), 200);
    }
    let body = error_body(lock(&dav, "/f0.txt", "shared", "me").await, 409).await;
    assert_eq!(body["code"], "dav.too_many_locks");
    let (status, listing) = dav.propfind("/f0.txt", "0").await;
    assert_eq!(status, 207);
    assert_eq!(listing.matches("<D:activelock>").count(), 100, "the refused lock was not kept");

    // 1000 per user: nine more resources of 100 each, then the eleventh resource is refused.
    for name in 1..10 {
        for _ in 0..100 {
            assert_eq!(lock(&dav, &format!("/f{name}.txt"), "shared", "me").await.status(), 200);
        }
    }
    let body = error_body(lock(&dav, "/f10.txt", "shared", "me").await, 409).await;
    assert_eq!(body["code"], "dav.too_many_locks");

    // Releasing one makes room again.
    let taken = lock(&dav, "/f10.txt", "exclusive", "me").await;
    assert_eq!(taken.status(), 409);
    let (_, listing) = dav.propfind("/f9.txt", "0").await;
    let token =
        listing.split("<D:href>").filter_map(|s| s.split("</D:href>").next()).find(|h| h.starts_with("urn:uuid:"));
    let token = token.expect("a lock token in the listing").to_owned();
    let unlock = dav.request("UNLOCK", "/f9.txt").header("Lock-Token", format!("<{token}>")).send().await.unwrap();
    assert_eq!(unlock.status(), 204);
    assert_eq!(lock(&dav, "/f10.txt", "exclusive", "me").await.status(), 200);
}

async fn a_partial_put_or_patch_is_refused_and_changes_nothing(app: TestApp) {
    let (_user, dav) = app.dav_user("range@example.com", "ranges").await;
    assert_eq!(dav.put("/ten.txt", "0123456789").await.status(), 201);
    for range in ["bytes 0-1/10", "bytes 0-1/*", "bytes 2-3/10", "bytes 8-11/12"] {
        let response = dav.request("PUT", "/ten.txt").header("Content-Range", range).body("xx").send().await.unwrap();
        let body = error_body(response, 501).await;
        assert_eq!(body["code"], "dav.not_implemented", "{range}");
    }
    let new = dav.request("PUT", "/new.txt").header("Content-Range", "bytes 0-1/2").body("xx").send().await.unwrap();
    assert_eq!(new.status(), 501);
    let patch = dav
        .request("PATCH", "/ten.txt")
        .header("Content-Type", "application/x-sabredav-partialupdate")
        .header("X-Update-Range", "bytes=0-1")
        .body("xx")
        .send()
        .await
        .unwrap();
    assert_eq!(error_body(patch, 501).await["code"], "dav.not_implemented");
    assert_eq!(dav.get("/ten.txt").await.text().await.unwrap(), "0123456789");
    assert_eq!(dav.get("/new.txt").await.status(), 404);
}

/// Sends `request` as raw bytes (a client library would normalise the path) and answers the
/// status code.
async fn raw_status(app: &TestApp, request: String) -> u16 {
    let address = app.base_url.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    stream.write_all(request.replace("{host}", &address).as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    answer.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or_else(|| panic!("no status: {answer}"))
}

async fn a_path_or_destination_outside_dav_is_refused(app: TestApp) {
    let (_user, dav) = app.dav_user("out@example.com", "outside").await;
    assert_eq!(dav.put("/a.txt", "a").await.status(), 201);
    let basic = {
        let request = reqwest::Client::new().get("http://x/").basic_auth(&dav.username, Some(&dav.password));
        request.build().unwrap().headers()["authorization"].to_str().unwrap().to_owned()
    };
    let status = raw_status(
        &app,
        format!(
            "GET /dav/../api/v1/x HTTP/1.1\r\nHost: {{host}}\r\nAuthorization: {basic}\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    assert_eq!(status, 400, "a path above /dav");

    for method in ["COPY", "MOVE"] {
        let response = dav
            .request(method, "/a.txt")
            .header("Destination", "http://elsewhere.example/dav/b.txt")
            .send()
            .await
            .unwrap();
        assert_eq!(error_body(response, 502).await["code"], "dav.destination_outside", "{method}");
    }
    assert_eq!(dav.get("/b.txt").await.status(), 404, "nothing done locally");
    assert_eq!(dav.get("/a.txt").await.status(), 200);
    // The request's own host (as the client names it) is inside.
    let here = dav.request("COPY", "/a.txt").header("Destination", format!("{}/c.txt", dav.base));
    assert_eq!(here.send().await.unwrap().status(), 201);
}

async fn a_folder_is_not_copied_or_moved_into_itself(app: TestApp) {
    let (_user, dav) = app.dav_user("cycle@example.com", "cycles").await;
    assert_eq!(dav.request("MKCOL", "/a/").send().await.unwrap().status(), 201);
    assert_eq!(dav.put("/a/x.txt", "x").await.status(), 201);
    for (method, code) in [("COPY", "object.copy_cycle"), ("MOVE", "object.move_cycle")] {
        for target in ["/a/b/", "/a/x.txt/c/"] {
            let response =
                dav.request(method, "/a/").header("Destination", format!("{}{target}", dav.base)).send().await.unwrap();
            assert_eq!(error_body(response, 409).await["code"], code, "{method} {target}");
        }
    }
    let (status, _) = dav.propfind("/a/b/", "0").await;
    assert_eq!(status, 404, "no copy inside the source");
    // A file's "descendant" is only a missing parent, as before.
    let response = dav.request("COPY", "/a/x.txt").header("Destination", format!("{}/a/x.txt/y", dav.base));
    assert_eq!(error_body(response.send().await.unwrap(), 409).await["code"], "dav.conflict");
}

/// A request body fed by the test: chunked unless a length is set, ended by dropping the
/// sender.
fn fed_body() -> (mpsc::Sender<Vec<u8>>, reqwest::Body) {
    let (sender, receiver) = mpsc::channel::<Vec<u8>>(4);
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|piece| (Ok::<_, std::io::Error>(piece), receiver))
    });
    (sender, reqwest::Body::wrap_stream(stream))
}

async fn of_two_puts_racing_on_a_new_name_the_second_gets_409(app: TestApp) {
    let (user, dav) = app.dav_user("race@example.com", "race").await;
    // The slow writer declares 2 MB, so its write reserves that much quota as soon as it
    // streams: that is the sign it planned the name as new.
    let size = 2_000_000;
    let (sender, body) = fed_body();
    let slow = tokio::spawn(dav.request("PUT", "/same.bin").header("Content-Length", size).body(body).send());
    sender.send(vec![1; 100_000]).await.unwrap();
    assert_eq!(settled(size as i64, || app.storage_used(&user)).await, size as i64, "the slow write started");

    assert_eq!(dav.put("/same.bin", "quick").await.status(), 201);
    sender.send(vec![1; size - 100_000]).await.unwrap();
    drop(sender);
    let body = error_body(slow.await.unwrap().unwrap(), 409).await;
    assert_eq!(body["code"], "object.name_taken");
    assert_eq!(dav.get("/same.bin").await.text().await.unwrap(), "quick");
    assert_eq!(settled(5, || app.storage_used(&user)).await, 5, "the refused write gave its quota back");
}

async fn a_depth_zero_lock_on_a_folder_guards_its_members(app: TestApp) {
    let (_user, dav) = app.dav_user("member@example.com", "members").await;
    assert_eq!(dav.request("MKCOL", "/f/").send().await.unwrap().status(), 201);
    assert_eq!(dav.put("/f/old.txt", "old").await.status(), 201);
    let locked =
        dav.request("LOCK", "/f/").header("Depth", "0").body(lock_body("exclusive", "me")).send().await.unwrap();
    assert_eq!(locked.status(), 200);
    let token = token_of(&locked);
    let with_token = format!("(<{token}>)");

    // Adding or removing a member needs the folder's token (RFC 4918 7.4).
    assert_eq!(error_body(dav.put("/f/new.txt", "new").await, 423).await["code"], "dav.locked");
    assert_eq!(dav.request("MKCOL", "/f/sub/").send().await.unwrap().status(), 423);
    assert_eq!(dav.request("DELETE", "/f/old.txt").send().await.unwrap().status(), 423);
    let moved_out = dav.request("MOVE", "/f/old.txt").header("Destination", format!("{}/out.txt", dav.base));
    assert_eq!(moved_out.send().await.unwrap().status(), 423);
    let copied_in = dav.request("COPY", "/f/old.txt").header("Destination", format!("{}/f/copy.txt", dav.base));
    assert_eq!(copied_in.send().await.unwrap().status(), 423);
    assert_eq!(dav.get("/f/new.txt").await.status(), 404);
    assert_eq!(dav.get("/f/old.txt").await.status(), 200);

    // A member's content is not guarded by a depth-0 lock on its folder.
    assert_eq!(dav.put("/f/old.txt", "changed").await.status(), 204);
    // With the token, members come and go.
    let put = dav.request("PUT", "/f/new.txt").header("If", &with_token).body("new").send().await.unwrap();
    assert_eq!(put.status(), 201);
    let delete = dav.request("DELETE", "/f/new.txt").header("If", &with_token).send().await.unwrap();
    assert_eq!(delete.status(), 204);
}

async fn a_propfind_without_depth_is_refused_as_infinity(app: TestApp) {
    let (_user, dav) = app.dav_user("depth@example.com", "depth").await;
    assert_eq!(dav.request("MKCOL", "/d/").send().await.unwrap().status(), 201);
    let response = dav.request("PROPFIND", "/d/").send().await.unwrap();
    assert_eq!(response.status(), 403);
    assert!(response.text().await.unwrap().contains("propfind-finite-depth"));
    let (status, _) = dav.propfind("/d/", "1").await;
    assert_eq!(status, 207);
}

async fn get_serves_active_content_as_an_attachment_that_cannot_script(app: TestApp) {
    let (_user, dav) = app.dav_user("html@example.com", "html").await;
    for (name, body) in [("page.html", "<script>alert(1)</script>"), ("image.svg", "<svg onload='alert(1)'/>")] {
        assert_eq!(dav.put(&format!("/{name}"), body).await.status(), 201);
        for method in ["GET", "HEAD"] {
            let response = dav.request(method, &format!("/{name}")).send().await.unwrap();
            assert_eq!(response.status(), 200);
            let headers = response.headers();
            assert_eq!(headers["content-disposition"], "attachment", "{method} {name}");
            assert_eq!(headers["x-content-type-options"], "nosniff");
            assert!(headers["content-security-policy"].to_str().unwrap().contains("default-src 'none'"));
        }
    }
    assert_eq!(dav.put("/plain.txt", "hello").await.status(), 201);
    let plain = dav.get("/plain.txt").await;
    assert!(plain.headers().get("content-disposition").is_none(), "plain text stays inline");
    assert_eq!(plain.headers()["x-content-type-options"], "nosniff");
    assert!(plain.headers().contains_key("content-security-policy"));
}
