//! The tensor-core intrinsics of `#[kernel]` on every device: one warp's `cp_async`,
//! `ldmatrix` and `mma_m16n8k16` against a plain product, and the tensor-core GEMMs written
//! with them (`rtx::kernels::matmul_tc`, and `matmul_wgmma` on Hopper's `wgmma`, with its
//! tiles copied by `cp_async` or by the tensor memory accelerator in `matmul_wgmma_tma`)
//! against the CPU's emulation of them and against a plain product.
//! Inputs are multiples of 1/8 small enough that every sum is exact in f32, so each device's
//! result is the exact product rounded once, whatever order the tensor cores add in.

use super::*;
use rtx::kernel::{self, Arg, LaunchConfig};
use rtx::kernels::{
    MATMUL_TC_THREADS, MATMUL_TC_TILE, MATMUL_WGMMA_COLS, MATMUL_WGMMA_ROWS, MATMUL_WGMMA_THREADS,
    matmul_tc, matmul_wgmma, matmul_wgmma_tma,
};

// ANCHOR: warp_mma
/// D = A B + 1/2 for A (16 x 16) and B (16 x 8), row-major: one warp copies both into shared
/// memory with `cp_async`, loads the fragments with `ldmatrix` (B transposed) and multiplies.
#[rtx::kernel]
fn warp_mma<T: Float>(a: &[T], b: &[T], d: &mut [T]) {
    #[shared]
    let sa: [u32; 128];
    #[shared]
    let sb: [u32; 64];
    let lane = thread_idx_x();
    // Lane l copies 16 bytes: A's row l / 2, half l % 2; B's row l.
    cp_async(&mut sa, lane * 4, a, lane * 8, 8);
    if lane < 16 {
        cp_async(&mut sb, lane * 4, b, lane * 8, 8);
    }
    cp_async_commit();
    cp_async_wait(0);
    sync_threads();
    let quad = lane / 8;
    let mut af = [0u32; 4];
    let mut bf = [0u32; 2];
    ldmatrix_x4(
        &mut af,
        0,
        &sa,
        ((quad % 2) * 8 + lane % 8) * 8 + (quad / 2) * 4,
    );
    ldmatrix_x2_trans(&mut bf, 0, &sb, ((quad % 2) * 8 + lane % 8) * 4);
    let mut acc = [0.5; 4];
    mma_m16n8k16(&mut acc, 0, &af, 0, &bf, 0);
    for i in 0..4 {
        d[(lane / 4 + (i / 2) * 8) * 8 + (lane % 4) * 2 + i % 2] = acc[i];
    }
}
// ANCHOR_END: warp_mma

/// Multiples of 1/8 in [-0.625, 0.625].
fn eighths(len: usize, seed: usize) -> Vec<f64> {
    (0..len)
        .map(|i| ((i * 7 + seed * 13) % 11) as f64 / 8.0 - 0.625)
        .collect()
}

