//! Image thumbnails (`GET /object/{id}/thumbnail`): made once per content by a THUMBNAIL task,
//! shared by identical files, cached with a strong ETag; bombs and non-images refused for good;
//! drawn on the storage node when the policy is node-backed.

use std::io::Cursor;
use std::time::Duration;

use image::{DynamicImage, ImageFormat, Rgb, RgbImage};
use nubo_tests::cluster::TestNode;
use nubo_tests::files::{PolicyKind, files_below};
use nubo_tests::{Session, TestApp, error_body, on_every_backend, on_every_backend_and_storage};
use reqwest::{Method, Response};
use serde_json::{Value, json};

on_every_backend_and_storage!(an_image_gets_a_thumbnail_that_identical_files_share);
on_every_backend!(
    a_decompression_bomb_is_refused_for_good_and_nothing_is_stored,
    sizes_outside_the_set_folders_and_non_images_are_refused,
    the_sweep_forgets_thumbnails_once_no_file_has_their_content,
    concurrent_first_requests_on_two_masters_queue_one_task,
    a_node_backed_image_is_drawn_on_the_node
);

/// A `width` x `height` PNG with a colour gradient (so it is not trivially compressible).
fn png(width: u32, height: u32) -> Vec<u8> {
    let image = RgbImage::from_fn(width, height, |x, y| Rgb([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8]));
    let mut bytes = Cursor::new(Vec::new());
    DynamicImage::ImageRgb8(image).write_to(&mut bytes, ImageFormat::Png).unwrap();
    bytes.into_inner()
}

async fn thumbnail(app: &TestApp, user: &Session, object: &str, size: u32) -> Response {
    app.request(Method::GET, &format!("/object/{object}/thumbnail?size={size}"))
        .bearer_auth(&user.access)
        .send()
        .await
        .unwrap()
}

/// Asks until the answer is no longer 202 (the task ran), checking each 202 on the way.
async fn settled_thumbnail(app: &TestApp, user: &Session, object: &str, size: u32) -> Response {
    for _ in 0..400 {
        let response = thumbnail(app, user, object, size).await;
        if response.status() != 202 {
            return response;
        }
        assert_eq!(response.headers()["retry-after"], "1");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["status"], "pending");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the thumbnail of {object} was never made");
}

fn dimensions(jpeg: &[u8]) -> (u32, u32) {
    let image = image::load_from_memory_with_format(jpeg, ImageFormat::Jpeg).expect("a JPEG");
    (image.width(), image.height())
}

async fn thumbnail_tasks(app: &TestApp, admin: &Session) -> Vec<Value> {
    let page: Value = app
        .call(Method::GET, "/admin/task?type=THUMBNAIL&limit=100", Some(&admin.access), None)
        .await
        .json()
        .await
        .unwrap();
    page["items"].as_array().unwrap().clone()
}

async fn an_image_gets_a_thumbnail_that_identical_files_share(app: TestApp, kind: PolicyKind) {
    let admin = app.login_admin().await;
    let _policy = app.use_test_policy(&admin, kind, 0).await;
    let alice = app.register("alice@nubo.test", "alice-password-1").await;
    let root = app.root_id(&alice).await;
    let photo = png(600, 300);
    let object = app.upload(&alice, &root, "photo.png", &photo).await;
    let id = object["id"].as_str().unwrap();

    let first = thumbnail(&app, &alice, id, 256).await;
    assert_eq!(first.status(), 202, "the first request queues the thumbnail");
    let ready = settled_thumbnail(&app, &alice, id, 256).await;
    assert_eq!(ready.status(), 200);
    assert_eq!(ready.headers()["content-type"], "image/jpeg");
    assert_eq!(ready.headers()["cache-control"], "private, max-age=31536000, immutable");
    let etag = ready.headers()["etag"].to_str().unwrap().to_owned();
    assert!(etag.starts_with('"') && !etag.starts_with("W/"), "a strong ETag: {etag}");
    assert_eq!(dimensions(&ready.bytes().await.unwrap()), (256, 128), "the longest side fits, the shape stays");

    let again = app
        .request(Method::GET, &format!("/object/{id}/thumbnail?size=256"))
        .bearer_auth(&alice.access)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);

    let large = settled_thumbnail(&app, &alice, id, 1024).await;
    assert_eq!(large.status(), 200);
    assert_ne!(large.headers()["etag"].to_str().unwrap(), etag, "each side has its own ETag");
    assert_eq!(dimensions(&large.bytes().await.unwrap()), (600, 300), "a smaller image is not blown up");

    // Bob uploads the same bytes under another name: the thumbnail is there already.
    let bob = app.register("bob@nubo.test", "bob-password-12").await;
    let bob_root = app.root_id(&bob).await;
    let copy = app.upload(&bob, &bob_root, "same.PNG", &photo).await;
    let shared = thumbnail(&app, &bob, copy["id"].as_str().unwrap(), 256).await;
    assert_eq!(shared.status(), 200, "identical content shares the thumbnail without a new task");
    assert_eq!(shared.headers()["etag"].to_str().unwrap(), etag);
    let tasks = thumbnail_tasks(&app, &admin).await;
    assert_eq!(tasks.len(), 2, "one task per content and side: {tasks:?}");
    assert!(tasks.iter().all(|task| task["status"] == "completed"), "{tasks:?}");
    let hash = blake3::hash(&photo).to_hex().to_string();
    let rows = nubo_model::db::thumbnails::count_for(app.context().db(), &hash).await.unwrap();
    assert_eq!(rows, 2, "one stored thumbnail per side for both files");
}

