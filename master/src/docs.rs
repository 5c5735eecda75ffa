//! Checks of the documentation (tests only): every relative link in `README.md` and in the book
//! under `docs/src` names a file that exists, and every page of the book is listed in its
//! `SUMMARY.md`, so that moving or renaming a page cannot leave a dead link behind.

use std::path::{Path, PathBuf};

/// The repository's root, above this crate.
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The book's source folder.
fn book() -> PathBuf {
    repository().join("docs/src")
}

/// Every Markdown file below `dir`, sorted.
fn pages_below(dir: &Path) -> Vec<PathBuf> {
    let mut pages = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display())) {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// The text with inline code spans removed, so that `[a](b)` written as code is not a link.
fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect()
}

/// The targets of the Markdown links `[text](target)` in `text` that point inside the
/// repository: outside fenced code blocks, without a title or an `#anchor`, and neither a web
/// address, a mail address nor an anchor of the same page.
fn relative_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let line = without_code_spans(line);
        for (at, _) in line.match_indices("](") {
            let rest = &line[at + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split_whitespace().next().unwrap_or_default();
            let file = target.split('#').next().unwrap_or_default();
            let external = ["http://", "https://", "mailto:"].iter().any(|scheme| target.starts_with(scheme));
            if !external && !file.is_empty() {
                links.push(file.to_owned());
            }
        }
    }
    links
}

/// `README.md` and every page of the book.
fn documents() -> Vec<PathBuf> {
    let mut documents = vec![repository().join("README.md")];
    documents.extend(pages_below(&book()));
    documents
}

#[test]
fn link_extraction_keeps_relative_targets_only() {
    let text = "See [a](./one.md#part), [b](../two.md \"title\"), [web](https://x.org/y.md), \
                [mail](mailto:a@b.c), [here](#top) and `[code](not-a-link.md)`.\n\
                ```\n[fenced](not-either.md)\n```\n![shot](screenshots/a.png)\n";
    assert_eq!(relative_links(text), ["./one.md", "../two.md", "screenshots/a.png"]);
}

#[test]
fn every_relative_link_in_the_readme_and_the_book_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for document in documents() {
        let text = std::fs::read_to_string(&document).unwrap_or_else(|e| panic!("{}: {e}", document.display()));
        let folder = document.parent().expect("a document's folder");
        for link in relative_links(&text) {
            checked += 1;
            if !folder.join(&link).exists() {
                let shown = document.strip_prefix(repository()).unwrap_or(&document).display().to_string();
                broken.push(format!("{shown}: {link}"));
            }
        }
    }
    assert!(checked > 50, "the README and the book link to each other ({checked} links found)");
    assert!(broken.is_empty(), "links to files that do not exist: {broken:#?}");
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let summary = std::fs::read_to_string(book().join("SUMMARY.md")).expect("docs/src/SUMMARY.md");
    let listed: Vec<PathBuf> = relative_links(&summary).iter().map(|page| book().join(page)).collect();
    let unlisted: Vec<String> = pages_below(&book())
        .into_iter()
        .filter(|page| !page.ends_with("SUMMARY.md") && !listed.contains(page))
        .map(|page| page.strip_prefix(book()).unwrap_or(&page).display().to_string())
        .collect();
    assert!(unlisted.is_empty(), "pages missing from docs/src/SUMMARY.md: {unlisted:?}");
}