fn plain_product(a: &[f64], b: &[f64], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

/// The `m x n` result of a GEMM kernel launched on `config` with `a` (`m x k`), `b` (of
/// `b_dims`: `k x n`, or `n x k` for a product by its transpose) and m, n and k, on `dev`.
fn launch_gemm<K: kernel::Simt, E: Float>(
    gemm: K,
    config: LaunchConfig,
    dev: Device,
    a64: &[f64],
    b64: &[f64],
    b_dims: (usize, usize),
    (m, n, k): (usize, usize, usize),
) -> Vec<f64> {
    let a: Tensor<(usize, usize), E> =
        Tensor::from_vec(a64.iter().map(|&x| E::from_f64(x)).collect(), (m, k), dev);
    let b: Tensor<(usize, usize), E> =
        Tensor::from_vec(b64.iter().map(|&x| E::from_f64(x)).collect(), b_dims, dev);
    let mut c: Tensor<(usize, usize), E> = Tensor::zeros((m, n), dev);
    // SAFETY: the GEMM kernels check every index against m, n and k, the tensors' sizes.
    unsafe {
        kernel::launch(
            gemm,
            config,
            &mut [
                Arg::input(&a),
                Arg::input(&b),
                Arg::output(&mut c),
                Arg::usize(m),
                Arg::usize(n),
                Arg::usize(k),
            ],
        )
    }
    .unwrap_or_else(|e| panic!("{e}"));
    f64s(&c)
}

fn tensor_core_case<E: Float>() {
    on_every_device::<E>("tensor-core intrinsics", |dev| {
        let mut out = Vec::new();
        let (a64, b64) = (eighths(256, 1), eighths(128, 2));
        let a: Tensor<(usize,), E> =
            Tensor::from_vec(a64.iter().map(|&x| E::from_f64(x)).collect(), (256,), dev);
        let b: Tensor<(usize,), E> =
            Tensor::from_vec(b64.iter().map(|&x| E::from_f64(x)).collect(), (128,), dev);
        let mut d: Tensor<(usize,), E> = Tensor::zeros((128,), dev);
        // SAFETY: one warp reads 256 and 128 elements and writes 128, the tensors' lengths.
        unsafe {
            kernel::launch(
                warp_mma::Op,
                LaunchConfig::new(1, 32),
                &mut [Arg::input(&a), Arg::input(&b), Arg::output(&mut d)],
            )
        }
        .unwrap_or_else(|e| panic!("{e}"));
        let want: Vec<f64> = plain_product(&a64, &b64, 16, 8, 16)
            .iter()
            .map(|x| x + 0.5)
            .collect();
        assert_eq!(f64s(&d), want, "warp_mma on {dev}");
        out.push(("warp_mma".to_string(), f64s(&d)));
        for (m, n, k) in [(130, 136, 72), (33, 40, 9), (256, 128, 512)] {
            let (a64, b64) = (eighths(m * k, 3), eighths(k * n, 4));
            let grid = (
                n.div_ceil(MATMUL_TC_TILE) as u32,
                m.div_ceil(MATMUL_TC_TILE) as u32,
            );
            let config = LaunchConfig::new(grid, MATMUL_TC_THREADS);
            let c = launch_gemm::<_, E>(matmul_tc::Op, config, dev, &a64, &b64, (k, n), (m, n, k));
            let want: Vec<f64> = plain_product(&a64, &b64, m, n, k)
                .into_iter()
                .map(|x| E::from_f64(x).to_f64())
                .collect();
            assert_eq!(c, want, "matmul_tc {m}x{n}x{k} on {dev}");
            out.push((format!("matmul_tc {m}x{n}x{k}"), c));
        }
        out
    });
}

#[test]
fn tensor_core_kernels_match_the_cpu() {
    tensor_core_case::<bf16>();
    tensor_core_case::<f16>();
}

/// D = A B^T for A (64 x 64) and B (128 x 64), row-major: one warpgroup stores both into
/// shared memory in the 128-byte swizzle with plain stores (chunk `c` of row `r` at chunk
/// `c ^ (r % 8)`), and multiplies them with four `wgmma_m64n128k16`, one per 16 of K.
#[rtx::kernel]
fn warpgroup_mma<T: Float>(a: &[T], b: &[T], d: &mut [T]) {
    #[shared]
    let sa: [u32; 2048];
    #[shared]
    let sb: [u32; 4096];
    let t = thread_idx_x();
    // Thread t stores words t, t + 128, ...: word w is row w / 32, element pair w % 32.
    for i in 0..48 {
        let w = t + 128 * i;
        let r = if w < 2048 { w / 32 } else { (w - 2048) / 32 };
        let pair = w % 32;
        let at = r * 32 + ((pair / 4) ^ (r % 8)) * 4 + pair % 4;
        if w < 2048 {
            sa[at] = pack2(a[r * 64 + 2 * pair], a[r * 64 + 2 * pair + 1]);
        } else {
            sb[at] = pack2(b[r * 64 + 2 * pair], b[r * 64 + 2 * pair + 1]);
        }
    }
    fence_proxy_async();
    sync_threads();
    let mut acc = [0.0; 64];
    wgmma_fence();
    for ks in 0..4 {
        wgmma_m64n128k16(&mut acc, 0, &sa, ks * 8, &sb, ks * 8);
    }
    wgmma_commit();
    wgmma_wait(0, &mut acc);
    let lane = t % 32;
    for i in 0..64 {
        let row = 16 * (t / 32) + lane / 4 + 8 * ((i / 2) % 2);
        let col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
        d[row * 128 + col] = acc[i];
    }
}

fn warpgroup_case<E: Float>(dev: Device) {
    let (a64, b64) = (eighths(64 * 64, 7), eighths(128 * 64, 8));
    let a: Tensor<(usize,), E> = Tensor::from_vec(
        a64.iter().map(|&x| E::from_f64(x)).collect(),
        (64 * 64,),
        dev,
    );
    let b: Tensor<(usize,), E> = Tensor::from_vec(
        b64.iter().map(|&x| E::from_f64(x)).collect(),
        (128 * 64,),
        dev,
    );
    let mut d: Tensor<(usize,), E> = Tensor::zeros((64 * 128,), dev);
    // SAFETY: one warpgroup reads 4096 and 8192 elements and writes 8192, the lengths.
    unsafe {
        kernel::launch(
            warpgroup_mma::Op,
            LaunchConfig::new(1, 128),
            &mut [Arg::input(&a), Arg::input(&b), Arg::output(&mut d)],
        )
    }
    .unwrap_or_else(|e| panic!("{e}"));
    let mut want = vec![0.0; 64 * 128];
    for i in 0..64 {
        for j in 0..128 {
            let dot: f64 = (0..64).map(|p| a64[i * 64 + p] * b64[j * 64 + p]).sum();
            want[i * 128 + j] = E::from_f64(dot).to_f64();
        }
    }
    assert_eq!(f64s(&d), want, "warpgroup_mma ({:?}) on {dev}", E::DTYPE);
}

/// Attention's two products on one warpgroup: S = A B^T for A (64 x 64) and B (128 x 64) with
/// `wgmma_m64n128k16` on K-major tiles, then O = P V with P = S rounded to `T` taken from the
/// accumulator's registers as A fragments, and V (128 x 128, row-major: N-major, two panels of
/// 64 columns) by `wgmma_rs_m64n128k16`.
#[rtx::kernel]
fn warpgroup_chain<T: Float>(a: &[T], b: &[T], v: &[T], o: &mut [T]) {
    #[shared]
    let sa: [u32; 2048];
    #[shared]
    let sb: [u32; 4096];
    #[shared]
    let sv: [u32; 8192];
    let t = thread_idx_x();
    // Word w of a 64-wide tile: row w / 32, element pair w % 32, its chunk swizzled by the row.
    for i in 0..48 {
        let w = t + 128 * i;
        let r = if w < 2048 { w / 32 } else { (w - 2048) / 32 };
        let pair = w % 32;
        let at = r * 32 + ((pair / 4) ^ (r % 8)) * 4 + pair % 4;
        if w < 2048 {
            sa[at] = pack2(a[r * 64 + 2 * pair], a[r * 64 + 2 * pair + 1]);
        } else {
            sb[at] = pack2(b[r * 64 + 2 * pair], b[r * 64 + 2 * pair + 1]);
        }
    }
    // V's panel p (columns 64 p..) holds its 128 rows of 64 at word 4096 p.
    for i in 0..64 {
        let w = t + 128 * i;
        let panel = w / 4096;
        let r = (w % 4096) / 32;
        let pair = w % 32;
        let at = panel * 4096 + r * 32 + ((pair / 4) ^ (r % 8)) * 4 + pair % 4;
        let col = panel * 64 + 2 * pair;
        sv[at] = pack2(v[r * 128 + col], v[r * 128 + col + 1]);
    }
    fence_proxy_async();
    sync_threads();
    let mut s = [0.0; 64];
    wgmma_fence();
    for ks in 0..4 {
        wgmma_m64n128k16(&mut s, 0, &sa, ks * 8, &sb, ks * 8);
    }
    wgmma_commit();
    wgmma_wait(0, &mut s);
    // Key step kk's A fragment is accumulator elements 8 kk..8 kk + 8, paired.
    let mut pf = [0u32; 32];
    for kk in 0..8 {
        for r in 0..4 {
            pf[kk * 4 + r] = pack2(s[kk * 8 + 2 * r], s[kk * 8 + 2 * r + 1]);
        }
    }
    let mut acc = [0.0; 64];
    wgmma_fence();
    for kk in 0..8 {
        // 16 keys are two 8-row groups, 512 words.
        wgmma_rs_m64n128k16(&mut acc, 0, &pf, kk * 4, &sv, kk * 512, 4096);
    }
    wgmma_commit();
    wgmma_wait(0, &mut acc);
    let lane = t % 32;
    for i in 0..64 {
        let row = 16 * (t / 32) + lane / 4 + 8 * ((i / 2) % 2);
        let col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
        o[row * 128 + col] = acc[i];
    }
}

fn chain_case<E: Float>(dev: Device) {
    let (a64, b64, v64) = (
        eighths(64 * 64, 3),
        eighths(128 * 64, 4),
        eighths(128 * 128, 9),
    );
    let on = |x: &[f64]| -> Tensor<(usize,), E> {
        Tensor::from_vec(x.iter().map(|&x| E::from_f64(x)).collect(), (x.len(),), dev)
    };
    let (a, b, v) = (on(&a64), on(&b64), on(&v64));
    let mut o: Tensor<(usize,), E> = Tensor::zeros((64 * 128,), dev);
    // SAFETY: one warpgroup reads 4096, 8192 and 16384 elements and writes 8192, the lengths.
    unsafe {
        kernel::launch(
            warpgroup_chain::Op,
            LaunchConfig::new(1, 128),
            &mut [
                Arg::input(&a),
                Arg::input(&b),
                Arg::input(&v),
                Arg::output(&mut o),
            ],
        )
    }
    .unwrap_or_else(|e| panic!("{e}"));
    // Every sum here is exact in f32 (multiples of 1/512 under 2^14), so only the two
    // roundings to E remain: of each score, and of each output.
    let mut want = vec![0.0; 64 * 128];
    for i in 0..64 {
        let p: Vec<f64> = (0..128)
            .map(|j| E::from_f64((0..64).map(|q| a64[i * 64 + q] * b64[j * 64 + q]).sum()).to_f64())
            .collect();
        for c in 0..128 {
            let dot: f64 = (0..128).map(|j| p[j] * v64[j * 128 + c]).sum();
            want[i * 128 + c] = E::from_f64(dot).to_f64();
        }
    }
    assert_eq!(f64s(&o), want, "warpgroup_chain ({:?}) on {dev}", E::DTYPE);
}

/// `c = a b^T` by `matmul_wgmma` on `dev`, for `b` stored `n x k`: held to the exact product
/// rounded once.
fn wgmma_product<E: Float>(dev: Device, m: usize, n: usize, k: usize) -> Vec<f64> {
    let (a64, b64) = (eighths(m * k, 5), eighths(n * k, 6));
    let grid = (
        n.div_ceil(MATMUL_WGMMA_COLS) as u32,
        m.div_ceil(MATMUL_WGMMA_ROWS) as u32,
    );
    let config = LaunchConfig::new(grid, MATMUL_WGMMA_THREADS);
    let got = launch_gemm::<_, E>(matmul_wgmma::Op, config, dev, &a64, &b64, (n, k), (m, n, k));
    let mut want = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k).map(|p| a64[i * k + p] * b64[j * k + p]).sum();
            want[i * n + j] = E::from_f64(dot).to_f64();
        }
    }
    assert_eq!(got, want, "matmul_wgmma {m}x{n}x{k} on {dev}");
    got
}

