//! Checks that every kernel's generated CUDA source is valid C++ by compiling it with the
//! host C++ compiler (`-fsyntax-only`) behind a stub header that stands in for CUDA's
//! built-ins (`tests/cuda_stub.h`). NVRTC itself runs on GPU machines; this catches syntax and
//! type errors in the generator on any machine with g++ or clang++, and prints a skip notice
//! where there is none.

use rtx_kernels::kernels::every_kernel;
use std::path::PathBuf;
use std::process::Command;

fn compiler() -> Option<String> {
    let candidates = [
        std::env::var("CXX").ok(),
        Some("g++".into()),
        Some("clang++".into()),
    ];
    candidates.into_iter().flatten().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

#[test]
fn generated_cuda_sources_compile_as_cpp() {
    let Some(cxx) = compiler() else {
        println!("skipped: no C++ compiler (g++, clang++ or $CXX) found to check the CUDA sources");
        return;
    };
    let stub = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cuda_stub.h");
    let dir = std::env::temp_dir().join(format!("rtx-cuda-syntax-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = Vec::new();
    for k in every_kernel() {
        let path = dir.join(format!("{}.cu", k.name));
        std::fs::write(&path, k.source).unwrap();
        let out = Command::new(&cxx)
            .args([
                "-std=c++17",
                "-fsyntax-only",
                "-Wall",
                "-Wno-unknown-pragmas",
                "-Werror",
                "-x",
                "c++",
                "-include",
            ])
            .arg(&stub)
            .arg(&path)
            .output()
            .unwrap();
        if !out.status.success() {
            failures.push(format!(
                "{}:\n{}",
                k.name,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        for e in k.entries {
            assert!(
                k.source.contains(&format!(" {}(", e.symbol)),
                "{} lacks {}",
                k.name,
                e.symbol
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