async fn a_decompression_bomb_is_refused_for_good_and_nothing_is_stored(app: TestApp) {
    let admin = app.login_admin().await;
    let policy = app.use_small_chunks(&admin, 0).await;
    let user = app.register("carol@nubo.test", "carol-password-1").await;
    let root = app.root_id(&user).await;
    let bomb = nubo_common::thumbnail::declared_only_png(100_000, 100_000);
    assert!(bomb.len() < 100, "a tiny file claiming ten gigapixels");
    let object = app.upload(&user, &root, "bomb.png", &bomb).await;
    let id = object["id"].as_str().unwrap();
    let blobs_before =
        nubo_model::db::blobs::count_for_policy(app.context().db(), policy.parse().unwrap()).await.unwrap();

    let refused = settled_thumbnail(&app, &user, id, 1024).await;
    let body = error_body(refused, 422).await;
    assert_eq!(body["code"], "thumbnail.too_many_pixels");
    // Asked again: the same answer at once, from the record, without another task.
    let body = error_body(thumbnail(&app, &user, id, 1024).await, 422).await;
    assert_eq!(body["code"], "thumbnail.too_many_pixels");
    let tasks = thumbnail_tasks(&app, &admin).await;
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0]["status"], "completed", "the refusal is an answer, not a failing task");
    assert_eq!(tasks[0]["progress"]["bytes_done"], bomb.len(), "only the file itself was read");

    let hash = blake3::hash(&bomb).to_hex().to_string();
    let found = nubo_model::db::thumbnails::find(app.context().db(), &hash, 1024).await.unwrap().unwrap();
    assert_eq!((found.state.as_str(), found.image.is_none()), ("failed", true), "no image stored");
    let blobs_after =
        nubo_model::db::blobs::count_for_policy(app.context().db(), policy.parse().unwrap()).await.unwrap();
    assert_eq!(blobs_after, blobs_before, "nothing stored in the policy");
}

async fn sizes_outside_the_set_folders_and_non_images_are_refused(app: TestApp) {
    let user = app.register("dave@nubo.test", "dave-password-12").await;
    let root = app.root_id(&user).await;
    let photo = app.upload(&user, &root, "photo.jpg", &png(32, 32)).await;
    let photo = photo["id"].as_str().unwrap();
    for size in [0, 300, 4096] {
        let body = error_body(thumbnail(&app, &user, photo, size).await, 422).await;
        assert_eq!(body["code"], "thumbnail.size_unsupported", "size {size}");
    }
    // The bytes are a PNG though the name says JPEG: the decoder goes by the bytes.
    assert_eq!(settled_thumbnail(&app, &user, photo, 256).await.status(), 200);

    let notes = app.upload(&user, &root, "notes.txt", b"hello").await;
    let body = error_body(thumbnail(&app, &user, notes["id"].as_str().unwrap(), 256).await, 422).await;
    assert_eq!(body["code"], "thumbnail.not_image", "refused by name, before any task");
    let folder = app.mkdir(&user, &root, "pictures.png").await;
    let body = error_body(thumbnail(&app, &user, &folder, 256).await, 422).await;
    assert_eq!(body["code"], "thumbnail.not_image");
    let fake = app.upload(&user, &root, "fake.png", b"this is text, not a PNG").await;
    let body = error_body(settled_thumbnail(&app, &user, fake["id"].as_str().unwrap(), 256).await, 422).await;
    assert_eq!(body["code"], "thumbnail.not_image", "refused by content, after the task looked");

    let eve = app.register("eve@nubo.test", "eve-password-123").await;
    let body = error_body(thumbnail(&app, &eve, photo, 256).await, 404).await;
    assert_eq!(body["code"], "object.not_found", "another user's file is not there for eve");
    let anonymous = app.request(Method::GET, &format!("/object/{photo}/thumbnail")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
}

async fn a_node_backed_image_is_drawn_on_the_node(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    app.use_node_policy(&admin, &node, true).await;
    let user = app.register("frank@nubo.test", "frank-password-1").await;
    let root = app.root_id(&user).await;
    let photo = png(2000, 1000);
    let (_, last) = app.upload_direct(&user, &root, "wide.png", &photo).await;
    assert_eq!(last.status(), 200, "direct upload completes");
    let object: Value = last.json().await.unwrap();
    let id = object["object"]["id"].as_str().unwrap();
    assert_eq!(node.blobs().len(), 1);

    let ready = settled_thumbnail(&app, &user, id, 256).await;
    assert_eq!(ready.status(), 200);
    assert_eq!(dimensions(&ready.bytes().await.unwrap()), (256, 128));
    let tasks = thumbnail_tasks(&app, &admin).await;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0]["progress"]["bytes_done"], 0, "the image's bytes never came to the master: {}", tasks[0]);
    assert_eq!(node.blobs().len(), 1, "the node stored nothing new");
    assert!(files_below(&app.config.data_dir.join("uploads")).is_empty(), "nor did the master's disk");
}

