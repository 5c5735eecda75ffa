//! The storage-node registry: adding a real `nubo-slave` (in process, on port 0) and checking
//! it with a signed ping; wrong keys and unreachable nodes.

use nubo_tests::{TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(a_registered_node_answers_a_signed_ping, wrong_keys_and_dead_nodes_are_reported);

const NODE_KEY: &str = "node-key-node-key-node-key-node-key!!";

/// Starts a storage node with `node_id` and `key`; answers its base URL and its stop switch.
async fn start_node(node_id: &str, key: &str) -> (String, tokio::sync::oneshot::Sender<()>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = nubo_slave::config::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_owned(),
        node_id: Some(node_id.to_owned()),
        node_key: Some(nubo_common::secret::Secret::new(key)),
        ..nubo_slave::config::Config::default()
    };
    let node = nubo_slave::server::Node::new(config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(node.serve(listener, async move {
        let _ = stopped.await;
    }));
    (url, stop, dir)
}

async fn register(app: &TestApp, admin: &nubo_tests::Session, url: &str, key: &str) -> Value {
    let body = json!({"name": format!("node-{}", uuid::Uuid::new_v4().simple()), "base_url": url, "key": key});
    let response = app.call(Method::POST, "/admin/node", Some(&admin.access), Some(body)).await;
    assert_eq!(response.status(), 201);
    response.json().await.unwrap()
}

async fn a_registered_node_answers_a_signed_ping(app: TestApp) {
    let admin = app.login_admin().await;
    // The node must know the id the master gives it, so register first, then start it.
    let placeholder = register(&app, &admin, "http://127.0.0.1:9", NODE_KEY).await;
    let id = placeholder["id"].as_str().unwrap().to_owned();
    assert!(
        placeholder.get("key").is_none() && !placeholder.to_string().contains(NODE_KEY),
        "the key is never returned"
    );
    let (url, stop, _dir) = start_node(&id, NODE_KEY).await;
    let update = json!({"name": placeholder["name"], "base_url": url, "enabled": true});
    let response = app.call(Method::PUT, &format!("/admin/node/{id}"), Some(&admin.access), Some(update)).await;
    assert_eq!(response.status(), 200, "a missing key keeps the stored one");

    let response = app.call(Method::POST, &format!("/admin/node/{id}/test"), Some(&admin.access), None).await;
    assert_eq!(response.status(), 200);
    let check: Value = response.json().await.unwrap();
    assert_eq!(check["protocol_version"], nubo_protocol::PROTOCOL_VERSION);
    assert!(check["software"].as_str().unwrap().starts_with("nubo-slave"));
    let node: Value =
        app.call(Method::GET, &format!("/admin/node/{id}"), Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(node["status"], "online");
    assert!(node["last_heartbeat"].is_string());
    assert!(node["capabilities"].as_array().unwrap().iter().any(|c| c == "upload"));
    let total = check["total_space"].as_u64().expect("the node reports its disk size");
    let free = node["free_space"].as_u64().expect("the registry keeps the node's free space");
    assert!(free <= total, "free {free} of {total}");

    // The periodic health check reaches it too (and counts it online).
    assert_eq!(nubo_service::storage::nodes::check_all(app.context()).await.unwrap(), 1);

    // A node that storage policies do not use can be removed.
    let response = app.call(Method::DELETE, &format!("/admin/node/{id}"), Some(&admin.access), None).await;
    assert_eq!(response.status(), 204);
    let _ = stop.send(());
}

async fn wrong_keys_and_dead_nodes_are_reported(app: TestApp) {
    let admin = app.login_admin().await;
    let short = json!({"name": "short", "base_url": "http://127.0.0.1:9", "key": "too-short"});
    let response = app.call(Method::POST, "/admin/node", Some(&admin.access), Some(short)).await;
    assert_eq!(error_body(response, 422).await["field"], "key");
    let bad_url = json!({"name": "bad", "base_url": "ftp://example.com", "key": NODE_KEY});
    assert_eq!(
        error_body(app.call(Method::POST, "/admin/node", Some(&admin.access), Some(bad_url)).await, 422).await["field"],
        "base_url"
    );

    let wrong = register(&app, &admin, "http://127.0.0.1:9", "a-different-key-a-different-key-!!").await;
    let id = wrong["id"].as_str().unwrap().to_owned();
    let (url, stop, _dir) = start_node(&id, NODE_KEY).await;
    let update = json!({"name": wrong["name"], "base_url": url});
    app.call(Method::PUT, &format!("/admin/node/{id}"), Some(&admin.access), Some(update)).await;
    let response = app.call(Method::POST, &format!("/admin/node/{id}/test"), Some(&admin.access), None).await;
    let body = error_body(response, 502).await;
    assert_eq!(body["code"], "node.refused");
    assert!(body["message"].as_str().unwrap().contains("unauthorized"), "{body}");

    let _ = stop.send(());
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let dead = register(&app, &admin, "http://127.0.0.1:9", NODE_KEY).await;
    let response = app
        .call(Method::POST, &format!("/admin/node/{}/test", dead["id"].as_str().unwrap()), Some(&admin.access), None)
        .await;
    assert_eq!(error_body(response, 503).await["code"], "node.unreachable");
    let node: Value = app
        .call(Method::GET, &format!("/admin/node/{}", dead["id"].as_str().unwrap()), Some(&admin.access), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(node["status"], "offline");
}
