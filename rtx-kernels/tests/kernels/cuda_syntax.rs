//! Checks that every kernel's generated CUDA source is valid C++ by compiling it with the
//! host C++ compiler (`-fsyntax-only`) behind a stub header that stands in for CUDA's
//! built-ins (`tests/cuda_stub.h`). NVRTC itself runs on GPU machines; this catches syntax and
//! type errors in the generator on any machine with g++ or clang++, and prints a skip notice
//! where there is none.

use rtx_kernels::kernels::every_kernel;
use std::path::{Path, PathBuf};
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
    let kernels = every_kernel();
    for k in &kernels {
        for e in k.entries {
            assert!(
                k.source.contains(&format!(" {}(", e.symbol)),
                "{} lacks {}",
                k.name,
                e.symbol
            );
        }
    }
    // One compiler process per kernel, spread over the cores: this test is the longest of the
    // crate, and a fresh `cargo test` otherwise waits on it with a core idle.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(k) = kernels.get(i) else { break };
                    if let Some(failure) = check(&cxx, &stub, &dir, k.name, k.source) {
                        failures.lock().unwrap().push(failure);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Compiles one kernel's source as C++; the compiler's complaint when it fails.
fn check(cxx: &str, stub: &Path, dir: &Path, name: &str, source: &str) -> Option<String> {
    let path = dir.join(format!("{name}.cu"));
    std::fs::write(&path, source).unwrap();
    let out = Command::new(cxx)
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
        .arg(stub)
        .arg(&path)
        .output()
        .unwrap();
    (!out.status.success()).then(|| format!("{name}:\n{}", String::from_utf8_lossy(&out.stderr)))
}
