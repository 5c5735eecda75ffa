//! The master's floor rules, read from the manifests and the sources: each floor depends only on
//! the floors below it (model ← service ← http ← master), the model and the services name no web
//! framework, and no floor's source names a crate above it (cargo already refuses a circle
//! between crates; this keeps the direction, and a doc link or a path in a string from
//! pretending otherwise). The services build no URL of the front end (no `/api/v1` in their
//! code), and the front ends name no `db` module of the model and no pool (`.db()`): they hand
//! the services the `Context`. Inside the services, each folder imports only the folders below
//! it ([`SERVICE_FOLDERS`]). The slave's own rule is `slave/tests/node/layers.rs`.

use std::path::{Path, PathBuf};

/// The floors from the bottom up: package name, crate path, folder under `master/`.
const FLOORS: &[(&str, &str, &str)] = &[
    ("nubo-model", "nubo_model", "model"),
    ("nubo-service", "nubo_service", "service"),
    ("nubo-http", "nubo_http", "http"),
    ("nubo-master", "nubo_master", "."),
];

/// Web-framework crates that belong to the http floor and above.
const WEB_FRAMEWORKS: &[&str] = &["axum", "axum-extra", "tower", "tower-http", "hyper", "dav-server", "utoipa-axum"];

/// How many floors from the bottom may depend on a web framework: none below http.
const FLOORS_WITHOUT_WEB: usize = 2;

/// The floor of the use cases, which builds no URL of the front end (the model's node driver
/// signs the storage node's own URLs, which are the node protocol's).
const SERVICE: usize = 1;

/// The floors that reach the database only through the services: the http floor and the binary's
/// wiring aside (it connects and migrates it).
const FRONT_END: usize = 2;

/// The service crate's folders from the bottom up (as `master/service/src/lib.rs` lists them): a
/// file imports (`crate::...`) only its own folder, the folders before it and the crate root's
/// files (`error`, `error_codes`, `lib`).
const SERVICE_FOLDERS: &[&str] = &[
    "credentials",
    "context",
    "audit",
    "settings",
    "storage",
    "tree",
    "identity",
    "capacity",
    "tasks",
    "sharing",
    "content",
    "office",
    "ops",
    "jobs",
];

fn master_dir() -> &'static Path {
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

fn manifest_of(folder: &str) -> Vec<String> {
    let path = master_dir().join(folder).join("Cargo.toml");
    declared_dependencies(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// What a floor's manifest declares against the rules: a floor above it, or (low floors) a web
/// framework.
fn manifest_breaks(floor: usize, declared: &[String]) -> Vec<String> {
    let mut breaks = Vec::new();
    for (above, _, _) in &FLOORS[floor + 1..] {
        if declared.iter().any(|name| name == above) {
            breaks.push(format!("depends on {above}, a floor above"));
        }
    }
    if floor < FLOORS_WITHOUT_WEB {
        for web in declared.iter().filter(|name| WEB_FRAMEWORKS.contains(&name.as_str())) {
            breaks.push(format!("depends on the web framework {web}"));
        }
    }
    breaks
}

/// What a floor's source text names against the rules: a crate above it, or (low floors) a web
/// framework's paths.
fn source_breaks(floor: usize, text: &str) -> Vec<String> {
    // A path, not a bare word: `nubo_http_requests_total` is a metric's name.
    let mut named: Vec<String> = FLOORS[floor + 1..]
        .iter()
        .map(|(_, path, _)| format!("{path}::"))
        .filter(|path| text.contains(path.as_str()))
        .collect();
    if floor == SERVICE && code_of(text).contains("/api/v1") {
        named.push("/api/v1 (a route: the front end builds its URLs, see `Context::links`)".to_owned());
    }
    if floor == FRONT_END && text.contains("nubo_model::db") {
        named.push("nubo_model::db (the services own the queries; re-export what a handler builds)".to_owned());
    }
    if floor == FRONT_END && code_of(text).contains(".db()") {
        named.push(".db() (a pool: hand the service the Context)".to_owned());
    }
    if floor < FLOORS_WITHOUT_WEB {
        for web in WEB_FRAMEWORKS {
            let path = format!("{}::", web.replace('-', "_"));
            if text.contains(&path) {
                named.push(path);
            }
        }
    }
    named
}

/// The first names of the `crate::` paths in `code` (each item's of a `crate::{a, b::c}` group).
fn crate_paths(code: &str) -> Vec<String> {
    let ident = |text: &str| text.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let preceded_by_word = rest[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_');
        rest = &rest[at + "crate::".len()..];
        if preceded_by_word {
            continue; // another crate's path (`nubo_crate::`)
        }
        let Some(group) = rest.strip_prefix('{') else {
            names.push(ident(rest));
            continue;
        };
        // The group's items at its top level, up to its closing brace.
        let (mut depth, mut item) = (0, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    names.push(ident(&group[item..i]));
                    rest = &group[i..];
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    names.push(ident(&group[item..i]));
                    item = i + 1;
                }
                _ => {}
            }
        }
    }
    names.retain(|name: &String| !name.is_empty());
    names
}

