//! Media URLs (`POST /file/media/{id}`, `POST /share/{code}/media/{object_id}`): reusable for
//! every ranged read a player makes, bound to one user or share, ended by a ban, a share's
//! change or new content; and what share visitors preview (thumbnails).

use std::io::Cursor;
use std::time::Duration;

use image::{DynamicImage, ImageFormat, Rgb, RgbImage};
use nubo_tests::files::{PolicyKind, content};
use nubo_tests::{Session, TestApp, error_body, on_every_backend, on_every_backend_and_storage};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend_and_storage!(a_media_url_serves_every_range_until_its_file_changes);
on_every_backend!(
    a_ban_or_the_trash_ends_a_media_url_and_it_is_for_its_user_alone,
    share_visitors_preview_what_the_share_allows
);

async fn media_url(app: &TestApp, user: &Session, id: &str) -> String {
    let response = app.call(Method::POST, &format!("/file/media/{id}"), Some(&user.access), None).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert!(body["expires"].is_string());
    format!("{}{}", app.base_url, body["url"].as_str().unwrap())
}

async fn ranged(app: &TestApp, url: &str, first: usize, last: usize) -> reqwest::Response {
    app.client.get(url).header("range", format!("bytes={first}-{last}")).send().await.unwrap()
}

async fn a_media_url_serves_every_range_until_its_file_changes(app: TestApp, kind: PolicyKind) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, kind, 0).await;
    let user = app.register("mira@example.com", "mira-password").await;
    let root = app.root_id(&user).await;
    let bytes = content(policy.chunk + 5000, 3);
    let object = app.upload(&user, &root, "clip.mp4", &bytes).await;
    let id = object["id"].as_str().unwrap();
    let url = media_url(&app, &user, id).await;

    // A player seeks: the middle, the start, the end, the middle again, all with one URL.
    let middle = bytes.len() / 2;
    for (first, last) in [(middle, middle + 999), (0, 1), (bytes.len() - 10, bytes.len() - 1), (middle, middle + 999)] {
        let response = ranged(&app, &url, first, last).await;
        assert_eq!(response.status(), 206, "bytes {first}-{last}");
        assert_eq!(response.headers()["content-range"], format!("bytes {first}-{last}/{}", bytes.len()).as_str());
        assert_eq!(response.headers()["content-type"], "video/mp4");
        assert_eq!(response.bytes().await.unwrap().as_ref(), &bytes[first..=last]);
    }
    assert_eq!(app.client.head(&url).send().await.unwrap().status(), 200);
    let whole = app.client.get(&url).send().await.unwrap();
    assert_eq!(whole.bytes().await.unwrap().as_ref(), bytes.as_slice());

    // The download token beside it stays single-use.
    let download = app.download_url(&user, id).await;
    assert_eq!(app.client.get(&download).send().await.unwrap().status(), 200);
    let again = app.client.get(&download).send().await.unwrap();
    assert_eq!(error_body(again, 409).await["code"], "download.token_used");

    // New content ends the URL; a new one serves the new bytes.
    let replaced =
        app.request(Method::PATCH, &format!("/file/content?id={id}")).bearer_auth(&user.access).body("new").send();
    assert_eq!(replaced.await.unwrap().status(), 200);
    let stale = ranged(&app, &url, 0, 1).await;
    assert_eq!(error_body(stale, 410).await["code"], "media.content_changed");
    let fresh = media_url(&app, &user, id).await;
    assert_eq!(ranged(&app, &fresh, 1, 2).await.bytes().await.unwrap().as_ref(), b"ew");
}

async fn a_ban_or_the_trash_ends_a_media_url_and_it_is_for_its_user_alone(app: TestApp) {
    let admin = app.login_admin().await;
    let user = app.register("nils@example.com", "nils-password").await;
    let other = app.register("olga@example.com", "olga-password").await;
    let root = app.root_id(&user).await;
    let song = app.upload(&user, &root, "song.mp3", &content(4096, 5)).await;
    let id = song["id"].as_str().unwrap();

    let response = app.call(Method::POST, &format!("/file/media/{id}"), Some(&other.access), None).await;
    assert_eq!(error_body(response, 404).await["code"], "object.not_found", "another user's file");
    let folder = app.mkdir(&user, &root, "album").await;
    let response = app.call(Method::POST, &format!("/file/media/{folder}"), Some(&user.access), None).await;
    assert_eq!(error_body(response, 409).await["code"], "object.not_a_file");
    let forged = format!("{}/api/v1/file/media/not.a.token", app.base_url);
    assert_eq!(app.client.get(&forged).send().await.unwrap().status(), 401);
    // A download token is not a media URL.
    let download = app.download_url(&user, id).await;
    let as_media = download.replace("/file/download/", "/file/media/");
    assert_eq!(app.client.get(&as_media).send().await.unwrap().status(), 401);

    let url = media_url(&app, &user, id).await;
    let trashed = app.call(Method::DELETE, "/object", Some(&user.access), Some(json!({"ids": [id]}))).await;
    assert!(trashed.status().is_success(), "{}", trashed.status());
    assert_eq!(error_body(ranged(&app, &url, 0, 9).await, 404).await["code"], "object.not_found");
    let restored = app.call(Method::PATCH, "/trash/restore", Some(&user.access), Some(json!({"ids": [id]}))).await;
    assert!(restored.status().is_success(), "{}", restored.status());
    assert_eq!(ranged(&app, &url, 0, 9).await.status(), 206, "restored, the URL works again");

    let path = format!("/admin/user/{}", user.user_id);
    let banned = app.call(Method::PATCH, &path, Some(&admin.access), Some(json!({"status": "BANNED"}))).await;
    assert_eq!(banned.status(), 200);
    assert_eq!(error_body(ranged(&app, &url, 0, 9).await, 401).await["code"], "auth.token_revoked");
}

