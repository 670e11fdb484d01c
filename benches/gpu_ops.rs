//! rtx on one GPU, timed for the side-by-side table with PyTorch that
//! `benches/gpu_ops_torch.py` prints: a user's `#[kernel]` elementwise function against the
//! device-to-device copy bandwidth measured in the same run, softmax, layer norm, GEMM
//! against cuBLAS called directly (through cudarc, without rtx's tensor layer), full and
//! axis sums, and what a kernel's first launch costs (NVRTC compile, disk cache hit in a
//! fresh process, already loaded).
//!
//! Every GPU figure is the median of `--reps` launches (default 30) timed with CUDA events on
//! rtx's stream after warm-up launches, on random inputs. A row that fails (an op without a
//! kernel yet, a missing library) is reported with its error; the others still run.
//!
//! Build on the development machine with `tools/gpu-build --bench gpu_ops`; run on
//! the GPU machine as `python3 benches/gpu_ops_torch.py` (which runs `.gpu/bin/gpu_ops --json
//! FILE` first), or alone as `.gpu/bin/gpu_ops [--json FILE] [--reps N] [--only ID,ID]`.
//! Without a GPU it prints a notice and exits successfully.

use rtx::prelude::*;
use rtx_backends::cuda::{self, Event};
use serde_json::{Value, json};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::result::Result;
use std::time::Instant;

/// The benchmark's elementwise kernel: `gelu_tanh(a * x + b)`, a scale, a shift and an
/// activation in one pass over memory.
#[rtx::kernel(elementwise)]
pub fn gelu_affine<T: Float>(x: T, #[uniform] a: T, #[uniform] b: T) -> T {
    let z = a * x + b;
    let inner = 0.7978845608028654 * (z + 0.044715 * z * z * z);
    0.5 * z * (1.0 + inner.tanh())
}

/// The uniforms `a` and `b` (PyTorch's side uses the same).
const A: f64 = 1.5;
const B: f64 = -0.25;

/// `a` and `b` in the element type, for the tensor-op forms.
const A32: f32 = A as f32;
const B32: f32 = B as f32;

/// `gelu_tanh(a * x + b)` written as tensor ops in a `#[model]` forward, which compiles the
/// chain into one fused kernel.
#[rtx::model]
struct AffineGelu {}

#[rtx::model]
impl AffineGelu {
    fn forward(&self, x: &Tensor<(usize,), f32>) -> Tensor<(usize,), f32> {
        let z = x * A32 + B32;
        z.gelu_tanh()
    }
}

/// Elements of the elementwise and full-sum rows.
const N_ELEMWISE: usize = 1 << 28;

type Outcome = Result<Value, String>;

