//! Avatars over HTTP: uploads re-encoded as square PNGs of at most 256 px without the upload's
//! metadata, served publicly with an ETag (304 on `If-None-Match`) in several sizes; non-images,
//! oversized bodies and decompression bombs refused; the public avatar service by redirect;
//! reset. And `trusted_proxies`: `X-Forwarded-For` moves a client to its own rate-limit bucket
//! only when the peer is a trusted proxy.

use std::io::Cursor;

use image::{DynamicImage, ImageBuffer, ImageFormat, Rgb, RgbImage};
use nubo_tests::{Backend, Session, TestApp, error_body, login_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

on_every_backend!(
    uploads_are_served_as_square_pngs_with_etags_to_anyone,
    what_is_not_a_small_image_is_refused,
    the_avatar_service_redirects_and_reset_removes_the_avatar
);

fn encoded(image: DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut bytes = Cursor::new(Vec::new());
    image.write_to(&mut bytes, format).unwrap();
    bytes.into_inner()
}

/// A 600x400 photo-like JPEG: left half red, right half blue.
fn wide_jpeg() -> Vec<u8> {
    let image: RgbImage =
        ImageBuffer::from_fn(600, 400, |x, _| if x < 300 { Rgb([220, 20, 20]) } else { Rgb([20, 20, 220]) });
    encoded(DynamicImage::ImageRgb8(image), ImageFormat::Jpeg)
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = (data.len() as u32).to_be_bytes().to_vec();
    let mut body = kind.to_vec();
    body.extend_from_slice(data);
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc32(&body).to_be_bytes());
    out
}

/// A PNG with a `tEXt` chunk right after its header, as cameras and editors leave metadata.
fn png_with_text(width: u32, height: u32, text: &str) -> Vec<u8> {
    let png = encoded(DynamicImage::new_rgba8(width, height), ImageFormat::Png);
    let after_header = 8 + 8 + 13 + 4;
    let mut out = png[..after_header].to_vec();
    out.extend(chunk(b"tEXt", format!("Comment\0{text}").as_bytes()));
    out.extend_from_slice(&png[after_header..]);
    out
}

/// A tiny PNG whose header claims 100000 x 100000 pixels (40 GB decoded).
fn bomb_png() -> Vec<u8> {
    let mut header = Vec::new();
    header.extend_from_slice(&100_000u32.to_be_bytes());
    header.extend_from_slice(&100_000u32.to_be_bytes());
    header.extend_from_slice(&[8, 6, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend(chunk(b"IHDR", &header));
    out.extend(chunk(b"IDAT", &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]));
    out.extend(chunk(b"IEND", &[]));
    out
}

async fn upload(app: &TestApp, session: &Session, body: Vec<u8>, content_type: &str) -> reqwest::Response {
    app.request(Method::PUT, "/user/settings/avatar")
        .bearer_auth(&session.access)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap()
}

/// An upload over the limit: answered 413 `user.avatar_too_large`, or cut off while the client
/// was still sending (the master closes the connection as soon as it has answered).
async fn refused_as_too_large(outcome: reqwest::Result<reqwest::Response>) {
    match outcome {
        Ok(response) => assert_eq!(error_body(response, 413).await["code"], "user.avatar_too_large"),
        Err(error) => assert!(error.is_request() || error.is_body(), "{error}"),
    }
}

async fn me(app: &TestApp, session: &Session) -> Value {
    app.call(Method::GET, "/user/me", Some(&session.access), None).await.json().await.unwrap()
}

/// Fetches an avatar anonymously; answers the response.
async fn avatar(app: &TestApp, user_id: &str, size: &str, etag: Option<&str>) -> reqwest::Response {
    let mut request = app.request(Method::GET, &format!("/user/avatar/{user_id}/{size}"));
    if let Some(etag) = etag {
        request = request.header("if-none-match", etag);
    }
    request.send().await.unwrap()
}

async fn square_png(response: reqwest::Response) -> (u32, Vec<u8>) {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "image/png");
    let bytes = response.bytes().await.unwrap().to_vec();
    let image = image::load_from_memory_with_format(&bytes, ImageFormat::Png).expect("a PNG");
    assert_eq!(image.width(), image.height(), "square");
    (image.width(), bytes)
}

