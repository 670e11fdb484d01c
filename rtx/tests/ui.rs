//! Compile-fail tests: shape and element-type mistakes must not compile, and their messages
//! must name both dims (or types) and the rule. The `pass` cases share the same `TestCases`,
//! which makes trybuild *build* every case rather than only check it, so specify-and-verify
//! asserts that fire at monomorphization are really exercised.
//!
//! Every case in `tests/ui/fail` is a mistake in the user's own code, so every expected
//! `.stderr` must name the user's line, `tests/ui/fail/NAME.rs:LINE`: `errors_name_the_users_line`
//! checks that without compiling anything. It matters most for the specify-and-verify checks
//! (reshape, flatten, conv and pool sizes, ...), whose `const` blocks fail inside rtx: only a
//! check in the method the user calls makes rustc's note point at the user's call (see
//! `rtx/src/shape/checks.rs`). Macro misuse (`kernel_*`, `model_*`) names the user's tokens too.
//!
//! Shape errors are every case except the macro ones and the element-type ones in
//! [`ELEMENT_TYPE_CASES`]; their first error must also stay short, so that rustc's lists of
//! other impls do not bury the message: at most 20 lines for a const-evaluation error
//! (`E0080`), and at most 12 for a trait or type error, counted up to rustc's closing note
//! that points at rtx's signature ("required by a bound in", "method defined here", "function
//! defined here"), which rustc always adds for a bound on a method (5 to 8 lines) and rtx
//! cannot shorten.

use std::fs;
use std::path::Path;

/// Cases about element types rather than shapes (they must name the user's line too).
const ELEMENT_TYPE_CASES: &[&str] = &[
    "arithmetic_on_bool",
    "arange_bool",
    "float_op_on_bool",
    "float_op_on_int",
    "index_select_dtype",
    "loss_nll_target_dtype",
    "mean_on_int",
    "mixed_dtype_scalar",
    "mixed_dtypes",
    "neg_on_unsigned",
    "nn_dropout_int",
    "nn_embedding_ids_dtype",
    "nn_relu_int",
    "rand_int",
    "sum_on_bool",
    "var_on_int",
    "zeros_bool",
];

/// The floor for the number of compile-fail cases.
const MIN_FAIL_CASES: usize = 120;

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}

/// The expected output of every compile-fail case, by case name.
fn expected_outputs() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/fail");
    let mut out: Vec<(String, String)> = fs::read_dir(&dir)
        .expect("tests/ui/fail")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let stderr = fs::read_to_string(p.with_extension("stderr"))
                .unwrap_or_else(|_| panic!("{name}.rs has no .stderr"));
            (name, stderr)
        })
        .collect();
    out.sort();
    out
}

/// The lines of the first error, up to the next `error` line.
fn first_error(stderr: &str) -> Vec<&str> {
    let lines: Vec<&str> = stderr.lines().collect();
    let end = (1..lines.len())
        .find(|&i| lines[i].starts_with("error"))
        .unwrap_or(lines.len());
    let mut first = lines[..end].to_vec();
    while first.last().is_some_and(|l| l.trim().is_empty()) {
        first.pop();
    }
    first
}

fn is_shape_case(name: &str) -> bool {
    // A wrong layer width in a compiled forward is a shape error like any other.
    if name == "model_forward_layer_width" {
        return true;
    }
    !(name.starts_with("kernel_")
        || name.starts_with("model_")
        || ELEMENT_TYPE_CASES.contains(&name))
}

#[test]
fn errors_name_the_users_line() {
    let cases = expected_outputs();
    assert!(
        cases.len() >= MIN_FAIL_CASES,
        "{} compile-fail cases; at least {MIN_FAIL_CASES} are wanted",
        cases.len()
    );
    let mut problems = Vec::new();
    for (name, stderr) in &cases {
        let user = format!("tests/ui/fail/{name}.rs:");
        let names_user = stderr
            .match_indices(&user)
            .any(|(i, _)| stderr[i + user.len()..].starts_with(|c: char| c.is_ascii_digit()));
        if !names_user {
            problems.push(format!("{name}: the error never names `{user}LINE`"));
        }
        if is_shape_case(name) {
            let mut first = first_error(stderr);
            let limit = if first[0].starts_with("error[E0080]") {
                20
            } else {
                let rtx_note = first.iter().position(|l| {
                    l.starts_with("note: required by a bound in")
                        || l.starts_with("note: method defined here")
                        || l.starts_with("note: function defined here")
                });
                first.truncate(rtx_note.unwrap_or(first.len()));
                12
            };
            if first.len() > limit {
                problems.push(format!(
                    "{name}: the first error has {} lines, more than {limit}",
                    first.len()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn listed_cases_exist() {
    let cases = expected_outputs();
    for name in ELEMENT_TYPE_CASES {
        assert!(
            cases.iter().any(|(n, _)| n == name),
            "{name} is listed in tests/ui.rs but is not a case"
        );
    }
}
