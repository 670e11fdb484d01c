//! Runs a generated CUDA entry point on the host: the kernel's source is compiled with the
//! host C++ compiler behind `tests/cuda_stub.h` and a generated `main` that calls the entry
//! once per thread of the grid, one thread after another. That is exactly the GPU's result for
//! kernels whose threads never wait for each other (grid-stride loops without barriers or warp
//! shuffles), so it checks the generated C++ itself (conversions, wrapping, rounding) against
//! the native twin without a GPU.
//!
//! One binary is built per kernel (all its entries) and cached for the test run; the entry
//! and its arguments travel in a file, so one build serves every entry and input.

use rtx_kernels::DType;
use rtx_kernels::kernel::{
    KernelEntry, KernelShape, KernelSource, KernelStrides, LaunchConfig, ParamType, ScalarType,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// One argument, in the entry's order.
pub enum HostArg {
    /// A buffer's bytes (inputs and outputs alike; every buffer comes back).
    Buf(Vec<u8>),
    /// A table of buffers (`&[&[T]]`, `&[&mut [T]]`): each row's bytes; every row comes back,
    /// in order, as a buffer of its own.
    #[allow(dead_code)] // Built by `cuda_host_multi.rs` only.
    Table(Vec<Vec<u8>>),
    /// A float scalar (`T` in the compute type, or `f64`).
    F(f64),
    /// An integer scalar's bits (`usize`, `u64`, `i64`, `u32`, `i32`, `bool`).
    I(u64),
    Shape(KernelShape),
    Strides(KernelStrides),
}

/// The bytes of a slice of plain values.
pub fn bytes<T: Copy>(v: &[T]) -> Vec<u8> {
    // SAFETY: any initialized `T: Copy` value of the element types used here is plain bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
        .to_vec()
}

/// A vector of plain values read back from bytes.
pub fn from_bytes<T: Copy + Default>(b: &[u8]) -> Vec<T> {
    let n = b.len() / std::mem::size_of::<T>();
    let mut v = vec![T::default(); n];
    // SAFETY: `v` has room for `n` values; the bytes were written from values of `T`.
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), v.as_mut_ptr() as *mut u8, n * size_of::<T>())
    };
    v
}

fn compiler() -> Option<String> {
    static CXX: OnceLock<Option<String>> = OnceLock::new();
    CXX.get_or_init(|| {
        [
            std::env::var("CXX").ok(),
            Some("g++".into()),
            Some("clang++".into()),
        ]
        .into_iter()
        .flatten()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
    })
    .clone()
}

/// The C type of the entry's compute type.
fn acc_c(dtype: DType) -> &'static str {
    match dtype {
        DType::F64 => "double",
        DType::F32 | DType::F16 | DType::BF16 => "float",
        DType::I32 => "int",
        DType::I64 => "long long",
        DType::U8 => "unsigned char",
        DType::Bool => "bool",
    }
}

/// Where harness binaries live: cargo's scratch directory for integration tests, so they
/// are reused across runs (keyed by a hash of their source) and never fill `/tmp`.
fn work_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuda-host");
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    d
}