async fn uploads_are_served_as_square_pngs_with_etags_to_anyone(app: TestApp) {
    let alice = app.register("alice@example.com", "alice-password").await;
    assert_eq!(me(&app, &alice).await["avatar_url"], Value::Null, "no avatar yet");
    assert_eq!(avatar(&app, &alice.user_id, "l", None).await.status(), 404);

    let response = upload(&app, &alice, wide_jpeg(), "image/jpeg").await;
    assert_eq!(response.status(), 204, "{}", response.text().await.unwrap());
    let url = me(&app, &alice).await["avatar_url"].as_str().expect("avatar_url once uploaded").to_owned();
    assert!(url.starts_with(&format!("/api/v1/user/avatar/{}/l", alice.user_id)), "{url}");

    // Anyone, signed in or not, fetches it by id.
    let response = app.client.get(format!("{}{url}", app.base_url)).send().await.unwrap();
    let etag = response.headers()["etag"].to_str().unwrap().to_owned();
    let cache = response.headers()["cache-control"].to_str().unwrap().to_owned();
    assert!(cache.contains("public") && cache.contains("max-age"), "{cache}");
    let (side, bytes) = square_png(response).await;
    assert_eq!(side, 256, "a 400 px tall upload becomes the 256 px square");
    let image = image::load_from_memory(&bytes).unwrap().to_rgb8();
    // The centre square of the 600 px wide upload spans x 100..500: half red, half blue.
    let (left, right) = (image.get_pixel(10, 128), image.get_pixel(245, 128));
    assert!(left[0] > 180 && left[2] < 60 && right[2] > 180 && right[0] < 60, "{left:?} {right:?}");

    let again = avatar(&app, &alice.user_id, "l", Some(&etag)).await;
    assert_eq!(again.status(), 304);
    assert_eq!(again.headers()["etag"], etag.as_str());
    let (side, _) = square_png(avatar(&app, &alice.user_id, "s", None).await).await;
    assert_eq!(side, 64);
    let (side, _) = square_png(avatar(&app, &alice.user_id, "100", None).await).await;
    assert_eq!(side, 100);
    let small_etag = avatar(&app, &alice.user_id, "s", None).await.headers()["etag"].to_str().unwrap().to_owned();
    assert_ne!(small_etag, etag, "each size has its own ETag");
    assert_eq!(avatar(&app, &alice.user_id, "s", Some(&etag)).await.status(), 200);
    for bad in ["0", "257", "huge"] {
        let response = avatar(&app, &alice.user_id, bad, None).await;
        assert_eq!(error_body(response, 400).await["code"], "request.invalid_path", "{bad}");
    }

    // A PNG's metadata does not survive; a new upload changes the ETag and the URL.
    let response = upload(&app, &alice, png_with_text(80, 120, "secret-location-52.1N"), "image/png").await;
    assert_eq!(response.status(), 204);
    let new_url = me(&app, &alice).await["avatar_url"].as_str().unwrap().to_owned();
    assert_ne!(new_url, url, "a changed avatar is a new URL");
    let response = avatar(&app, &alice.user_id, "l", Some(&etag)).await;
    assert_ne!(response.headers()["etag"], etag.as_str());
    let (side, bytes) = square_png(response).await;
    assert_eq!(side, 80, "small uploads are not enlarged");
    assert!(!bytes.windows(15).any(|w| w == b"secret-location"), "metadata stripped");

    // Another user sees it too.
    let bob = app.register("bob@example.com", "bob-password").await;
    let response = app
        .request(Method::GET, &format!("/user/avatar/{}/m", alice.user_id))
        .bearer_auth(&bob.access)
        .send()
        .await
        .unwrap();
    assert_eq!(square_png(response).await.0, 80);
}

