//! The packaging matches what is tested: `deploy/compose.yaml` has the cluster tests' topology
//! (two masters behind a balancer, two nodes, PostgreSQL, Redis, an S3 server) with the
//! variables the harness starts them with, its balancer proxies as the tested one does, and
//! its one-shot set-up script registers the nodes and policies through a real master.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use nubo_tests::topology::env;
use nubo_tests::{ADMIN_EMAIL, ADMIN_PASSWORD, TestApp, on_every_backend};
use reqwest::Method;
use serde_json::Value;

on_every_backend!(the_compose_setup_registers_the_nodes_and_the_policies_through_a_master);

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(file)
}

/// The compose file with its anchors and merge keys resolved.
fn compose() -> serde_norway::Value {
    let text = std::fs::read_to_string(deploy("compose.yaml")).expect("deploy/compose.yaml");
    let mut value: serde_norway::Value = serde_norway::from_str(&text).expect("compose.yaml is YAML");
    value.apply_merge().expect("merge keys resolve");
    value
}

/// The services of the compose file by name.
fn services(compose: &serde_norway::Value) -> BTreeMap<String, serde_norway::Value> {
    let services = compose["services"].as_mapping().expect("services");
    services.iter().map(|(name, service)| (name.as_str().expect("name").to_owned(), service.clone())).collect()
}

/// A service's command as one line.
fn command(service: &serde_norway::Value) -> String {
    match &service["command"] {
        serde_norway::Value::Sequence(words) => {
            words.iter().filter_map(|word| word.as_str()).collect::<Vec<_>>().join(" ")
        }
        other => other.as_str().unwrap_or_default().to_owned(),
    }
}

fn variables(service: &serde_norway::Value) -> BTreeSet<String> {
    let environment = service["environment"].as_mapping().expect("an environment map");
    environment.keys().map(|key| key.as_str().expect("a name").to_owned()).collect()
}

#[test]
fn the_compose_file_has_the_tested_topology_and_its_variables() {
    let compose = compose();
    let services = services(&compose);
    let names: BTreeSet<&str> = services.keys().map(String::as_str).collect();
    let expected =
        BTreeSet::from(["postgres", "redis", "s3", "master-1", "master-2", "balancer", "setup", "node-1", "node-2"]);
    assert_eq!(names, expected);

    let masters: Vec<&String> =
        services.keys().filter(|name| command(&services[*name]) == "nubo-master serve").collect();
    assert_eq!(masters, ["master-1", "master-2"], "two masters");
    let master_variables: BTreeSet<String> = env::MASTER.iter().map(|name| name.to_string()).collect();
    for name in &masters {
        assert_eq!(variables(&services[*name]), master_variables, "{name} has the harness's variables");
        let volumes = services[*name]["volumes"].as_sequence().expect("volumes");
        assert_eq!(volumes[0].as_str(), Some("master-data:/var/lib/nubo"), "the masters share their data");
    }
    let url = |name: &str, key: &str| services[name]["environment"][key].as_str().unwrap_or_default().to_owned();
    assert_eq!(url("master-1", env::DATABASE_URL), url("master-2", env::DATABASE_URL), "one database");
    assert_eq!(url("master-1", env::REDIS_URL), url("master-2", env::REDIS_URL), "one Redis");
    assert_eq!(url("master-1", env::SECRET), url("master-2", env::SECRET), "one signing secret");

    let nodes: Vec<&String> = services.keys().filter(|name| command(&services[*name]).contains("nubo-slave")).collect();
    assert_eq!(nodes, ["node-1", "node-2"], "two nodes");
    // The id is the one exception: the masters hand it out, and the set-up writes it to the
    // node's configuration file.
    let mut node_variables: BTreeSet<String> =
        env::NODE.iter().filter(|name| **name != env::NODE_ID).map(|name| name.to_string()).collect();
    node_variables.insert("NUBO_CONFIG".to_owned());
    for name in &nodes {
        assert_eq!(variables(&services[*name]), node_variables, "{name} has the harness's variables");
        assert_eq!(url(name, "NUBO_CONFIG"), format!("/setup/{name}.toml"));
    }
    assert!(url("node-1", env::MASTER_URL).contains("balancer"), "nodes report through the balancer");
    assert!(command(&services["s3"]).starts_with("nubo-s3-server"), "the tests' S3 server process");
}