async fn the_sweep_forgets_thumbnails_once_no_file_has_their_content(app: TestApp) {
    let user = app.register("grace@nubo.test", "grace-password-1").await;
    let root = app.root_id(&user).await;
    let (kept, gone) = (png(64, 48), png(48, 64));
    let kept_id = app.upload(&user, &root, "kept.png", &kept).await["id"].as_str().unwrap().to_owned();
    let gone_id = app.upload(&user, &root, "gone.png", &gone).await["id"].as_str().unwrap().to_owned();
    for id in [&kept_id, &gone_id] {
        assert_eq!(settled_thumbnail(&app, &user, id, 256).await.status(), 200);
    }
    let ids = json!({"ids": [gone_id]});
    assert!(app.call(Method::DELETE, "/object", Some(&user.access), Some(ids.clone())).await.status().is_success());
    let purged = app.call(Method::DELETE, "/trash", Some(&user.access), Some(ids)).await;
    assert!(purged.status().is_success(), "{}", purged.status());

    let now = nubo_model::domain::time::now_ms();
    let swept = nubo_service::content::thumbnails::sweep(app.context(), now).await.unwrap();
    assert_eq!(swept, 1, "only the purged file's thumbnail goes");
    let db = app.context().db();
    let (gone_hash, kept_hash) = (blake3::hash(&gone).to_hex().to_string(), blake3::hash(&kept).to_hex().to_string());
    assert_eq!(nubo_model::db::thumbnails::count_for(db, &gone_hash).await.unwrap(), 0);
    assert_eq!(nubo_model::db::thumbnails::count_for(db, &kept_hash).await.unwrap(), 1);
    assert_eq!(thumbnail(&app, &user, &kept_id, 256).await.status(), 200, "the kept one is still served");
}

async fn concurrent_first_requests_on_two_masters_queue_one_task(app: TestApp) {
    let admin = app.login_admin().await;
    let user = app.register("heidi@nubo.test", "heidi-password-1").await;
    let root = app.root_id(&user).await;
    let object = app.upload(&user, &root, "crowd.webp", &png(400, 400)).await;
    let id = object["id"].as_str().unwrap().to_owned();
    // A replica on the same database (PostgreSQL: the masters share it as they would in production).
    let peer = (app.backend == nubo_tests::Backend::Postgres).then_some(app.spawn_peer().await);
    let bases: Vec<String> =
        std::iter::once(app.base_url.clone()).chain(peer.iter().map(|p| format!("http://{}", p.addr))).collect();
    let requests = (0..12).map(|n| {
        let url = format!("{}/api/v1/object/{id}/thumbnail?size=1024", bases[n % bases.len()]);
        app.client.get(url).bearer_auth(&user.access).send()
    });
    for answer in futures_util::future::join_all(requests).await {
        let status = answer.unwrap().status();
        assert!(status == 202 || status == 200, "{status}");
    }
    assert_eq!(settled_thumbnail(&app, &user, &id, 1024).await.status(), 200, "a WebP-named PNG is drawn too");
    let tasks = thumbnail_tasks(&app, &admin).await;
    assert_eq!(tasks.len(), 1, "twelve first requests, one task: {tasks:?}");
    if let Some(peer) = peer {
        peer.shutdown(Duration::from_secs(10)).await.unwrap();
    }
}
