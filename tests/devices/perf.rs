//! What ops cost on a GPU: launch counts, errors for ops without kernels, and the bandwidth of
//! the elementwise path against a device copy.

use super::*;
use rtx_backends::launch_count;

#[test]
fn each_op_is_one_launch() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("each_op_is_one_launch: skipped: no CUDA device: {why}");
            return;
        }
    };
    let dev = gpus[0];
    let x = Tensor::from_vec(
        values::<f32>(64 * 96, 12, -1.0, 1.0),
        (64usize, 96usize),
        dev,
    );
    let v = Tensor::from_vec(values::<f32>(96, 13, -1.0, 1.0), (96usize,), dev);
    let launches = |f: &dyn Fn()| {
        let before = launch_count(dev);
        f();
        launch_count(dev) - before
    };
    let cases: [(&str, &dyn Fn(), u64); 9] = [
        ("cast f32 to bf16", &|| drop(x.cast::<bf16>()), 1),
        ("gelu_tanh (fused elementwise)", &|| drop(x.gelu_tanh()), 1),
        ("exp of a transposed view", &|| drop(x.t().exp()), 1),
        ("add with a broadcast row", &|| drop(&x + &v), 1),
        ("gt into bool", &|| drop(x.gt(&x.t().t())), 1),
        ("dense copy of a transpose", &|| drop(x.t().contiguous()), 1),
        ("sum along the last axis", &|| drop(x.sum::<1>()), 1),
        ("max along the first axis", &|| drop(x.max::<0>()), 1),
        ("softmax along the last axis", &|| drop(x.softmax::<1>()), 1),
    ];
    for (name, f, want) in cases {
        // The first call compiles (or loads) the kernel; count the second.
        f();
        let got = launches(f);
        println!("{name}: {got} launch(es)");
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn integer_ops_without_kernels_are_errors_on_the_gpu() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("integer ops: skipped: no CUDA device: {why}");
            return;
        }
    };
    let x = Tensor::from_vec(vec![1i32, 2, 3], (3usize,), dev);
    let e = x.try_binary::<rtx::op::markers::Add, _>(&x).map(|_| ());
    let msg = e.map_err(|e| e.to_string()).err().unwrap_or_default();
    assert!(msg.contains("add") && msg.contains("cuda:0"), "{msg}");
}

#[test]
fn gelu_tanh_bandwidth_against_a_device_copy() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("bandwidth: skipped: no CUDA device: {why}");
            return;
        }
    };
    let n = 1usize << 28;
    let x = Tensor::from_vec(vec![0.5f32; n], (n,), dev);
    let ok = |r: rtx_backends::Result<()>| r.unwrap_or_else(|e| panic!("{e}"));
    let time = |f: &dyn Fn()| -> f64 {
        f();
        ok(cuda::synchronize(0));
        let (start, end) = match (cuda::Event::new(0), cuda::Event::new(0)) {
            (Ok(s), Ok(e)) => (s, e),
            (Err(e), _) | (_, Err(e)) => panic!("{e}"),
        };
        let reps = 10;
        ok(start.record());
        for _ in 0..reps {
            f();
        }
        ok(end.record());
        let ms = start.elapsed_ms(&end).unwrap_or_else(|e| panic!("{e}")) as f64;
        ms / 1e3 / reps as f64
    };
    let bytes = (2 * n * 4) as f64;
    let gelu = time(&|| drop(x.gelu_tanh()));
    let copy = time(&|| drop(x.to_device(dev)));
    println!(
        "2^28 f32: gelu_tanh {:.3} ms = {:.0} GB/s; device copy {:.3} ms = {:.0} GB/s; ratio {:.2}",
        gelu * 1e3,
        bytes / gelu / 1e9,
        copy * 1e3,
        bytes / copy / 1e9,
        copy / gelu
    );
    let side = 1usize << 14;
    let m = Tensor::from_vec(vec![0.5f32; n], (side, side), dev);
    let read = (n * 4) as f64;
    let sum = time(&|| drop(m.sum::<1>()));
    let softmax = time(&|| drop(m.softmax::<1>()));
    println!(
        "16384 x 16384 f32: row sums {:.3} ms = {:.0} GB/s read; softmax of rows {:.3} ms = {:.0} GB/s (read + write)",
        sum * 1e3,
        read / sum / 1e9,
        softmax * 1e3,
        2.0 * read / softmax / 1e9
    );
    let y = x.gelu_tanh().to_vec();
    assert!((y[n - 1] - 0.345_714).abs() < 1e-5, "{}", y[n - 1]);
}
