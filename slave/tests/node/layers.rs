//! The node's one floor rule cargo cannot check: the shared state (`src/state.rs`) names no
//! module of the crate that names the state, so the state sits below every handler and no
//! import circle runs through it.

use std::path::Path;

/// The modules `crate::NAME` paths in `text` name (`use crate::a::B`, `crate::b::C` in a type,
/// `use crate::{c, d}`).
fn crate_modules(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        let listed = match rest.strip_prefix('{') {
            Some(group) => group.split('}').next().unwrap_or_default().split(',').collect(),
            None => vec![rest],
        };
        for item in listed {
            let name: String = item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

#[test]
fn the_state_names_no_module_that_names_the_state() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let state = std::fs::read_to_string(src.join("state.rs")).expect("src/state.rs");
    let named = crate_modules(&state);
    assert!(named.iter().any(|name| name == "config"), "the scan read the state's imports: {named:?}");
    let circles: Vec<_> = named
        .iter()
        .filter(|name| {
            let file = src.join(format!("{name}.rs"));
            std::fs::read_to_string(file).is_ok_and(|text| crate_modules(&text).iter().any(|n| n == "state"))
        })
        .collect();
    assert!(circles.is_empty(), "src/state.rs names modules that import the state back: {circles:?}");
}

#[test]
fn the_scan_reads_plain_grouped_and_inline_paths() {
    let text = "use crate::config::Config;\nuse crate::{fetch, state::Shared};\nfield: crate::instruments::X,";
    assert_eq!(crate_modules(text), ["config", "fetch", "state", "instruments"]);
}