/// Options from the command line.
struct Options {
    json: Option<PathBuf>,
    reps: usize,
    only: Option<Vec<String>>,
    /// The report's fields besides its rows (the GPU, NVRTC, the repetitions).
    head: Value,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        json: None,
        reps: 30,
        only: None,
        head: json!({}),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            // `cargo bench` passes `--bench`.
            "--bench" => {}
            "--json" => o.json = Some(args.next().ok_or("--json needs a file")?.into()),
            "--reps" => {
                let v = args.next().ok_or("--reps needs a number")?;
                o.reps = v.parse().map_err(|_| format!("--reps {v}: not a number"))?;
                if o.reps == 0 {
                    return Err("--reps must be at least 1".into());
                }
            }
            "--only" => {
                let v = args.next().ok_or("--only needs a list of row ids")?;
                o.only = Some(v.split(',').map(str::to_string).collect());
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}`; usage: gpu_ops [--json FILE] [--reps N] [--only \
                     ID,ID,..] (ids: copy gelu_affine model_gelu gelu_chain softmax layer_norm \
                     gemm_4096_f32 gemm_4096_bf16 gemm_8192_f32 gemm_8192_bf16 sum_all \
                     sum_axis0 sum_axis1 nvrtc)"
                ));
            }
        }
    }
    Ok(o)
}

/// Reproducible uniform values in [lo, hi), generated in parallel in fixed chunks.
fn random(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    let mut v = vec![0.0f32; n];
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| {
        let mut s = (seed ^ (c as u64).wrapping_mul(0xD1B5_4A32_D192_ED03))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            | 1;
        for o in out {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let r = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32;
            *o = lo + (hi - lo) * r;
        }
    });
    v
}

fn to_bf16(v: &[f32]) -> Vec<bf16> {
    use rayon::prelude::*;
    v.par_iter().map(|&x| bf16::from_f32(x)).collect()
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The median milliseconds of `reps` runs of `f`, each timed by CUDA events on rtx's stream
/// of GPU 0, after `warmup` untimed runs.
fn median_ms(warmup: usize, reps: usize, mut f: impl FnMut()) -> Result<f64, String> {
    for _ in 0..warmup {
        f();
    }
    cuda::synchronize(0).map_err(err)?;
    let (start, end) = (Event::new(0).map_err(err)?, Event::new(0).map_err(err)?);
    let mut ms = Vec::with_capacity(reps);
    for _ in 0..reps {
        start.record().map_err(err)?;
        f();
        end.record().map_err(err)?;
        end.synchronize().map_err(err)?;
        ms.push(start.elapsed_ms(&end).map_err(err)? as f64);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

/// A memory-bound row: milliseconds and GB/s for `bytes` moved per run.
fn bandwidth(ms: f64, bytes: f64) -> Value {
    json!({ "ms": ms, "gbs": bytes / (ms * 1e-3) / 1e9 })
}

/// Runs one row, turning an error or a panic into an error row, and prints it.
fn row(
    rows: &mut Vec<Value>,
    o: &Options,
    id: &str,
    op: &str,
    size: &str,
    f: impl FnOnce() -> Outcome,
) {
    if o.only
        .as_ref()
        .is_some_and(|only| !only.iter().any(|x| id.starts_with(x.as_str())))
    {
        return;
    }
    let outcome = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into())),
    };
    let mut v = json!({ "id": id, "op": op, "size": size });
    match outcome {
        Ok(Value::Object(m)) => {
            for (k, x) in m {
                v[k] = x;
            }
        }
        Ok(other) => v["value"] = other,
        Err(e) => v["error"] = json!(e),
    }
    let show = |k: &str, unit: &str| {
        v.get(k)
            .and_then(Value::as_f64)
            .map(|x| format!(" {x:.3} {unit}"))
    };
    println!(
        "{id:16} {op:40} {size:18}{}{}{}{}",
        show("ms", "ms").unwrap_or_default(),
        show("gbs", "GB/s").unwrap_or_default(),
        show("tflops", "TFLOP/s").unwrap_or_default(),
        v.get("error")
            .and_then(Value::as_str)
            .map(|e| format!(" ERROR: {e}"))
            .unwrap_or_default()
    );
    rows.push(v);
    // Saved after every row, so a run that dies later still leaves what it measured.
    if let Err(e) = save(o, rows) {
        eprintln!("gpu_ops: {e}");
    }
}

/// Writes the report so far to the `--json` file, if one was asked for.
fn save(o: &Options, rows: &[Value]) -> Result<(), String> {
    let Some(path) = &o.json else {
        return Ok(());
    };
    let mut report = o.head.clone();
    report["rows"] = json!(rows);
    let text = serde_json::to_string_pretty(&report).map_err(err)?;
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The memory-bound rows: copy, the `#[kernel]`, the same math from built-in ops, softmax,
/// layer norm and sums.
fn memory_rows(rows: &mut Vec<Value>, o: &Options, dev: Device) {
    let n = N_ELEMWISE;
    let bytes = (2 * n * 4) as f64;
    let x: Tensor<(usize,), f32> = Tensor::from_vec(random(n, 1, -3.0, 3.0), (n,), dev);
    let reps = o.reps;
    row(
        rows,
        o,
        "copy",
        "device-to-device copy (x.to_device)",
        "2^28 f32",
        || {
            let ms = median_ms(3, reps, || drop(x.to_device(dev)))?;
            Ok(bandwidth(ms, bytes))
        },
    );
    let copy_ms = rows
        .iter()
        .find(|r| r["id"] == "copy")
        .and_then(|r| r["ms"].as_f64());
    row(
        rows,
        o,
        "gelu_affine",
        "#[kernel] gelu_tanh(a*x+b)",
        "2^28 f32",
        || {
            let ms = median_ms(3, reps, || drop(x.map(gelu_affine::Op, &[A, B])))?;
            // The kernel's result against its native function, on a small input of the same kind.
            let small: Tensor<(usize,), f32> =
                Tensor::try_from_vec(random(4099, 9, -3.0, 3.0), (4099,), dev).map_err(err)?;
            let got = small
                .try_map(gelu_affine::Op, &[A, B])
                .map_err(err)?
                .to_vec();
            for (i, (&x, &g)) in small.to_vec().iter().zip(&got).enumerate() {
                let want = gelu_affine(x, A as f32, B as f32);
                if (g - want).abs() > 1e-5 * (1.0 + want.abs()) {
                    return Err(format!("element {i}: the GPU gives {g}, the CPU {want}"));
                }
            }
            let mut v = bandwidth(ms, bytes);
            if let Some(c) = copy_ms {
                v["copy_fraction"] = json!(c / ms);
            }
            Ok(v)
        },
    );
    let affine_ms = rows
        .iter()
        .find(|r| r["id"] == "gelu_affine")
        .and_then(|r| r["ms"].as_f64());
    row(
        rows,
        o,
        "model_gelu",
        "#[model] forward (x * a + b).gelu_tanh(), fused",
        "2^28 f32",
        || {
            let m = AffineGelu {};
            drop(m.forward_fused(&x));
            let before = rtx::launch_count(dev);
            drop(m.forward_fused(&x));
            let launches = rtx::launch_count(dev) - before;
            let ms = median_ms(3, reps, || drop(m.forward_fused(&x)))?;
            let mut v = bandwidth(ms, bytes);
            v["launches"] = json!(launches);
            if let Some(c) = copy_ms {
                v["copy_fraction"] = json!(c / ms);
            }
            if let Some(k) = affine_ms {
                v["of_kernel"] = json!(k / ms);
            }
            Ok(v)
        },
    );
    row(
        rows,
        o,
        "gelu_chain",
        "built-in ops (&x * a + b).gelu_tanh()",
        "2^28 f32",
        || {
            let ms = median_ms(3, reps, || drop((&x * A as f32 + B as f32).gelu_tanh()))?;
            Ok(bandwidth(ms, bytes))
        },
    );
    row(rows, o, "sum_all", "x.sum_all()", "2^28 f32", || {
        let ms = median_ms(3, reps, || drop(x.sum_all()))?;
        Ok(bandwidth(ms, (n * 4) as f64))
    });
    drop(x);

    let side = 8192;
    let m: Tensor<(usize, usize), f32> =
        Tensor::from_vec(random(side * side, 2, -4.0, 4.0), (side, side), dev);
    let mbytes = (side * side * 4) as f64;
    row(
        rows,
        o,
        "softmax",
        "x.softmax::<1>()",
        "8192x8192 f32",
        || {
            let ms = median_ms(3, reps, || drop(m.softmax::<1>()))?;
            Ok(bandwidth(ms, 2.0 * mbytes))
        },
    );
    row(
        rows,
        o,
        "sum_axis0",
        "x.sum::<0>()",
        "8192x8192 f32",
        || {
            let ms = median_ms(3, reps, || drop(m.sum::<0>()))?;
            Ok(bandwidth(ms, mbytes))
        },
    );
    row(
        rows,
        o,
        "sum_axis1",
        "x.sum::<1>()",
        "8192x8192 f32",
        || {
            let ms = median_ms(3, reps, || drop(m.sum::<1>()))?;
            Ok(bandwidth(ms, mbytes))
        },
    );
    drop(m);

    row(
        rows,
        o,
        "layer_norm",
        "nn::LayerNorm<4096> forward",
        "8192x4096 f32",
        || {
            const D: usize = 4096;
            let r = 8192;
            let mut ln = LayerNorm::<D>::new(dev);
            ln.weight = Tensor::from_vec(random(D, 3, 0.5, 1.5), (Const,), dev);
            ln.bias = Tensor::from_vec(random(D, 4, -0.5, 0.5), (Const,), dev);
            let x: Tensor<(usize, Const<D>), f32> =
                Tensor::from_vec(random(r * D, 5, -3.0, 3.0), (r, Const), dev);
            ln.try_forward(&x).map_err(err)?;
            let ms = median_ms(3, reps, || drop(ln.forward(&x)))?;
            Ok(bandwidth(ms, (2 * r * D * 4) as f64))
        },
    );
}

/// GEMM rows: rtx's `matmul` (through cuBLAS, output allocation included) and the same
/// product by cuBLAS called directly, on the same inputs.
fn gemm_rows(rows: &mut Vec<Value>, o: &Options, dev: Device) {
    cuda::set_allow_tf32(false);
    for n in [4096usize, 8192] {
        let flop = 2.0 * (n as f64).powi(3);
        let reps = if n > 4096 { o.reps.min(20) } else { o.reps };
        let (a32, b32) = (
            random(n * n, 10 + n as u64, -1.0, 1.0),
            random(n * n, 20 + n as u64, -1.0, 1.0),
        );
        let size = format!("{n}x{n}x{n}");
        let tflops = |ms: f64| json!({ "ms": ms, "tflops": flop / (ms * 1e-3) / 1e12 });
        row(
            rows,
            o,
            &format!("gemm_{n}_f32"),
            "a.matmul(&b), no TF32",
            &format!("{size} f32"),
            || {
                let a: Tensor<(usize, usize), f32> = Tensor::from_vec(a32.clone(), (n, n), dev);
                let b: Tensor<(usize, usize), f32> = Tensor::from_vec(b32.clone(), (n, n), dev);
                Ok(tflops(median_ms(3, reps, || drop(a.matmul(&b)))?))
            },
        );
        row(
            rows,
            o,
            &format!("cublas_{n}_f32"),
            "cublasGemmEx direct, no TF32",
            &format!("{size} f32"),
            || Ok(tflops(cublas::gemm(n, &a32, &b32, cublas::F32, reps)?)),
        );
        let (a16, b16) = (to_bf16(&a32), to_bf16(&b32));
        row(
            rows,
            o,
            &format!("gemm_{n}_bf16"),
            "a.matmul(&b), f32 accumulation",
            &format!("{size} bf16"),
            || {
                let a: Tensor<(usize, usize), bf16> = Tensor::from_vec(a16.clone(), (n, n), dev);
                let b: Tensor<(usize, usize), bf16> = Tensor::from_vec(b16.clone(), (n, n), dev);
                Ok(tflops(median_ms(3, reps, || drop(a.matmul(&b)))?))
            },
        );
        row(
            rows,
            o,
            &format!("cublas_{n}_bf16"),
            "cublasGemmEx direct, f32 accumulation",
            &format!("{size} bf16"),
            || {
                let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
                Ok(tflops(cublas::gemm(
                    n,
                    &bits(&a16),
                    &bits(&b16),
                    cublas::BF16,
                    reps,
                )?))
            },
        );
        let _ = cuda::empty_cache(0);
    }
}

/// cuBLAS called directly through cudarc, on its own stream and buffers: the ceiling rtx's
/// matmul is held to.
mod cublas {
    use cudarc::cublas::sys::{
        cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType,
    };
    use cudarc::cublas::{CudaBlas, result};
    use cudarc::driver::sys::CUevent_flags;
    use cudarc::driver::{CudaContext, DevicePtr, DeviceRepr};
    use std::ffi::c_void;