/// The folder a service file belongs to (`None` for the crate root's files).
fn service_folder(relative: &Path) -> Option<String> {
    let mut parts = relative.components();
    let first = parts.next()?.as_os_str().to_string_lossy().into_owned();
    parts.next().map(|_| first)
}

/// What a service file at `relative` (to `src/`) imports against the folder order.
fn folder_breaks(relative: &Path, text: &str) -> Vec<String> {
    let rank = |folder: &str| SERVICE_FOLDERS.iter().position(|f| *f == folder);
    let own = service_folder(relative).map(|folder| {
        rank(&folder).unwrap_or_else(|| panic!("{}: folder {folder} is not in SERVICE_FOLDERS", relative.display()))
    });
    crate_paths(&code_of(text))
        .into_iter()
        .filter_map(|name| rank(&name).map(|r| (name, r)))
        .filter(|&(_, r)| own.is_none_or(|own| r > own))
        .map(|(name, _)| format!("imports {name}, a folder above its own"))
        .collect()
}

/// The source without its comment lines (doc comments may name a route they describe).
fn code_of(text: &str) -> String {
    text.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

#[test]
fn each_floor_depends_only_on_the_floors_below_and_the_low_floors_on_no_web_framework() {
    let mut breaks = Vec::new();
    for (floor, (package, _, folder)) in FLOORS.iter().enumerate() {
        let declared = manifest_of(folder);
        assert!(declared.iter().any(|name| name == "nubo-common"), "{package}: the scan read its dependency tables");
        if floor > 0 {
            let below = FLOORS[floor - 1].0;
            assert!(declared.iter().any(|name| name == below), "{package} is expected to stand on {below}");
        }
        breaks.extend(manifest_breaks(floor, &declared).into_iter().map(|why| format!("{package} {why}")));
    }
    assert!(breaks.is_empty(), "floor rules broken in the manifests: {breaks:?}");
}

#[test]
fn no_source_file_names_a_floor_above_its_own() {
    let mut breaks = Vec::new();
    for (floor, (_, _, folder)) in FLOORS.iter().enumerate() {
        let src = master_dir().join(folder).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        assert!(!files.is_empty(), "{}: the scan found the source tree", src.display());
        for file in files {
            let text = std::fs::read_to_string(&file).expect("source file");
            for named in source_breaks(floor, &text) {
                breaks.push(format!("{}: {named}", file.strip_prefix(master_dir()).unwrap_or(&file).display()));
            }
        }
    }
    assert!(breaks.is_empty(), "a floor names what stands above it (move the code down, or pass it in): {breaks:?}");
}

#[test]
fn each_service_folder_imports_only_the_folders_below_it() {
    let src = master_dir().join("service/src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let code = code_of(&lib);
    let mut declared: Vec<&str> = code
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub mod "))
        .map(|rest| rest.split(';').next().unwrap_or(rest).trim())
        .filter(|name| src.join(name).is_dir())
        .collect();
    let mut ranked = SERVICE_FOLDERS.to_vec();
    declared.sort();
    ranked.sort();
    assert_eq!(declared, ranked, "every folder lib.rs declares has its place in SERVICE_FOLDERS");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut breaks = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src");
        let text = std::fs::read_to_string(file).expect("source file");
        breaks.extend(folder_breaks(relative, &text).into_iter().map(|why| format!("{}: {why}", relative.display())));
    }
    assert!(files.len() > 40, "the scan found the service files ({})", files.len());
    assert!(breaks.is_empty(), "a service folder imports one above it (move the code down, or pass it in): {breaks:?}");
}

#[test]
fn the_folder_rule_sees_an_upward_import_in_any_form() {
    let tree = Path::new("tree/files.rs");
    assert!(folder_breaks(tree, "use crate::storage::policies;\nuse crate::{Page, audit::activity};").is_empty());
    assert_eq!(folder_breaks(tree, "use crate::content::ingest;").len(), 1);
    assert_eq!(folder_breaks(tree, "use crate::{Page, sharing::shares::{self, Share}};").len(), 1);
    assert_eq!(folder_breaks(tree, "let x = crate::ops::summary::get(ctx);").len(), 1);
    assert!(folder_breaks(tree, "/// see [`crate::content::ingest`]").is_empty(), "a doc link is not an import");
    assert_eq!(folder_breaks(Path::new("error.rs"), "use crate::tree::files;").len(), 1, "the root stands below all");
    assert!(folder_breaks(Path::new("jobs/mod.rs"), "use crate::{content::uploads, ops::health};").is_empty());
    assert_eq!(crate_paths("use crate::{a::{b, c}, d, e::f};"), ["a", "d", "e"]);
}

#[test]
fn the_rules_see_an_upward_dependency_and_an_upward_path() {
    let service = 1;
    assert_eq!(manifest_breaks(service, &["nubo-model".into(), "nubo-http".into(), "axum".into()]).len(), 2);
    assert!(manifest_breaks(2, &["nubo-service".into(), "axum".into()]).is_empty(), "http may use axum");
    assert_eq!(source_breaks(0, "use nubo_service::tree::files;"), ["nubo_service::"]);
    assert!(source_breaks(service, "const M: &str = \"nubo_http_requests_total\";").is_empty());
    assert_eq!(source_breaks(service, "fn f(b: axum::body::Body) {}"), ["axum::"]);
    assert!(source_breaks(service, "use nubo_model::db;").is_empty());
    assert_eq!(source_breaks(service, "let url = format!(\"/api/v1/file/{id}\");").len(), 1);
    assert!(source_breaks(service, "/// served at `/api/v1/share/{code}`").is_empty(), "a doc comment may name it");
    assert!(source_breaks(2, "let url = format!(\"/api/v1/file/{id}\");").is_empty(), "http knows the routes");
    assert_eq!(source_breaks(2, "use nubo_model::db::shares::ShareFilter;").len(), 1);
    assert_eq!(source_breaks(2, "files::get(state.db(), id).await?").len(), 1, "a handler passes no pool");
}

#[test]
fn the_manifest_scan_reads_keys_and_renamed_packages() {
    let manifest = "[package]\nname = \"x\"\n[dependencies]\naxum.workspace = true\nweb = { package = \"tower-http\" }\n\
                    # hyper = \"1\"\n[target.'cfg(unix)'.dev-dependencies]\n\"dav-server\" = \"0.11\"\n[lints]\nhyper = 1\n";
    assert_eq!(declared_dependencies(manifest), ["axum", "tower-http", "dav-server"]);
}
