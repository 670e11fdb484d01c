//! Compile-fail tests: shape and element-type mistakes must not compile, and their messages
//! must name both dims (or types) and the rule. The `pass` cases share the same `TestCases`,
//! which makes trybuild *build* every case rather than only check it, so specify-and-verify
//! asserts that fire at monomorphization are really exercised.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
