//! Every `{{#include ..}}` in the book (book/src/*.md) names a file that exists and, with an
//! anchor, an anchor that the file opens and closes around at least one line. mdBook itself
//! includes nothing, silently, for an anchor it cannot find, so without this check a renamed
//! anchor would leave an empty listing in the book.

use std::path::Path;

/// The `path` and optional `anchor` of each `{{#include path:anchor}}` in `text`.
fn includes(text: &str) -> Vec<(String, Option<String>)> {
    text.split("{{#include ")
        .skip(1)
        .filter_map(|rest| rest.split_once("}}"))
        .map(|(link, _)| match link.trim().split_once(':') {
            Some((path, anchor)) => (path.to_string(), Some(anchor.to_string())),
            None => (link.trim().to_string(), None),
        })
        .collect()
}

/// The number of lines between `// ANCHOR: name` and `// ANCHOR_END: name`, marker lines of
/// other anchors aside; `None` when either marker is missing.
fn anchored_lines(source: &str, name: &str) -> Option<usize> {
    let is = |line: &str, marker: &str| {
        line.split_once(marker)
            .is_some_and(|(_, rest)| rest.trim() == name)
    };
    let mut lines = source.lines();
    lines.by_ref().find(|l| is(l, "ANCHOR: "))?;
    let mut count = 0;
    for line in lines {
        if is(line, "ANCHOR_END: ") {
            return Some(count);
        }
        if !line.contains("ANCHOR: ") && !line.contains("ANCHOR_END: ") {
            count += 1;
        }
    }
    None
}

#[test]
fn every_include_and_anchor_exists() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src");
    let mut checked = 0;
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(&src).expect("book/src is readable") {
        let page = entry.expect("a directory entry").path();
        if page.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&page).expect("a page is UTF-8");
        for (path, anchor) in includes(&text) {
            checked += 1;
            let link = anchor
                .as_ref()
                .map_or(path.clone(), |a| format!("{path}:{a}"));
            let shown = format!("{}: {{{{#include {link}}}}}", page.display());
            let Ok(source) = std::fs::read_to_string(src.join(&path)) else {
                problems.push(format!("{shown}: no such file"));
                continue;
            };
            if let Some(anchor) = anchor {
                match anchored_lines(&source, &anchor) {
                    None => problems.push(format!("{shown}: no anchor `{anchor}`")),
                    Some(0) => problems.push(format!("{shown}: anchor `{anchor}` is empty")),
                    Some(_) => {}
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked > 0, "no includes found under {}", src.display());
}

#[test]
fn anchors_are_found_by_name() {
    let source = "a\n// ANCHOR: x\nb\n// ANCHOR: y\nc\n// ANCHOR_END: y\n// ANCHOR_END: x\n";
    assert_eq!(anchored_lines(source, "x"), Some(2));
    assert_eq!(anchored_lines(source, "y"), Some(1));
    assert_eq!(anchored_lines(source, "z"), None);
    assert_eq!(
        includes("{{#include ../a.rs:x}} and {{#include ../b.txt}}"),
        [
            ("../a.rs".to_string(), Some("x".to_string())),
            ("../b.txt".to_string(), None)
        ]
    );
}