/// The call of one entry inside the harness: read its arguments, run every thread, write
/// every buffer back.
fn entry_case(entry: &KernelEntry) -> String {
    let mut reads = String::new();
    let mut call = Vec::new();
    let mut writes = String::new();
    for (i, p) in entry.params.iter().enumerate() {
        match p.ty {
            ParamType::Ptr { .. } => {
                reads.push_str(&format!(
                    "    std::vector<unsigned char> b{i} = rd_buf(f);\n"
                ));
                call.push(format!("P{{b{i}.data()}}"));
                writes.push_str(&format!("    wr_buf(o, b{i});\n"));
            }
            ParamType::Table { .. } => {
                reads.push_str(&format!(
                    "    std::vector<std::vector<unsigned char>> t{i}(rd_u64(f));\n\
                     \x20   std::vector<void*> tp{i}(t{i}.size() + 1);\n\
                     \x20   for (size_t j = 0; j < t{i}.size(); ++j) {{ t{i}[j] = rd_buf(f); tp{i}[j] = t{i}[j].data(); }}\n"
                ));
                call.push(format!("PT{{tp{i}.data()}}"));
                writes.push_str(&format!("    for (auto& r : t{i}) wr_buf(o, r);\n"));
            }
            ParamType::Value(t) => {
                let e = match t {
                    ScalarType::Acc => format!("({})rd_f64(f)", acc_c(entry.dtype)),
                    ScalarType::F64 => "rd_f64(f)".into(),
                    ScalarType::U64 => "(unsigned long long)rd_u64(f)".into(),
                    ScalarType::I64 => "(long long)rd_u64(f)".into(),
                    ScalarType::U32 => "(unsigned int)rd_u64(f)".into(),
                    ScalarType::I32 => "(int)(long long)rd_u64(f)".into(),
                    ScalarType::Bool => "(rd_u64(f) != 0)".into(),
                    ScalarType::Elem | ScalarType::Out => {
                        panic!("{}: a scalar of storage type", entry.symbol)
                    }
                };
                reads.push_str(&format!("    auto v{i} = {e};\n"));
                call.push(format!("v{i}"));
            }
            ParamType::Shape => {
                reads.push_str(&format!(
                    "    rtx_shape v{i}; rd_raw(f, &v{i}, sizeof v{i});\n"
                ));
                call.push(format!("v{i}"));
            }
            ParamType::Strides => {
                reads.push_str(&format!(
                    "    rtx_strides v{i}; rd_raw(f, &v{i}, sizeof v{i});\n"
                ));
                call.push(format!("v{i}"));
            }
            // Kernels with tensor maps wait at barriers, which this harness cannot run.
            ParamType::TensorMap => panic!("{}: the host harness runs no TMA kernel", entry.symbol),
        }
    }
    format!(
        "  {{\n{reads}\
         \x20   for (unsigned int bx = 0; bx < grid; ++bx) {{\n\
         \x20     for (unsigned int tx = 0; tx < block; ++tx) {{\n\
         \x20       blockIdx.x = bx; threadIdx.x = tx;\n\
         \x20       {sym}({args});\n\
         \x20     }}\n\
         \x20   }}\n\
         {writes}\
         \x20 }}\n",
        sym = entry.symbol,
        args = call.join(", "),
    )
}

/// The harness source for a kernel: `main` reads which entry to run, the grid and the
/// arguments, runs every thread of the grid in turn, and writes every buffer back.
fn harness(source: &KernelSource) -> String {
    let mut cases = String::new();
    for (i, e) in source.entries.iter().enumerate() {
        cases.push_str(&format!("  if (which == {i}ull)\n{}", entry_case(e)));
    }
    format!(
        "{src}\n\
         #include <stdio.h>\n#include <vector>\n\
         rtx_stub_dim3 threadIdx, blockIdx, blockDim, gridDim;\n\
         struct P {{ void* p; template <typename T> operator T*() const {{ return (T*)p; }} }};\n\
         struct PT {{ void** p; template <typename T> operator T* const*() const {{ return (T* const*)p; }} }};\n\
         static void rd_raw(FILE* f, void* p, size_t n) {{ if (fread(p, 1, n, f) != n) throw 1; }}\n\
         static unsigned long long rd_u64(FILE* f) {{ unsigned long long v; rd_raw(f, &v, 8); return v; }}\n\
         static double rd_f64(FILE* f) {{ double v; rd_raw(f, &v, 8); return v; }}\n\
         static std::vector<unsigned char> rd_buf(FILE* f) {{\n\
         \x20 std::vector<unsigned char> b(rd_u64(f) + 16); rd_raw(f, b.data(), b.size() - 16); return b; }}\n\
         static void wr_buf(FILE* o, const std::vector<unsigned char>& b) {{\n\
         \x20 unsigned long long n = b.size() - 16; fwrite(&n, 8, 1, o); fwrite(b.data(), 1, n, o); }}\n\
         int main(int argc, char** argv) {{\n\
         \x20 if (argc != 3) return 2;\n\
         \x20 FILE* f = fopen(argv[1], \"rb\");\n\
         \x20 FILE* o = fopen(argv[2], \"wb\");\n\
         \x20 if (!f || !o) return 3;\n\
         \x20 unsigned long long which = rd_u64(f);\n\
         \x20 unsigned int grid = (unsigned int)rd_u64(f), block = (unsigned int)rd_u64(f);\n\
         \x20 gridDim.x = grid; gridDim.y = 1; gridDim.z = 1;\n\
         \x20 blockDim.x = block; blockDim.y = 1; blockDim.z = 1;\n\
         \x20 blockIdx.y = 0; blockIdx.z = 0; threadIdx.y = 0; threadIdx.z = 0;\n\
         {cases}\
         \x20 fclose(f);\n\
         \x20 fclose(o);\n\
         \x20 return 0;\n\
         }}\n",
        src = source.source,
    )
}