async fn what_is_not_a_small_image_is_refused(app: TestApp) {
    let carol = app.register("carol@example.com", "carol-password").await;
    let response = upload(&app, &carol, b"just some text, not an image".to_vec(), "text/plain").await;
    assert_eq!(error_body(response, 415).await["code"], "user.avatar_not_image");
    let response = upload(&app, &carol, b"\x89PNG\r\n\x1a\ntruncated".to_vec(), "image/png").await;
    assert_eq!(error_body(response, 415).await["code"], "user.avatar_not_image");

    let response = upload(&app, &carol, bomb_png(), "image/png").await;
    assert_eq!(error_body(response, 422).await["code"], "user.avatar_too_many_pixels");

    // Over 2 MiB: with a declared length, and streamed without one. The master answers 413 as
    // soon as it knows (from the declared length, or once the limit is passed) and closes the
    // connection while the client may still be sending: the client then reads the 413, or sees
    // the connection reset, depending on which packet arrives first.
    let big = vec![0u8; 2 * 1024 * 1024 + 1];
    let declared = app
        .request(Method::PUT, "/user/settings/avatar")
        .bearer_auth(&carol.access)
        .header("content-type", "image/png")
        .body(big)
        .send()
        .await;
    refused_as_too_large(declared).await;
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = (0..40).map(|_| Ok(vec![0u8; 64 * 1024])).collect();
    let streamed = app
        .request(Method::PUT, "/user/settings/avatar")
        .bearer_auth(&carol.access)
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)))
        .send()
        .await;
    refused_as_too_large(streamed).await;

    // On connections of their own: the pooled ones may be the refused uploads' that the master
    // is closing.
    let fresh = reqwest::Client::new();
    let user = fresh.get(app.api("/user/me")).bearer_auth(&carol.access).send().await.expect("request sent");
    let user: Value = user.json().await.unwrap();
    assert_eq!(user["avatar_url"], Value::Null, "nothing refused was stored");
    let anonymous = fresh.put(app.api("/user/settings/avatar")).body(wide_jpeg()).send().await.unwrap();
    assert_eq!(error_body(anonymous, 401).await["code"], "auth.missing_token");
}

async fn the_avatar_service_redirects_and_reset_removes_the_avatar(app: TestApp) {
    let dave = app.register("Dave@Example.com", "dave-password").await;
    assert_eq!(upload(&app, &dave, wide_jpeg(), "image/jpeg").await.status(), 204);
    let body = json!({"source": "gravatar"});
    let response = app.call(Method::POST, "/user/settings/avatar", Some(&dave.access), Some(body)).await;
    assert_eq!(response.status(), 204);
    let response = avatar(&app, &dave.user_id, "m", None).await;
    assert_eq!(response.status(), 302);
    let hash: String = Sha256::digest(b"dave@example.com").iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        response.headers()["location"],
        format!("https://www.gravatar.com/avatar/{hash}?s=128&d=identicon").as_str()
    );
    assert!(me(&app, &dave).await["avatar_url"].is_string());
    let unknown = json!({"source": "myspace"});
    let response = app.call(Method::POST, "/user/settings/avatar", Some(&dave.access), Some(unknown)).await;
    assert_eq!(error_body(response, 422).await["code"], "request.invalid_body");

    let response = app.call(Method::DELETE, "/user/settings/avatar", Some(&dave.access), None).await;
    assert_eq!(response.status(), 204);
    let response = avatar(&app, &dave.user_id, "m", None).await;
    assert_eq!(error_body(response, 404).await["code"], "user.avatar_not_found");
    assert_eq!(me(&app, &dave).await["avatar_url"], Value::Null);
    let nobody = avatar(&app, "00000000-0000-4000-8000-000000000001", "l", None).await;
    assert_eq!(error_body(nobody, 404).await["code"], "user.avatar_not_found");
}

/// Signs in with a wrong password as if from `forwarded`; answers the status.
async fn attempt_from(app: &TestApp, forwarded: &str) -> u16 {
    let body = login_body(&format!("{}@example.com", uuid::Uuid::new_v4().simple()), "wrong-password");
    let request = app.request(Method::POST, "/user/session").header("x-forwarded-for", forwarded).json(&body);
    request.send().await.unwrap().status().as_u16()
}

async fn spawn_limited(backend: Backend, trusted: &str) -> Option<TestApp> {
    TestApp::spawn_configured(backend, |config| {
        config.login_attempts_per_address = 3;
        config.trusted_proxies = serde_json::from_value(json!(trusted)).unwrap();
    })
    .await
}