/// The `proxy_*` and body-size directives of an nginx configuration, as written (but where
/// nginx keeps its temporary files, which only the tests' unprivileged nginx sets).
fn proxy_directives(config: &str) -> BTreeSet<String> {
    config
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("proxy_") || line.starts_with("client_max_body_size"))
        .filter(|line| !line.starts_with("proxy_temp_path"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_compose_balancer_proxies_as_the_tested_one_does() {
    let tested = std::fs::read_to_string(deploy("nginx-cluster.conf.in")).expect("the tested template");
    let composed = std::fs::read_to_string(deploy("nginx-compose.conf")).expect("the compose balancer");
    assert_eq!(proxy_directives(&composed), proxy_directives(&tested));
    assert!(composed.contains("server master-1:5212") && composed.contains("server master-2:5212"));
    assert!(!composed.contains("ip_hash") && !composed.contains("sticky"), "round-robin, no stickiness");
}

async fn the_compose_setup_registers_the_nodes_and_the_policies_through_a_master(app: TestApp) {
    let setup = tempfile::tempdir().unwrap();
    let run = || {
        std::process::Command::new("sh")
            .arg(deploy("compose-setup.sh"))
            .env("NUBO_API", app.api(""))
            .env("SETUP_DIR", setup.path())
            .env("SETUP_WAIT_TRIES", "3")
            .env("NUBO_ADMIN_EMAIL", ADMIN_EMAIL)
            .env("NUBO_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env("NUBO_NODE_KEY", nubo_tests::cluster::NODE_KEY)
            .env("NODE1_URL", "http://node-1.example:5213")
            .env("S3_ENDPOINT", "http://s3.example:9000")
            .env("S3_BUCKET", "nubo")
            .env("S3_ACCESS_KEY", "compose-access")
            .env("S3_SECRET_KEY", "compose-secret")
            .output()
    };
    // The script is synchronous: run it off the runtime the master serves on.
    let output = tokio::task::block_in_place(run).expect("sh runs");
    assert!(output.status.success(), "set-up failed: {}", String::from_utf8_lossy(&output.stderr));

    let admin = app.login_admin().await;
    let listed: Value = app.call(Method::GET, "/admin/node", Some(&admin.access), None).await.json().await.unwrap();
    let listed = listed.get("items").unwrap_or(&listed).as_array().expect("nodes").clone();
    for (n, url) in [(1, "http://node-1.example:5213"), (2, "http://node-2:5213")] {
        let written = std::fs::read_to_string(setup.path().join(format!("node-{n}.toml"))).expect("node config");
        let id = written.trim().strip_prefix("node_id = \"").and_then(|rest| rest.strip_suffix('"')).expect("node_id");
        let node = listed.iter().find(|node| node["id"] == id).unwrap_or_else(|| panic!("node {id} registered"));
        assert_eq!(node["base_url"], url);
    }
    let policies: Value = app.call(Method::GET, "/admin/policy", Some(&admin.access), None).await.json().await.unwrap();
    let policies = policies.get("items").unwrap_or(&policies).as_array().expect("policies").clone();
    let names: BTreeSet<&str> = policies.iter().filter_map(|p| p["name"].as_str()).collect();
    assert!(names.is_superset(&BTreeSet::from(["on node-1", "on node-2", "on S3"])), "{names:?}");

    // Run again: nothing is registered twice.
    let again = tokio::task::block_in_place(run).expect("sh runs");
    assert!(again.status.success());
    let listed: Value = app.call(Method::GET, "/admin/node", Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(listed.get("items").unwrap_or(&listed).as_array().unwrap().len(), 2);
}