/// The built harness of a kernel (built on first use, once per test binary).
fn binary(source: &'static KernelSource, cxx: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<&'static str, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    if let Some(p) = built
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(source.name)
    {
        return p.clone();
    }
    let text = harness(source);
    let stub = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cuda_stub.h");
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            &text,
            std::fs::read_to_string(&stub).unwrap_or_default(),
            cxx,
        )
            .hash(&mut h);
        h.finish()
    };
    let dir = work_dir();
    let exe = dir.join(format!("{}-{key:016x}", source.name));
    if !exe.exists() {
        // Built under a private name and renamed, so concurrent test runs never see half a file.
        static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let build = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(
            "{}-{key:016x}.{}-{build}",
            source.name,
            std::process::id()
        ));
        let src = PathBuf::from(format!("{}.cpp", tmp.display()));
        std::fs::write(&src, &text).unwrap();
        let out = Command::new(cxx)
            .args(["-std=c++17", "-O0", "-w", "-x", "c++", "-include"])
            .arg(&stub)
            .arg(&src)
            .arg("-o")
            .arg(&tmp)
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&src);
        assert!(
            out.status.success(),
            "building {}:\n{}",
            source.name,
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::rename(&tmp, &exe).unwrap();
    }
    built
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(source.name, exe.clone());
    exe
}

/// Runs `entry` of `source` on the host over `launch` (x dimensions only) and returns every
/// buffer argument's final bytes, in order; `None` (after printing a notice) where no C++
/// compiler exists.
pub fn run(
    source: &'static KernelSource,
    entry: &'static KernelEntry,
    launch: LaunchConfig,
    args: &[HostArg],
) -> Option<Vec<Vec<u8>>> {
    let Some(cxx) = compiler() else {
        println!("skipped: no C++ compiler (g++, clang++ or $CXX) to run CUDA sources on the host");
        return None;
    };
    assert_eq!(
        args.len(),
        entry.params.len(),
        "{}: argument count",
        entry.symbol
    );
    let exe = binary(source, &cxx);
    let which = source
        .entries
        .iter()
        .position(|e| std::ptr::eq(e, entry))
        .unwrap_or_else(|| panic!("{} is not an entry of {}", entry.symbol, source.name));
    let mut file = Vec::new();
    file.extend_from_slice(&(which as u64).to_le_bytes());
    file.extend_from_slice(&(launch.grid.x as u64).to_le_bytes());
    file.extend_from_slice(&(launch.block.x as u64).to_le_bytes());
    for (a, p) in args.iter().zip(entry.params) {
        match (a, p.ty) {
            (HostArg::Buf(b), ParamType::Ptr { .. }) => {
                file.extend_from_slice(&(b.len() as u64).to_le_bytes());
                file.extend_from_slice(b);
            }
            (HostArg::Table(rows), ParamType::Table { .. }) => {
                file.extend_from_slice(&(rows.len() as u64).to_le_bytes());
                for b in rows {
                    file.extend_from_slice(&(b.len() as u64).to_le_bytes());
                    file.extend_from_slice(b);
                }
            }
            (HostArg::F(v), ParamType::Value(ScalarType::Acc | ScalarType::F64)) => {
                file.extend_from_slice(&v.to_bits().to_le_bytes())
            }
            (HostArg::I(v), ParamType::Value(_)) => file.extend_from_slice(&v.to_le_bytes()),
            (HostArg::Shape(s), ParamType::Shape) => file.extend_from_slice(&bytes(&[*s])),
            (HostArg::Strides(s), ParamType::Strides) => file.extend_from_slice(&bytes(&[*s])),
            _ => panic!("{}: argument `{}` does not fit", entry.symbol, p.name),
        }
    }
    let n = {
        static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    };
    let dir = work_dir();
    let pid = std::process::id();
    let (inp, outp) = (
        dir.join(format!("in-{pid}-{n}.bin")),
        dir.join(format!("out-{pid}-{n}.bin")),
    );
    std::fs::write(&inp, &file).unwrap();
    let st = Command::new(&exe).arg(&inp).arg(&outp).status().unwrap();
    assert!(st.success(), "{} exited with {st}", entry.symbol);
    let out = std::fs::read(&outp).unwrap();
    let (mut at, mut bufs) = (0, Vec::new());
    while at < out.len() {
        let len = u64::from_le_bytes(out[at..at + 8].try_into().unwrap()) as usize;
        bufs.push(out[at + 8..at + 8 + len].to_vec());
        at += 8 + len;
    }
    let _ = std::fs::remove_file(&inp);
    let _ = std::fs::remove_file(&outp);
    Some(bufs)
}