async fn forwarded_for_is_ignored_unless_the_peer_is_trusted(backend: Backend) {
    let Some(app) = spawn_limited(backend, "").await else { return };
    for _ in 0..3 {
        assert_eq!(attempt_from(&app, "198.51.100.1").await, 401);
    }
    // Another "forwarded" client is the same peer: refused too.
    assert_eq!(attempt_from(&app, "198.51.100.2").await, 429);
    assert_eq!(attempt_from(&app, "198.51.100.3, 203.0.113.7").await, 429);
}

async fn trusted_proxies_give_forwarded_clients_their_own_buckets(backend: Backend) {
    let Some(app) = spawn_limited(backend, "127.0.0.1/32").await else { return };
    for _ in 0..3 {
        assert_eq!(attempt_from(&app, "198.51.100.1").await, 401);
    }
    assert_eq!(attempt_from(&app, "198.51.100.1").await, 429);
    assert_eq!(attempt_from(&app, "198.51.100.2").await, 401, "another client behind the proxy");
    // The right-most untrusted address counts: a made-up left part does not escape the bucket.
    assert_eq!(attempt_from(&app, "10.9.9.9, 198.51.100.1").await, 429);
}

mod trusted_proxies {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn untrusted_sqlite() {
        forwarded_for_is_ignored_unless_the_peer_is_trusted(Backend::Sqlite).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn untrusted_postgres() {
        forwarded_for_is_ignored_unless_the_peer_is_trusted(Backend::Postgres).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn trusted_sqlite() {
        trusted_proxies_give_forwarded_clients_their_own_buckets(Backend::Sqlite).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn trusted_postgres() {
        trusted_proxies_give_forwarded_clients_their_own_buckets(Backend::Postgres).await
    }
}

/// The peak resident memory of this process since the last reset, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Starts a new peak: the kernel sets VmHWM back to the current resident size.
fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

/// Eight uploads at once of what a decompression bomb within the byte limit looks like (a
/// 126 KB PNG of 5700x5700), then of the largest square the decode budget admits: each is
/// refused cleanly or stored, and the process's memory (the master runs in it) grows by less
/// than 300 MiB for either burst. Run it alone for a clean figure: other tests in the process
/// count too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_worst_case_avatars_stay_within_300_mib() {
    let Some(app) = TestApp::spawn(Backend::Sqlite).await else { return };
    let mut users = Vec::new();
    for n in 0..8 {
        users.push(app.register(&format!("avatar{n}@example.com"), "avatar-password").await);
    }
    let bomb =
        encoded(DynamicImage::ImageRgb8(ImageBuffer::from_pixel(5700, 5700, Rgb([200, 120, 40]))), ImageFormat::Png);
    assert!(bomb.len() < 2 * 1024 * 1024, "within the byte limit: {} bytes", bomb.len());
    let largest = encoded(DynamicImage::new_rgba8(3500, 3500), ImageFormat::Png);
    const BOUND: u64 = 300 * 1024 * 1024;

    for (name, image) in [("5700x5700 PNG", &bomb), ("3500x3500 RGBA PNG", &largest)] {
        let before = {
            reset_peak_rss();
            peak_rss()
        };
        let uploads = users.iter().map(|user| upload(&app, user, image.clone(), "image/png"));
        let answers = futures_util::future::join_all(uploads).await;
        let growth = peak_rss().saturating_sub(before);
        eprintln!("8 concurrent avatars of a {name}: peak RSS grew by {} MiB", growth / (1024 * 1024));
        for answer in answers {
            match answer.status().as_u16() {
                204 | 200 => {}
                422 => assert_eq!(error_body(answer, 422).await["code"], "user.avatar_too_many_pixels"),
                other => panic!("an upload of a {name} answered {other}"),
            }
        }
        assert!(growth < BOUND, "8 concurrent avatars of a {name} took {} MiB", growth / (1024 * 1024));
    }
    // The largest admitted square was stored, scaled to 256 px.
    let stored = app.get(&format!("/user/avatar/{}/l", users[0].user_id)).await;
    assert_eq!(stored.status(), 200);
}
