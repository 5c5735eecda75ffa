//! The binary's start-up checks.

use std::process::Command;

fn run_without_key(extra: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_nubo-slave"));
    command
        .env_clear()
        .env("NUBO_NODE_ID", "node-1")
        .env("NUBO_DATA_DIR", dir.path())
        .env("NUBO_LISTEN", "127.0.0.1:0");
    for (name, value) in extra {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn the_binary_refuses_to_start_without_a_node_key() {
    let (success, stderr) = run_without_key(&[]);
    assert!(!success);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("NUBO_NODE_KEY"), "{stderr}");
}

#[test]
fn the_binary_refuses_a_short_node_key() {
    let (success, stderr) = run_without_key(&[("NUBO_NODE_KEY", "too-short")]);
    assert!(!success);
    assert!(stderr.contains("too short"), "{stderr}");
}
