//! The device trait on every built-in device: `rtx_backends::backend(dev)` moves bytes, copies
//! in place, fills, runs kernels and matrix products (with the bias epilogue) and captures as
//! the typed storage does, so a caller of the trait gets the same results on every device.

use super::*;
use rtx_backends::{Backend, Buffer, Gemm, Kernel, Layout, backend, bytes_of, vec_from_bytes};

/// All of `buf` as `f32`s.
fn read(b: &dyn Backend, buf: &Buffer) -> Vec<f32> {
    vec_from_bytes("read", &b.download(buf, 0..buf.len()).unwrap()).unwrap()
}

#[test]
fn the_device_trait_computes_what_the_storage_computes() {
    let x = values::<f32>(6, 31, -1.0, 1.0);
    let w = values::<f32>(12, 32, -1.0, 1.0);
    let bias = values::<f32>(4, 33, -1.0, 1.0);
    on_every_device::<f32>("backend trait", |dev| {
        let b = backend(dev).unwrap();
        let up = |v: &[f32]| b.upload(DType::F32, bytes_of(v)).unwrap();
        let (bx, bw, bb) = (up(&x), up(&w), up(&bias));
        assert_eq!((bx.len(), bx.dtype()), (6, DType::F32));
        let (lx, lw, lb) = (
            Layout::contiguous(&[2, 3]),
            Layout::contiguous(&[3, 4]),
            Layout::contiguous(&[4]),
        );
        let gemm = |bias| {
            let g = Gemm {
                lhs: &bx,
                lhs_layout: &lx,
                rhs: &bw,
                rhs_layout: &lw,
                bias,
            };
            read(
                &*b,
                &b.gemm(&g).expect("a built-in backend multiplies").unwrap(),
            )
        };
        let sum = b
            .launch(&Kernel::Binary {
                op: rtx::op::BinaryOp::Add,
                lhs: &bx,
                lhs_layout: &lx,
                rhs: &bx,
                rhs_layout: &lx.transpose(0, 1).transpose(0, 1),
            })
            .expect("a built-in backend adds")
            .unwrap();
        let exp = b
            .launch(&Kernel::Unary {
                op: rtx::op::UnaryOp::Exp,
                x: &bx,
                layout: &Layout::contiguous(&[3, 2]).transpose(0, 1),
            })
            .expect("a built-in backend has exp")
            .unwrap();
        // In-place copy of a range, and a fill.
        let part = b.fill(DType::F32, bytes_of(&[7.5f32]), 2).unwrap();
        let filled = read(&*b, &part);
        b.copy(&bx, 3..5, &part).unwrap();
        let bools = b.upload(DType::Bool, &[1, 0, 1]).unwrap();
        let bool_bytes = b.download(&bools, 1..3).unwrap();
        vec![
            (
                "round trip".into(),
                read(&*b, &bx).iter().map(|&v| v as f64).collect(),
            ),
            (
                "gemm".into(),
                gemm(None).iter().map(|&v| v as f64).collect(),
            ),
            (
                "gemm + bias".into(),
                gemm(Some((&bb, &lb))).iter().map(|&v| v as f64).collect(),
            ),
            (
                "add".into(),
                read(&*b, &sum).iter().map(|&v| v as f64).collect(),
            ),
            (
                "exp of a transpose".into(),
                read(&*b, &exp).iter().map(|&v| v as f64).collect(),
            ),
            ("fill".into(), filled.iter().map(|&v| v as f64).collect()),
            (
                "copy".into(),
                read(&*b, &part).iter().map(|&v| v as f64).collect(),
            ),
            (
                "bool bytes".into(),
                bool_bytes.iter().map(|&v| v as f64).collect(),
            ),
        ]
    });
    // The CPU's own figures, checked once against plain arithmetic.
    let b = backend(Device::Cpu).unwrap();
    let up = |v: &[f32]| b.upload(DType::F32, bytes_of(v)).unwrap();
    let (bx, bw) = (up(&x), up(&w));
    let g = Gemm {
        lhs: &bx,
        lhs_layout: &Layout::contiguous(&[2, 3]),
        rhs: &bw,
        rhs_layout: &Layout::contiguous(&[3, 4]),
        bias: None,
    };
    let got = read(&*b, &b.gemm(&g).unwrap().unwrap());
    for i in 0..2 {
        for j in 0..4 {
            let want: f32 = (0..3).map(|k| x[i * 3 + k] * w[k * 4 + j]).sum();
            assert!(
                (got[i * 4 + j] - want).abs() < 1e-5,
                "({i}, {j}): {} vs {want}",
                got[i * 4 + j]
            );
        }
    }
    let e = b.begin_capture().unwrap_err().to_string();
    assert!(e.contains("cpu") && e.contains("cannot capture"), "{e}");
    assert!(
        b.upload(DType::Bool, &[2]).is_err(),
        "a bool byte of 2 is refused"
    );
    assert!(
        b.upload(DType::F32, &[0, 0, 0]).is_err(),
        "3 bytes are not an f32"
    );
}

#[test]
fn a_gpu_captures_and_replays_through_the_trait() {
    let Ok(gpus) = gpus() else {
        println!("backend capture: skipped: no CUDA device");
        return;
    };
    for dev in gpus {
        let b = backend(dev).unwrap();
        let x = b.upload(DType::F32, bytes_of(&[1.0f32, 2.0])).unwrap();
        let out = b.fill(DType::F32, bytes_of(&[0.0f32]), 2).unwrap();
        let l = Layout::contiguous(&[2]);
        // Warm up: the first launch compiles the kernel, which a capture cannot.
        let add = Kernel::Binary {
            op: rtx::op::BinaryOp::Add,
            lhs: &x,
            lhs_layout: &l,
            rhs: &x,
            rhs_layout: &l,
        };
        b.launch(&add).unwrap().unwrap();
        b.begin_capture().unwrap();
        let sum = b.launch(&add).unwrap().unwrap();
        b.copy(&sum, 0..2, &out).unwrap();
        let graph = b.end_capture().unwrap();
        b.synchronize().unwrap();
        assert_eq!(
            read(&*b, &out),
            [0.0, 0.0],
            "{dev}: capture records, it does not run"
        );
        graph.replay().unwrap();
        b.synchronize().unwrap();
        assert_eq!(
            read(&*b, &out),
            [2.0, 4.0],
            "{dev}: the replay ran the captured add"
        );
    }
}
