//! ARCHITECTURE.md cannot drift: every path it names in backticks must exist.

#[test]
fn every_path_in_the_architecture_page_exists() {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/ARCHITECTURE.md")).unwrap();
    let mut checked = 0;
    for (i, piece) in text.split('`').enumerate() {
        // Odd pieces are inside backticks; paths are the ones that name a crate folder.
        let is_path = i % 2 == 1
            && [
                "rtx/",
                "rtx-kernels/",
                "rtx-backends/",
                "rtx-macros/",
                "rtx-models/",
                "rtx-run/",
                "tests/",
                "benches/",
            ]
            .iter()
            .any(|p| piece.starts_with(p));
        if is_path {
            assert!(
                std::path::Path::new(&format!("{root}/{piece}")).exists(),
                "ARCHITECTURE.md names `{piece}`, which does not exist"
            );
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} paths found");
}