    pub const F32: cudaDataType = cudaDataType::CUDA_R_32F;
    pub const BF16: cudaDataType = cudaDataType::CUDA_R_16BF;

    fn e(what: &str, x: impl std::fmt::Debug) -> String {
        format!("{what}: {x:?}")
    }

    /// Median milliseconds of an `n`³ row-major product `a b` (both `n x n`, elements of
    /// `dt`) by `cublasGemmEx` with f32 compute, over `reps` calls after 3 warm-ups.
    pub fn gemm<T: DeviceRepr>(
        n: usize,
        a: &[T],
        b: &[T],
        dt: cudaDataType,
        reps: usize,
    ) -> Result<f64, String> {
        let ctx = CudaContext::new(0).map_err(|x| e("cuDevicePrimaryCtxRetain", x))?;
        let stream = ctx.new_stream().map_err(|x| e("cuStreamCreate", x))?;
        let blas = CudaBlas::new(stream.clone()).map_err(|x| e("cublasCreate", x))?;
        let da = stream.clone_htod(a).map_err(|x| e("copy a", x))?;
        let db = stream.clone_htod(b).map_err(|x| e("copy b", x))?;
        // SAFETY: the buffer is written by every product before it is read (never read here).
        let dc = unsafe { stream.alloc::<T>(n * n) }.map_err(|x| e("alloc c", x))?;
        let (pa, pb, pc) = {
            let (pa, _ga) = da.device_ptr(&stream);
            let (pb, _gb) = db.device_ptr(&stream);
            let (pc, _gc) = dc.device_ptr(&stream);
            (pa, pb, pc)
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        let ni = n as i32;
        let call = || {
            // SAFETY: a, b and c hold n * n elements of `dt` on this context; row-major C = A B
            // is column-major Cᵀ = Bᵀ Aᵀ, so B goes first and nothing is transposed; alpha and
            // beta are host f32 scalars, as the f32 compute type takes them.
            unsafe {
                result::gemm_ex(
                    *blas.handle(),
                    cublasOperation_t::CUBLAS_OP_N,
                    cublasOperation_t::CUBLAS_OP_N,
                    ni,
                    ni,
                    ni,
                    (&alpha as *const f32).cast::<c_void>(),
                    pb as *const c_void,
                    dt,
                    ni,
                    pa as *const c_void,
                    dt,
                    ni,
                    (&beta as *const f32).cast::<c_void>(),
                    pc as *mut c_void,
                    dt,
                    ni,
                    cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
                )
            }
            .map_err(|x| e("cublasGemmEx", x))
        };
        for _ in 0..3 {
            call()?;
        }
        stream.synchronize().map_err(|x| e("sync", x))?;
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = ctx.new_event(flags).map_err(|x| e("event", x))?;
        let end = ctx.new_event(flags).map_err(|x| e("event", x))?;
        let mut ms = Vec::with_capacity(reps);
        for _ in 0..reps {
            start.record(&stream).map_err(|x| e("record", x))?;
            call()?;
            end.record(&stream).map_err(|x| e("record", x))?;
            ms.push(start.elapsed_ms(&end).map_err(|x| e("elapsed", x))? as f64);
        }
        ms.sort_by(f64::total_cmp);
        Ok(ms[ms.len() / 2])
    }
}

/// The child process of the NVRTC rows: with the kernel cache in `dir`, the host time of
/// the first `gelu_affine` launch (to the GPU finishing it), then of an already loaded one.
fn nvrtc_child(dir: &Path) -> Outcome {
    let n = 1 << 20;
    let dev = Device::Cuda(0);
    // The context, the allocator's block for the output and the input exist before the clock
    // starts; none of this launches a kernel.
    let x: Tensor<(usize,), f32> =
        Tensor::try_from_vec(random(n, 6, -3.0, 3.0), (n,), dev).map_err(err)?;
    drop(Tensor::<(usize,), f32>::try_from_vec(vec![0.0; n], (n,), dev).map_err(err)?);
    cuda::synchronize(0).map_err(err)?;
    cuda::set_kernel_cache_dir(Some(dir.to_path_buf()));
    let t = Instant::now();
    let y = x.try_map(gelu_affine::Op, &[A, B]).map_err(err)?;
    cuda::synchronize(0).map_err(err)?;
    let first = t.elapsed().as_secs_f64() * 1e3;
    drop(y);
    Ok(json!({ "first_ms": first, "loaded_ms": loaded_launch_ms(&x)? }))
}

/// Host milliseconds of one launch of an already loaded kernel on `x`, to the GPU finishing
/// it: the median of 200.
fn loaded_launch_ms(x: &Tensor<(usize,), f32>) -> Result<f64, String> {
    let mut ms = Vec::with_capacity(200);
    for _ in 0..200 {
        let t = Instant::now();
        let y = x.try_map(gelu_affine::Op, &[A, B]).map_err(err)?;
        cuda::synchronize(0).map_err(err)?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        drop(y);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

/// Runs this binary as `--nvrtc-child dir` and returns its JSON.
fn child(dir: &Path) -> Outcome {
    let exe = std::env::current_exe().map_err(err)?;
    let out = std::process::Command::new(&exe)
        .arg("--nvrtc-child")
        .arg(dir)
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(last).map_err(|e| {
        format!(
            "the child printed no JSON ({e}); stdout: {text}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    match v.get("error").and_then(Value::as_str) {
        Some(e) => Err(format!("child: {e}")),
        None => Ok(v),
    }
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// The NVRTC rows: a first launch with an empty kernel cache (compile), a first launch in a
/// fresh process with that cache filled (disk hit), the same in this process after
/// forgetting loaded kernels, and an already loaded launch.
fn nvrtc_rows(rows: &mut Vec<Value>, o: &Options, dev: Device) {
    let dir = std::env::temp_dir().join(format!("rtx-gpu-ops-kernels-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        row(rows, o, "nvrtc", "kernel cache", "", || {
            Err(format!("{}: {e}", dir.display()))
        });
        return;
    }
    row(
        rows,
        o,
        "nvrtc_compile",
        "first launch, empty cache (NVRTC)",
        "gelu_affine, 2^20 f32",
        || {
            if entries(&dir) != 0 {
                return Err(format!("{} is not empty", dir.display()));
            }
            let v = child(&dir)?;
            if entries(&dir) == 0 {
                return Err("the first launch wrote no cache entry".into());
            }
            Ok(json!({ "ms": v["first_ms"] }))
        },
    );
    row(
        rows,
        o,
        "nvrtc_disk",
        "first launch in a new process, cache hit",
        "gelu_affine, 2^20 f32",
        || {
            let before = entries(&dir);
            let v = child(&dir)?;
            if entries(&dir) != before {
                return Err("the cache hit wrote a new entry: it compiled again".into());
            }
            Ok(json!({ "ms": v["first_ms"] }))
        },
    );
    row(
        rows,
        o,
        "nvrtc_reload",
        "after forget_loaded_kernels, cache hit",
        "gelu_affine, 2^20 f32",
        || {
            let n = 1 << 20;
            let x: Tensor<(usize,), f32> = Tensor::from_vec(random(n, 6, -3.0, 3.0), (n,), dev);
            drop(x.try_map(gelu_affine::Op, &[A, B]).map_err(err)?);
            cuda::set_kernel_cache_dir(Some(dir.clone()));
            let mut ms = Vec::new();
            for _ in 0..5 {
                cuda::forget_loaded_kernels(0).map_err(err)?;
                let t = Instant::now();
                let y = x.try_map(gelu_affine::Op, &[A, B]).map_err(err)?;
                cuda::synchronize(0).map_err(err)?;
                ms.push(t.elapsed().as_secs_f64() * 1e3);
                drop(y);
            }
            cuda::set_kernel_cache_dir(None);
            ms.sort_by(f64::total_cmp);
            Ok(json!({ "ms": ms[ms.len() / 2] }))
        },
    );
    row(
        rows,
        o,
        "nvrtc_loaded",
        "already loaded: launch to GPU done",
        "gelu_affine, 2^20 f32",
        || {
            let n = 1 << 20;
            let x: Tensor<(usize,), f32> = Tensor::from_vec(random(n, 6, -3.0, 3.0), (n,), dev);
            drop(x.try_map(gelu_affine::Op, &[A, B]).map_err(err)?);
            Ok(json!({ "ms": loaded_launch_ms(&x)? }))
        },
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // A slice: on a `Vec`, `Dataset::get` (in the prelude) would shadow the slice method.
    let args = args.as_slice();
    if args.get(1).is_some_and(|a| a == "--nvrtc-child") {
        let outcome = match args.get(2) {
            Some(d) => nvrtc_child(Path::new(d)),
            None => Err("--nvrtc-child needs a folder".into()),
        };
        let v = outcome.unwrap_or_else(|e| json!({ "error": e }));
        println!("{v}");
        return;
    }
    let mut o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("gpu_ops: {e}");
            std::process::exit(2);
        }
    };
    if !cuda::is_available() {
        println!("gpu_ops: no usable CUDA GPU here, nothing to time");
        if let Some(p) = &o.json {
            let v = json!({ "error": "no usable CUDA GPU", "rows": [] });
            if let Err(e) = std::fs::write(p, v.to_string()) {
                eprintln!("gpu_ops: {}: {e}", p.display());
                std::process::exit(1);
            }
        }
        return;
    }
    let dev = Device::Cuda(0);
    let info = cuda::gpu_info(0).ok();
    let nvrtc = cuda::nvrtc_version().ok();
    println!(
        "gpu_ops: {} (compute capability {:?}), NVRTC {:?}, median of {} runs",
        info.as_ref().map_or("?", |i| i.name.as_str()),
        info.as_ref().map(|i| i.compute_capability),
        nvrtc,
        o.reps
    );
    o.head = json!({
        "gpu": info.as_ref().map(|i| i.name.clone()),
        "compute_capability": info.as_ref().map(|i| [i.compute_capability.0, i.compute_capability.1]),
        "nvrtc": nvrtc.map(|(a, b)| format!("{a}.{b}")),
        "reps": o.reps,
        "complete": false,
    });
    let mut rows = Vec::new();
    memory_rows(&mut rows, &o, dev);
    let _ = cuda::empty_cache(0);
    gemm_rows(&mut rows, &o, dev);
    let _ = cuda::empty_cache(0);
    nvrtc_rows(&mut rows, &o, dev);
    o.head["complete"] = json!(true);
    if let Err(e) = save(&o, &rows) {
        eprintln!("gpu_ops: {e}");
        std::process::exit(1);
    }
}
