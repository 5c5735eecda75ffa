//! The floor rules cargo cannot check by itself: nubo-model depends on no web framework, and no
//! file of it names the master crate above it (cargo already refuses the dependency; this keeps
//! a doc link or a path in a string from pretending otherwise).

use std::path::{Path, PathBuf};

/// Web-framework crates that belong to the http floor and above.
const WEB_FRAMEWORKS: &[&str] = &["axum", "axum-extra", "tower", "tower-http", "hyper", "dav-server"];

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The crate names declared in the dependency tables of `Cargo.toml` (`[dependencies]`,
/// `[dev-dependencies]`, `[build-dependencies]` and their `target.*` forms).
fn declared_dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_dependencies = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line.trim_matches(['[', ']']).ends_with("dependencies");
            continue;
        }
        if !in_dependencies || line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key = line.split(['=', '.']).next().unwrap_or_default().trim().trim_matches('"');
        // `foo = { package = "bar" }` is crate `bar` under another name.
        let package = line.split("package").nth(1).and_then(|rest| rest.split('"').nth(1));
        names.push(package.unwrap_or(key).to_owned());
    }
    names
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn the_manifest_names_no_web_framework() {
    let manifest = std::fs::read_to_string(manifest_dir().join("Cargo.toml")).expect("Cargo.toml");
    let declared = declared_dependencies(&manifest);
    assert!(declared.iter().any(|name| name == "sqlx"), "the scan read the dependency tables: {declared:?}");
    let web: Vec<_> = declared.iter().filter(|name| WEB_FRAMEWORKS.contains(&name.as_str())).collect();
    assert!(web.is_empty(), "nubo-model must not depend on a web framework: {web:?}");
}

#[test]
fn no_source_file_names_the_master_crate() {
    let mut files = Vec::new();
    rust_files(&manifest_dir().join("src"), &mut files);
    assert!(files.len() > 40, "the scan found the source tree");
    let naming: Vec<_> = files
        .iter()
        .filter(|file| std::fs::read_to_string(file).expect("source file").contains("nubo_master"))
        .map(|file| file.strip_prefix(manifest_dir()).unwrap_or(file).display().to_string())
        .collect();
    assert!(naming.is_empty(), "nubo-model must not name nubo_master (the floor above): {naming:?}");
}

#[test]
fn the_manifest_scan_reads_keys_and_renamed_packages() {
    let manifest = "[package]\nname = \"x\"\n[dependencies]\naxum.workspace = true\nweb = { package = \"tower-http\" }\n\
                    # hyper = \"1\"\n[target.'cfg(unix)'.dev-dependencies]\n\"dav-server\" = \"0.11\"\n[lints]\nhyper = 1\n";
    assert_eq!(declared_dependencies(manifest), ["axum", "tower-http", "dav-server"]);
}