async fn share_thumbnail(app: &TestApp, code: &str, id: &str) -> reqwest::Response {
    app.request(Method::GET, &format!("/share/{code}/thumbnail/{id}?size=256")).send().await.unwrap()
}

/// A `side` x `side` PNG with a gradient.
fn png(side: u32) -> Vec<u8> {
    let image = RgbImage::from_fn(side, side, |x, y| Rgb([(x % 256) as u8, (y % 256) as u8, 90]));
    let mut bytes = Cursor::new(Vec::new());
    DynamicImage::ImageRgb8(image).write_to(&mut bytes, ImageFormat::Png).unwrap();
    bytes.into_inner()
}

async fn share_visitors_preview_what_the_share_allows(app: TestApp) {
    let owner = app.register("pia@example.com", "pia-password").await;
    let root = app.root_id(&owner).await;
    let folder = app.mkdir(&owner, &root, "holiday").await;
    let photo = app.upload(&owner, &folder, "beach.png", &png(300)).await;
    let photo = photo["id"].as_str().unwrap().to_owned();
    let video = app.upload(&owner, &folder, "waves.webm", &content(6000, 9)).await;
    let video = video["id"].as_str().unwrap().to_owned();
    let outside = app.upload(&owner, &root, "private.png", &png(64)).await;
    let outside = outside["id"].as_str().unwrap().to_owned();
    let created = app.call(Method::POST, "/share", Some(&owner.access), Some(json!({"object_id": folder}))).await;
    assert_eq!(created.status(), 201);
    let code = created.json::<Value>().await.unwrap()["code"].as_str().unwrap().to_owned();

    // A visitor, with no account, sees the photo's thumbnail once it is made.
    let mut made = None;
    for _ in 0..400 {
        let response = share_thumbnail(&app, &code, &photo).await;
        if response.status() != 202 {
            made = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let made = made.expect("the thumbnail was made");
    assert_eq!(made.status(), 200);
    assert_eq!(made.headers()["content-type"], "image/jpeg");
    let jpeg = made.bytes().await.unwrap();
    let drawn = image::load_from_memory_with_format(&jpeg, ImageFormat::Jpeg).unwrap();
    assert_eq!((drawn.width(), drawn.height()), (256, 256));
    let response = share_thumbnail(&app, &code, &outside).await;
    assert_eq!(error_body(response, 404).await["code"], "object.not_found", "a file outside the share");

    // Its media URL serves ranges, and making it counts one download, however many ranges follow.
    let response = app.call(Method::POST, &format!("/share/{code}/media/{video}"), None, None).await;
    assert_eq!(response.status(), 200);
    let url = format!("{}{}", app.base_url, response.json::<Value>().await.unwrap()["url"].as_str().unwrap());
    for _ in 0..3 {
        assert_eq!(ranged(&app, &url, 100, 199).await.status(), 206);
    }
    let listed: Value = app
        .call(Method::GET, &format!("/share?object_id={folder}"), Some(&owner.access), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["count"], 1);
    assert_eq!(listed["items"][0]["downloads"], 1, "{listed}");

    // Previews turned off: thumbnails and the media URL are refused; downloading is not.
    let path = format!("/share/{code}");
    let off = app.call(Method::PATCH, &path, Some(&owner.access), Some(json!({"allow_preview": false}))).await;
    assert_eq!(off.status(), 200);
    let response = share_thumbnail(&app, &code, &photo).await;
    assert_eq!(error_body(response, 403).await["code"], "share.preview_not_allowed");
    assert_eq!(error_body(ranged(&app, &url, 0, 9).await, 403).await["code"], "share.preview_not_allowed");
    let response = app.call(Method::POST, &format!("/share/{code}/media/{video}"), None, None).await;
    assert_eq!(error_body(response, 403).await["code"], "share.preview_not_allowed");
    let response = app.call(Method::POST, &format!("/share/{code}/download/{video}"), None, None).await;
    assert_eq!(response.status(), 200, "downloads are still allowed");

    // Deleting the share ends its media URLs.
    let on = app.call(Method::PATCH, &path, Some(&owner.access), Some(json!({"allow_preview": true}))).await;
    assert_eq!(on.status(), 200);
    assert_eq!(ranged(&app, &url, 0, 9).await.status(), 206);
    assert_eq!(app.call(Method::DELETE, &format!("/share/{code}"), Some(&owner.access), None).await.status(), 204);
    assert_eq!(error_body(ranged(&app, &url, 0, 9).await, 404).await["code"], "share.not_found");
}