/// Hopper's `wgmma` on the CPU's emulation and on every GPU of compute capability 9.0 (the
/// instruction is Hopper's alone; other GPUs print a notice): the same exact products, with
/// ragged edges, several K tiles, and rows that are not 16-byte aligned.
#[test]
fn wgmma_gemm_matches_the_exact_product() {
    let sizes = [(130, 264, 72), (256, 512, 512), (33, 40, 9)];
    for (m, n, k) in sizes {
        wgmma_product::<bf16>(Device::Cpu, m, n, k);
    }
    wgmma_product::<f16>(Device::Cpu, 70, 48, 96);
    warpgroup_case::<bf16>(Device::Cpu);
    warpgroup_case::<f16>(Device::Cpu);
    chain_case::<bf16>(Device::Cpu);
    chain_case::<f16>(Device::Cpu);
    let Ok(gpus) = gpus() else {
        println!("wgmma GEMM on the GPU: skipped: no CUDA device");
        return;
    };
    for dev in gpus {
        let Device::Cuda(i) = dev else { continue };
        let cc = cuda::gpu_info(i).map(|g| g.compute_capability);
        if cc.as_ref().ok() != Some(&(9, 0)) {
            println!("wgmma GEMM on {dev}: skipped: compute capability {cc:?}, not Hopper's 9.0");
            continue;
        }
        for (m, n, k) in sizes {
            wgmma_product::<bf16>(dev, m, n, k);
        }
        wgmma_product::<f16>(dev, 70, 48, 96);
        warpgroup_case::<bf16>(dev);
        warpgroup_case::<f16>(dev);
        chain_case::<bf16>(dev);
        chain_case::<f16>(dev);
    }
}

