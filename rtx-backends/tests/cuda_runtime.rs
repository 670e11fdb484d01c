//! The CUDA runtime on a real GPU: contexts, the caching allocator and its statistics, copies,
//! NVRTC compilation and the on-disk kernel cache, the launch counter, cuBLAS and cuBLASLt matrix
//! products
//! against a float64 CPU reference. Where no GPU exists (CI), each GPU test prints a notice and
//! passes as skipped; the tests of what a machine without CUDA must do run everywhere.
//!
//! Run on a GPU with `--test-threads=1`: the allocator statistics are per GPU, so tests that
//! allocate side by side would see each other's buffers.

use half::{bf16, f16};
use rtx_backends::cuda::{self, CudaStorage, Kernel, KernelOrigin, LaunchArgs, LaunchConfig};
use rtx_backends::{BackendError, Device, Layout, Storage, launch_count};
use rtx_kernels::{Element, Num};

/// Whether a GPU is here; prints why a test is skipped otherwise.
fn gpu(test: &str) -> bool {
    if cuda::is_available() {
        true
    } else {
        eprintln!("skipped {test}: no usable CUDA GPU here");
        false
    }
}

/// A reproducible stream of floats in [-1, 1) (xorshift64*).
fn randn(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let r = s.wrapping_mul(0x2545F4914F6CDD1D);
            (r >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

fn ok<T>(r: Result<T, BackendError>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn without_a_gpu_cuda_is_an_error_not_a_crash() {
    if cuda::is_available() {
        assert!(matches!(Device::best(), Device::Cuda(0)));
        return;
    }
    assert_eq!(Device::best(), Device::Cpu);
    assert_eq!(cuda::device_count(), 0);
    let e = Storage::from_vec(vec![1.0f32], Device::Cuda(0)).map(|_| ());
    assert!(
        matches!(e, Err(BackendError::CudaUnavailable { .. })),
        "{e:?}"
    );
    assert!(cuda::memory_stats(0).is_err());
    assert!(cuda::load_kernel(0, &AXPY).is_err());
}

#[test]
fn context_info_and_devices() {
    if !gpu("context_info_and_devices") {
        return;
    }
    let info = ok(cuda::gpu_info(0));
    println!(
        "{}: sm_{}{}, {} of {} bytes free",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.free_memory,
        info.total_memory
    );
    assert!(!info.name.is_empty() && info.compute_capability.0 >= 5);
    assert!(info.free_memory <= info.total_memory && info.total_memory > 0);
    assert_eq!(Device::Cuda(0).to_string(), "cuda:0");
    let n = cuda::device_count();
    let e = cuda::gpu_info(n + 7).map(|_| ()).map_err(|e| e.to_string());
    assert_eq!(
        e,
        Err(format!(
            "CUDA is unavailable: cuda:{} does not exist: the driver sees {n} GPU(s)",
            n + 7
        ))
    );
    ok(cuda::synchronize(0));
}

#[test]
fn allocator_reuses_freed_blocks_and_counts() {
    if !gpu("allocator_reuses_freed_blocks_and_counts") {
        return;
    }
    ok(cuda::empty_cache(0));
    let s0 = ok(cuda::memory_stats(0));
    assert_eq!(s0.cached_blocks, 0);
    assert_eq!(s0.reserved, s0.allocated);
    let a = ok(CudaStorage::<f32>::uninit(0, 1000));
    let s1 = ok(cuda::memory_stats(0));
    assert_eq!(
        s1.allocated - s0.allocated,
        4096,
        "4000 bytes round to a 4096 block"
    );
    assert_eq!(s1.requested - s0.requested, 4000);
    assert_eq!(s1.driver_allocs - s0.driver_allocs, 1);
    assert!(s1.peak_allocated >= s1.allocated);
    let first = a.device_ptr();
    drop(a);
    let s2 = ok(cuda::memory_stats(0));
    assert_eq!(s2.allocated, s0.allocated);
    assert_eq!(s2.cached_blocks, 1);
    assert_eq!(s2.reserved, s1.reserved, "a freed block stays reserved");
    assert!(s2.fragmentation() > 0.0);
    // Same size class (3900 bytes round to 4096): the same block, no driver call.
    let b = ok(CudaStorage::<u8>::uninit(0, 3900));
    let s3 = ok(cuda::memory_stats(0));
    assert_eq!(b.device_ptr(), first);
    assert_eq!(s3.cache_hits - s2.cache_hits, 1);
    assert_eq!(s3.driver_allocs, s2.driver_allocs);
    drop(b);
    ok(cuda::empty_cache(0));
    let s4 = ok(cuda::memory_stats(0));
    assert_eq!((s4.cached_blocks, s4.reserved), (0, s4.allocated));
    assert!(s4.driver_frees > s3.driver_frees);
    ok(cuda::reset_peak_stats(0));
    assert_eq!(ok(cuda::memory_stats(0)).peak_allocated, s4.allocated);
}

#[test]
fn out_of_memory_names_requested_and_free_bytes() {
    if !gpu("out_of_memory_names_requested_and_free_bytes") {
        return;
    }
    let petabyte = 1usize << 50;
    let e = CudaStorage::<u8>::uninit(0, petabyte).map(|_| ());
    let Err(e @ BackendError::OutOfMemory { .. }) = e else {
        panic!("expected out of memory, got {e:?}");
    };
    let s = e.to_string();
    println!("{s}");
    assert!(
        s.starts_with("cuda:0: out of memory: tried to allocate 1.00 PiB"),
        "{s}"
    );
    assert!(
        s.contains(&format!("({petabyte} bytes)")) && s.contains(" free of "),
        "{s}"
    );
    // The allocator still works after the failure.
    ok(CudaStorage::<u8>::uninit(0, 1 << 20));
}

fn round_trip<E: Element>(data: Vec<E>) {
    let n = data.len();
    let s = ok(Storage::from_vec(data.clone(), Device::Cuda(0)));
    assert_eq!(s.device(), Device::Cuda(0));
    let l = Layout::contiguous(&[n]);
    assert_eq!(ok(s.try_to_vec(&l)), data, "{}", E::DTYPE);
    // Device to device, then back to the host.
    let d = ok(s.to_device(&l, Device::Cuda(0)));
    assert_eq!(d.to_vec(&l), data);
    let c = ok(d.to_device(&l, Device::Cpu));
    assert_eq!(c.as_cpu_slice(), Some(&data[..]));
}

#[test]
fn copies_round_trip_every_dtype_and_view() {
    if !gpu("copies_round_trip_every_dtype_and_view") {
        return;
    }
    let x = randn(3 * 5 * 7, 1);
    round_trip(x.iter().map(|&v| v as f32).collect());
    round_trip(x.clone());
    round_trip(x.iter().map(|&v| f16::from_f64(v)).collect());
    round_trip(x.iter().map(|&v| bf16::from_f64(v)).collect());
    round_trip(x.iter().map(|&v| (v * 1e6) as i64).collect());
    round_trip(x.iter().map(|&v| (v * 1e6) as i32).collect());
    round_trip(x.iter().map(|&v| (v * 100.0 + 100.0) as u8).collect());
    round_trip(x.iter().map(|&v| v > 0.0).collect());
    round_trip(Vec::<f32>::new());
    // Views: a transpose, a narrowed slice and an offset, read on the host and made dense.
    let data: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let cpu = Storage::from_vec(data.clone(), Device::Cpu).unwrap_or_else(|e| panic!("{e}"));
    let gpu = ok(Storage::from_vec(data, Device::Cuda(0)));
    let base = Layout::contiguous(&[3, 5, 7]);
    for view in [
        base.transpose(0, 2),
        base.narrow(1, 1, 3),
        base.narrow(0, 2, 1),
        base.transpose(1, 2).narrow(2, 1, 2),
    ] {
        assert_eq!(gpu.to_vec(&view), cpu.to_vec(&view), "{view:?}");
        let dense = ok(gpu.contiguous(&view));
        let dl = Layout::contiguous(view.dims());
        assert_eq!(dense.to_vec(&dl), cpu.to_vec(&view), "{view:?}");
        let moved = ok(gpu.to_device(&view, Device::Cpu));
        assert_eq!(moved.to_vec(&dl), cpu.to_vec(&view));
    }
}

#[test]
fn ops_without_kernels_and_mixed_devices_are_errors() {
    if !gpu("ops_without_kernels_and_mixed_devices_are_errors") {
        return;
    }
    let l = Layout::contiguous(&[2, 2]);
    let g = ok(Storage::from_vec(
        vec![1.0f32, 2.0, 3.0, 4.0],
        Device::Cuda(0),
    ));
    let c = ok(Storage::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], Device::Cpu));
    // Integer `pow` has no kernel (argmax, which once had none, now has one).
    let gi = ok(Storage::from_vec(vec![1i64, 2, 3, 4], Device::Cuda(0)));
    let e = gi
        .binary::<rtx_kernels::op::markers::Pow>(&l, &gi, &l)
        .map(|_| ())
        .map_err(|e| e.to_string());
    assert_eq!(
        e,
        Err(
            "`pow` has no kernel on cuda:0 yet; move the tensor to the CPU with \
             `.to_device(Device::Cpu)`"
                .into()
        )
    );
    let arg = ok(g.arg_reduce(&l, 1, rtx_kernels::op::ReduceOp::ArgMax));
    assert_eq!(arg.to_vec(&Layout::contiguous(&[2])), vec![1, 1]);
    let e = g.matmul(&l, &c, &l).map(|_| ()).map_err(|e| e.to_string());
    assert_eq!(
        e,
        Err(
            "matmul: operands are on different devices (cuda:0 and cpu); move one with \
             `.to_device()`"
                .into()
        )
    );
    let i = ok(Storage::from_vec(vec![1i32, 2, 3, 4], Device::Cuda(0)));
    assert!(matches!(
        i.matmul(&l, &i, &l),
        Err(BackendError::NoKernel { .. })
    ));
}

const AXPY: Kernel = Kernel::new(
    "rtx_test_axpy",
    r#"extern "C" __global__ void rtx_test_axpy(float* y, const float* x, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}"#,
);

#[test]
fn nvrtc_compiles_caches_on_disk_and_rebuilds_corrupt_entries() {
    if !gpu("nvrtc_compiles_caches_on_disk_and_rebuilds_corrupt_entries") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("rtx-kernel-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    cuda::set_kernel_cache_dir(Some(dir.clone()));
    println!("NVRTC {:?}", ok(cuda::nvrtc_version()));
    ok(cuda::forget_loaded_kernels(0));
    assert_eq!(ok(cuda::load_kernel(0, &AXPY)), KernelOrigin::Compiled);
    assert_eq!(ok(cuda::load_kernel(0, &AXPY)), KernelOrigin::Loaded);
    let entries: Vec<_> = ok(
        std::fs::read_dir(&dir).map_err(|e| BackendError::BadArgument {
            op: "test",
            msg: e.to_string(),
        }),
    )
    .filter_map(|e| e.ok().map(|e| e.path()))
    .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    ok(cuda::forget_loaded_kernels(0));
    assert_eq!(ok(cuda::load_kernel(0, &AXPY)), KernelOrigin::DiskCache);
    // Corrupt one payload byte: the checksum catches it and the kernel is rebuilt.
    let mut bytes = std::fs::read(entry).unwrap_or_else(|e| panic!("{e}"));
    let mid = bytes.len() / 2 + 20;
    bytes[mid] ^= 0x5a;
    std::fs::write(entry, &bytes).unwrap_or_else(|e| panic!("{e}"));
    ok(cuda::forget_loaded_kernels(0));
    assert_eq!(ok(cuda::load_kernel(0, &AXPY)), KernelOrigin::Rebuilt);
    ok(cuda::forget_loaded_kernels(0));
    assert_eq!(ok(cuda::load_kernel(0, &AXPY)), KernelOrigin::DiskCache);
    // A different option is a different kernel (its own cache entry).
    let strict = AXPY.with_options(&["--fmad=false"]);
    assert_eq!(ok(cuda::load_kernel(0, &strict)), KernelOrigin::Compiled);

    // The launch point: one launch, one dispatch, and the right numbers.
    let n = 1000usize;
    let x: Vec<f32> = randn(n, 2).iter().map(|&v| v as f32).collect();
    let y: Vec<f32> = randn(n, 3).iter().map(|&v| v as f32).collect();
    let xs = ok(CudaStorage::from_slice(0, &x));
    let ys = ok(CudaStorage::from_slice(0, &y));
    let mut args = LaunchArgs::new();
    args.push(ys.device_ptr())
        .push(xs.device_ptr())
        .push(0.5f32)
        .push(n as u32);
    let before = launch_count(Device::Cuda(0));
    // SAFETY: the arguments match rtx_test_axpy's parameters; both buffers hold n floats.
    ok(unsafe { cuda::launch(0, &AXPY, LaunchConfig::for_elements(n, 128), &args) });
    assert_eq!(launch_count(Device::Cuda(0)) - before, 1);
    let out = ok(ys.to_host());
    // Launches of a loaded kernel take the fast path (no hashing, no compile): time the host.
    let zeros = ok(CudaStorage::from_slice(0, &vec![0.0f32; n]));
    let mut again = LaunchArgs::new();
    again
        .push(zeros.device_ptr())
        .push(xs.device_ptr())
        .push(0.0f32)
        .push(n as u32);
    let t = std::time::Instant::now();
    for _ in 0..1000 {
        // SAFETY: as above; `zeros` holds n floats and stays zero (a = 0).
        ok(unsafe { cuda::launch(0, &AXPY, LaunchConfig::for_elements(n, 128), &again) });
    }
    ok(cuda::synchronize(0));
    println!(
        "1000 launches of a loaded kernel: {:.2} us each (host, until the GPU finished)",
        t.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(launch_count(Device::Cuda(0)) - before, 1001);
    assert!(ok(zeros.to_host()).iter().all(|&v| v == 0.0));
    for i in 0..n {
        // NVRTC fuses the multiply-add by default: one rounding, as mul_add.
        let want = 0.5f32.mul_add(x[i], y[i]);
        assert!(
            (out[i] - want).abs() <= 1e-6 * want.abs().max(1.0),
            "element {i}: {} vs {want}",
            out[i]
        );
    }
    cuda::set_kernel_cache_dir(None);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nvrtc_errors_name_the_kernel_and_show_the_log() {
    if !gpu("nvrtc_errors_name_the_kernel_and_show_the_log") {
        return;
    }
    const BROKEN: Kernel = Kernel::new(
        "rtx_test_broken",
        r#"extern "C" __global__ void rtx_test_broken(float* y) { y[0] = not_declared_anywhere; }"#,
    );
    let e = cuda::load_kernel(0, &BROKEN).map_err(|e| e.to_string());
    let Err(msg) = e else {
        panic!("a broken kernel compiled: {e:?}");
    };
    println!("{msg}");
    assert!(
        msg.starts_with("compiling CUDA kernel `rtx_test_broken` for sm_"),
        "{msg}"
    );
    assert!(
        msg.contains("not_declared_anywhere") && msg.contains("rtx_test_broken.cu"),
        "{msg}"
    );
}

/// ‖a − b‖ / ‖b‖.
fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

/// The float64 product of views of host data, by the definition.
fn reference(a: &[f64], la: &Layout, b: &[f64], lb: &Layout) -> Vec<f64> {
    let av = Storage::from_vec(a.to_vec(), Device::Cpu).map(|s| s.to_vec(la));
    let bv = Storage::from_vec(b.to_vec(), Device::Cpu).map(|s| s.to_vec(lb));
    let (av, bv) = (ok(av), ok(bv));
    let (da, db) = (la.dims(), lb.dims());
    let r = da.len();
    let (m, k, n) = (da[r - 2], da[r - 1], db[r - 1]);
    let batch: usize = da[..r - 2].iter().product();
    let mut out = vec![0.0; batch * m * n];
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                out[(bi * m + i) * n + j] = (0..k)
                    .map(|p| av[(bi * m + i) * k + p] * bv[(bi * k + p) * n + j])
                    .sum();
            }
        }
    }
    out
}

/// Checks one GPU product of views against float64, for element type E, within `tol`, and
/// that it took `launches` dispatches (the GEMM, plus a dense copy per unreadable view).
fn check_gemm<E: Num>(
    tol: f64,
    launches: u64,
    (a, la): (&[f64], &Layout),
    (b, lb): (&[f64], &Layout),
) {
    // Round the inputs to E first, so the reference sees what the GPU sees.
    let ae: Vec<E> = a.iter().map(|&v| E::from_f64(v)).collect();
    let be: Vec<E> = b.iter().map(|&v| E::from_f64(v)).collect();
    let a64: Vec<f64> = ae.iter().map(|v| v.to_f64()).collect();
    let b64: Vec<f64> = be.iter().map(|v| v.to_f64()).collect();
    let want = reference(&a64, la, &b64, lb);
    let ga = ok(Storage::from_vec(ae, Device::Cuda(0)));
    let gb = ok(Storage::from_vec(be, Device::Cuda(0)));
    let before = launch_count(Device::Cuda(0));
    let c = ok(ga.matmul(la, &gb, lb));
    assert_eq!(
        launch_count(Device::Cuda(0)) - before,
        launches,
        "one cuBLAS call and the dense copies"
    );
    let got: Vec<f64> = c
        .to_vec(&Layout::contiguous(&[want.len()]))
        .iter()
        .map(|v| v.to_f64())
        .collect();
    let err = rel_err(&got, &want);
    println!(
        "{} {:?} x {:?}: relative error {err:.2e}",
        E::DTYPE,
        la.dims(),
        lb.dims()
    );
    assert!(
        err < tol,
        "{}: relative error {err:e} over {tol:e}",
        E::DTYPE
    );
}

fn gemm_cases<E: Num>(tol: f64) {
    let (bt, m, k, n) = (3, 67, 45, 31);
    let a = randn(bt * m * k, 10);
    let b = randn(bt * k * n, 11);
    // Dense batched.
    check_gemm::<E>(
        tol,
        1,
        (&a, &Layout::contiguous(&[bt, m, k])),
        (&b, &Layout::contiguous(&[bt, k, n])),
    );
    // Transposed views of both operands (read in place with the op flag).
    check_gemm::<E>(
        tol,
        1,
        (&a, &Layout::contiguous(&[bt, k, m]).transpose(1, 2)),
        (&b, &Layout::contiguous(&[bt, n, k]).transpose(1, 2)),
    );
    // A weight shared by the batch (broadcast, batch stride 0) and a plain 2-d product.
    let w = Layout::contiguous(&[k, n]).broadcast_to(&[bt, k, n]);
    let w = w.unwrap_or_else(|| panic!("broadcast"));
    check_gemm::<E>(tol, 1, (&a, &Layout::contiguous(&[bt, m, k])), (&b, &w));
    check_gemm::<E>(
        tol,
        1,
        (&a, &Layout::contiguous(&[m, k])),
        (&b, &Layout::contiguous(&[k, n])),
    );
    // A stepped slice (every other column), which cuBLAS cannot read: made dense first by
    // the strided copy kernel where the element type has one.
    let stepped = Layout::new(&[m, k / 2], &[k, 2], 0);
    let copies = E::DTYPE.is_float() as u64;
    check_gemm::<E>(
        tol,
        1 + copies,
        (&a, &stepped),
        (&b, &Layout::contiguous(&[k / 2, n])),
    );
}

#[test]
fn gemm_matches_a_float64_reference() {
    if !gpu("gemm_matches_a_float64_reference") {
        return;
    }
    for lib in [cuda::GemmLibrary::Cublas, cuda::GemmLibrary::CublasLt] {
        println!("{lib:?}");
        cuda::set_gemm_library(lib);
        cuda::set_allow_tf32(false);
        gemm_cases::<f32>(1e-5);
        gemm_cases::<f64>(1e-12);
        gemm_cases::<f16>(2e-3);
        gemm_cases::<bf16>(1e-2);
        // TF32 only when asked: still close, within TF32's 10-bit mantissa.
        cuda::set_allow_tf32(true);
        gemm_cases::<f32>(2e-3);
        cuda::set_allow_tf32(false);
    }
    cuda::set_gemm_library(cuda::GemmLibrary::Cublas);
}

#[test]
fn events_time_queued_work() {
    if !gpu("events_time_queued_work") {
        return;
    }
    let n = 512;
    let a = ok(Storage::from_vec(
        randn(n * n, 4).iter().map(|&v| v as f32).collect(),
        Device::Cuda(0),
    ));
    let l = Layout::contiguous(&[n, n]);
    // Warm up first: the first product loads cuBLAS and creates its handle.
    ok(a.matmul(&l, &a, &l));
    let (start, end) = (ok(cuda::Event::new(0)), ok(cuda::Event::new(0)));
    ok(start.record());
    for _ in 0..10 {
        ok(a.matmul(&l, &a, &l));
    }
    ok(end.record());
    ok(end.synchronize());
    let ms = ok(start.elapsed_ms(&end));
    println!("10 products of 512x512 f32: {ms:.3} ms");
    assert!(ms > 0.0 && ms < 10_000.0);
}