/// `c = a b^T` by `matmul_wgmma_tma` on `dev` (tiles copied by the tensor memory accelerator
/// through tensor maps over `a` and `b`): held to the exact product rounded once.
fn wgmma_tma_product<E: Float>(dev: Device, m: usize, n: usize, k: usize) {
    let (a64, b64) = (eighths(m * k, 5), eighths(n * k, 6));
    let a: Tensor<(usize, usize), E> =
        Tensor::from_vec(a64.iter().map(|&x| E::from_f64(x)).collect(), (m, k), dev);
    let b: Tensor<(usize, usize), E> =
        Tensor::from_vec(b64.iter().map(|&x| E::from_f64(x)).collect(), (n, k), dev);
    let mut c: Tensor<(usize, usize), E> = Tensor::zeros((m, n), dev);
    let grid = (
        n.div_ceil(MATMUL_WGMMA_COLS) as u32,
        m.div_ceil(MATMUL_WGMMA_ROWS) as u32,
    );
    // SAFETY: the kernel stores only inside m x n; the copies read through maps of a's and
    // b's own shapes.
    unsafe {
        kernel::launch(
            matmul_wgmma_tma::Op,
            LaunchConfig::new(grid, MATMUL_WGMMA_THREADS),
            &mut [
                Arg::input(&a),
                Arg::input(&b),
                Arg::tensor_map(&a, 128),
                Arg::tensor_map(&b, 256),
                Arg::output(&mut c),
                Arg::usize(m),
                Arg::usize(n),
                Arg::usize(k),
            ],
        )
    }
    .unwrap_or_else(|e| panic!("{e}"));
    let mut want = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k).map(|p| a64[i * k + p] * b64[j * k + p]).sum();
            want[i * n + j] = E::from_f64(dot).to_f64();
        }
    }
    assert_eq!(f64s(&c), want, "matmul_wgmma_tma {m}x{n}x{k} on {dev}");
}

/// Hopper's tensor memory accelerator on the CPU's emulation and on every GPU of compute
/// capability 9.0 (others print a notice): the `wgmma` GEMM with its tiles copied by
/// `tma_load_2d`, ragged edges zero-filled by the copies, more K tiles than stages.
#[test]
fn tma_gemm_matches_the_exact_product() {
    let sizes = [(130, 264, 72), (256, 512, 512), (40, 16, 328)];
    let mut devices = vec![Device::Cpu];
    match gpus() {
        Ok(gpus) => {
            for dev in gpus {
                let Device::Cuda(i) = dev else { continue };
                let cc = cuda::gpu_info(i).map(|g| g.compute_capability);
                if cc.as_ref().ok() == Some(&(9, 0)) {
                    devices.push(dev);
                } else {
                    println!("TMA GEMM on {dev}: skipped: compute capability {cc:?}, not 9.0");
                }
            }
        }
        Err(_) => println!("TMA GEMM on the GPU: skipped: no CUDA device"),
    }
    for dev in devices {
        for (m, n, k) in sizes {
            wgmma_tma_product::<bf16>(dev, m, n, k);
        }
        wgmma_tma_product::<f16>(dev, 70, 48, 96);
    }
}
