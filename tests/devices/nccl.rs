//! `rtx::dist` through the real NCCL path on GPU 0, world size 1 (NCCL 2.28 refuses two ranks
//! on one GPU): every collective in every element type it takes, with the results held to the
//! values they must have and left on the GPU; DDP's tape path averaging through it; a rank
//! that never joins makes init time out with an error naming the rank and the timeout; a
//! missing NCCL is a clear error. Where no GPU or no NCCL exists, each test prints
//! `skipped: ...` and passes.
use rtx::dist::{Backend, InitOptions, ProcessGroup, ReduceOp, init_with};
use rtx::prelude::*;
use rtx_backends::cuda;
use std::time::{Duration, Instant};

/// Why NCCL cannot run here (no GPU, or no library), or `None` when it can.
fn unavailable() -> Option<String> {
    if !cuda::is_available() {
        return Some("no CUDA device".into());
    }
    cuda::nccl_version().err().map(|e| format!("no NCCL: {e}"))
}

/// A one-rank NCCL group on GPU 0, or `None` after printing why the test is skipped.
fn group(test: &str) -> Option<ProcessGroup> {
    if let Some(why) = unavailable() {
        println!("{test}: skipped: {why}");
        return None;
    }
    let options = InitOptions::new(0, 1, "127.0.0.1", 0)
        .backend(Backend::Nccl(0))
        .timeout(Duration::from_secs(30));
    let pg = init_with(options).unwrap_or_else(|e| panic!("{test}: NCCL group: {e}"));
    assert_eq!(pg.backend_name(), "nccl", "{test}: the group's backend");
    Some(pg)
}

/// Six values every element type holds exactly (u8 takes their absolute values).
fn values<E: Element>() -> Vec<E> {
    let v: [f64; 6] = [1.5, -2.0, 3.25, 0.0, 7.0, -1.0];
    v.iter()
        .map(|&x| match E::DTYPE {
            DType::U8 => E::from_f64(x.abs().floor() + 1.0),
            d if !d.is_float() => E::from_f64(x.floor()),
            _ => E::from_f64(x),
        })
        .collect()
}

/// The tensor's elements as f64, after checking it stayed on GPU 0.
fn on_gpu<S: Shape, E: Element>(what: &str, t: &Tensor<S, E>) -> Vec<f64> {
    assert_eq!(
        t.device(),
        Device::Cuda(0),
        "{what}: the result left the GPU"
    );
    t.to_vec().into_iter().map(|x| x.to_f64()).collect()
}

/// Every collective on one element type, through the group's NCCL communicator. The input is
/// a transposed (strided) view, so the dense copy the group makes is exercised too.
fn every_collective<E: Element>(pg: &ProcessGroup) {
    let d = E::DTYPE;
    let dense: Tensor<Rank2<2, 3>, E> =
        Tensor::from_vec(values::<E>(), (Const, Const), Device::Cuda(0));
    let x = dense.t();
    let want: Vec<f64> = x.to_vec().into_iter().map(|v| v.to_f64()).collect();
    for op in ReduceOp::ALL {
        let mut t = x.clone();
        let r = pg.all_reduce(&mut t, op);
        if op == ReduceOp::Avg && !d.is_float() {
            assert!(r.is_err(), "{d:?}: an integer Avg must be refused");
            continue;
        }
        r.unwrap_or_else(|e| panic!("all_reduce {op:?} {d:?}: {e}"));
        // One rank: every reduction (the mean over one rank included) is the input itself.
        assert_eq!(on_gpu("all_reduce", &t), want, "all_reduce {op:?} {d:?}");
        assert_eq!(x.to_vec().len(), 6, "the input view is untouched");
    }
    let mut b = x.clone();
    pg.broadcast(&mut b, 0)
        .unwrap_or_else(|e| panic!("broadcast {d:?}: {e}"));
    assert_eq!(on_gpu("broadcast", &b), want, "broadcast {d:?}");
    assert!(
        pg.broadcast(&mut b, 1).is_err(),
        "no rank 1 in a group of one"
    );

    let all = pg
        .all_gather(&x)
        .unwrap_or_else(|e| panic!("all_gather {d:?}: {e}"));
    assert_eq!(all.len(), 1, "all_gather {d:?}: one tensor per rank");
    assert_eq!(on_gpu("all_gather", &all[0]), want, "all_gather {d:?}");

    let op = match d.is_float() {
        true => ReduceOp::Avg,
        false => ReduceOp::Sum,
    };
    let rs = pg
        .reduce_scatter(std::slice::from_ref(&x), op)
        .unwrap_or_else(|e| panic!("reduce_scatter {d:?}: {e}"));
    assert_eq!(on_gpu("reduce_scatter", &rs), want, "reduce_scatter {d:?}");
}

#[test]
fn nccl_every_collective_and_dtype() {
    let Some(pg) = group("nccl_every_collective_and_dtype") else {
        return;
    };
    let (major, minor, patch) = cuda::nccl_version().unwrap();
    println!("NCCL {major}.{minor}.{patch}");
    every_collective::<f32>(&pg);
    every_collective::<f64>(&pg);
    every_collective::<f16>(&pg);
    every_collective::<bf16>(&pg);
    every_collective::<i32>(&pg);
    every_collective::<i64>(&pg);
    every_collective::<u8>(&pg);
    let start = Instant::now();
    for _ in 0..10 {
        pg.barrier().unwrap();
    }
    println!("10 NCCL barriers: {:?}", start.elapsed());
}

/// A large buffer, so NCCL's kernels (not only its one-rank copy shortcut) carry real data.
#[test]
fn nccl_large_all_reduce_keeps_every_element() {
    let Some(pg) = group("nccl_large_all_reduce_keeps_every_element") else {
        return;
    };
    let n = 1 << 20;
    let v: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 - 500.0).collect();
    let mut t: Tensor<(usize,), f32> = Tensor::from_vec(v.clone(), (n,), Device::Cuda(0));
    pg.all_reduce(&mut t, ReduceOp::Sum).unwrap();
    assert_eq!(t.to_vec(), v);
}

#[test]
fn nccl_group_refuses_tensors_off_its_gpu() {
    let Some(pg) = group("nccl_group_refuses_tensors_off_its_gpu") else {
        return;
    };
    let mut t: Tensor<Rank1<2>> = Tensor::ones((Const,), Device::Cpu);
    let e = pg
        .all_reduce(&mut t, ReduceOp::Sum)
        .unwrap_err()
        .to_string();
    assert!(e.contains("NCCL") && e.contains("Cpu"), "{e}");
    // The group still works after refusing a bad argument.
    pg.barrier().unwrap();
}

/// World size 2 with only rank 0 running: NCCL's bootstrap waits for rank 1, and init must
/// give up after the group's timeout with an error naming this rank and the timeout.
#[test]
fn nccl_init_times_out_when_a_rank_never_joins() {
    if let Some(why) = unavailable() {
        println!("nccl_init_times_out_when_a_rank_never_joins: skipped: {why}");
        return;
    }
    let timeout = Duration::from_secs(3);
    let options = InitOptions::new(0, 2, "127.0.0.1", 0)
        .backend(Backend::Nccl(0))
        .timeout(timeout);
    let start = Instant::now();
    let e = init_with(options).expect_err("a group of two with one rank must not form");
    let took = start.elapsed();
    println!("init gave up after {took:?}: {e}");
    match &e {
        Error::Dist { rank, msg } => {
            assert_eq!(*rank, Some(0), "{e}");
            assert!(msg.contains("rank 0") && msg.contains("timeout"), "{e}");
        }
        other => panic!("expected Error::Dist, got {other}"),
    }
    assert!(took >= timeout, "gave up before the timeout: {took:?}");
    assert!(
        took < Duration::from_secs(25),
        "took {took:?}: the abort hung"
    );
}

/// Asking for NCCL where it cannot run is an error naming why, never a panic or a TCP group.
#[test]
fn nccl_unavailable_is_a_clear_error() {
    let Some(why) = unavailable() else {
        println!("nccl_unavailable_is_a_clear_error: skipped: NCCL works here");
        return;
    };
    let options = InitOptions::new(0, 1, "127.0.0.1", 0).backend(Backend::Nccl(0));
    let e = init_with(options)
        .expect_err("NCCL is unavailable")
        .to_string();
    println!("{why} -> {e}");
    assert!(e.contains("rank 0") && e.contains("NCCL"), "{e}");
}

/// DDP on a one-rank NCCL group, through the tape: the gradients, averaged by NCCL in buckets
/// small enough that each parameter has its own, equal the plain backward's bit for bit (an
/// average over one rank) and stay on the GPU.
#[test]
fn ddp_through_nccl_averages_like_the_plain_backward() {
    use rtx::dist::{Ddp, DdpOptions};
    let Some(pg) = group("ddp_through_nccl_averages_like_the_plain_backward") else {
        return;
    };
    let gpu = Device::Cuda(0);
    let mut m = Linear::<8, 4>::new(Device::Cpu, 3);
    m.move_to(gpu);
    m.track_gradients();
    let x: Tensor<Rank2<5, 8>> = Tensor::randn((Const, Const), 1, gpu);
    let plain = m.forward(&x).sum_all().backward();
    let want_w = on_gpu("plain weight gradient", &plain.get(&m.weight).unwrap());
    let b = m.bias.as_ref().unwrap();
    let want_b = on_gpu("plain bias gradient", &plain.get(b).unwrap());
    let options = DdpOptions::default().bucket_cap_bytes(64);
    let mut ddp = Ddp::with_options(m, pg, options).unwrap();
    assert_eq!(ddp.buckets().len(), 2, "a bucket per parameter");
    let loss = ddp.module().forward(&x).sum_all();
    let grads = ddp.backward(&loss).unwrap();
    let m = ddp.module();
    let got_w = on_gpu("DDP weight gradient", &grads.get(&m.weight).unwrap());
    let got_b = on_gpu(
        "DDP bias gradient",
        &grads.get(m.bias.as_ref().unwrap()).unwrap(),
    );
    assert_eq!(got_w, want_w);
    assert_eq!(got_b, want_b);
}

/// A small MLP for the captured DDP step: a weight used once per layer, three layers so the
/// buckets launch at different points of the backward.
#[model]
struct StepNet {
    fc1: Linear<12, 32>,
    fc2: Linear<32, 32>,
    fc3: Linear<32, 5>,
}

#[model]
impl StepNet {
    fn forward(&self, x: &Tensor<(usize, Const<12>)>) -> Tensor<(usize, Const<5>)> {
        let h = self.fc1.forward(x);
        let h = h.gelu_tanh();
        let h = self.fc2.forward(&h);
        let h = h.gelu_tanh();
        self.fc3.forward(&h)
    }
}

/// The squared error summed, with its static backward (no scalar operand: nothing may be
/// uploaded while a graph is captured).
#[allow(clippy::type_complexity)]
fn step_sse(
    y: &Tensor<(usize, Const<5>)>,
    t: &Tensor<(usize, Const<5>)>,
) -> (
    Tensor<()>,
    impl FnOnce(&Tensor<()>) -> Tensor<(usize, Const<5>)> + use<>,
) {
    let d = y - t;
    let loss = (&d * &d).sum_all();
    (loss, move |g: &Tensor<()>| &(&d + &d) * g)
}

/// Every parameter of the net, in order, as f32 bits.
fn step_net_bits(m: &StepNet) -> Vec<u32> {
    let values = [
        m.fc1.weight.to_vec(),
        m.fc2.weight.to_vec(),
        m.fc3.weight.to_vec(),
        m.fc1.bias.as_ref().unwrap().to_vec(),
        m.fc2.bias.as_ref().unwrap().to_vec(),
        m.fc3.bias.as_ref().unwrap().to_vec(),
    ];
    values.iter().flatten().map(|x| x.to_bits()).collect()
}

/// Six steps of a `TrainStep` (the first uncaptured, the second captured, the rest replays)
/// with Adam, optionally through a one-rank NCCL DDP group with small buckets; returns the
/// parameters' bits after each step, the losses, whether the step ran captured, and (under
/// DDP) how many buckets the graph launched during the backward.
fn captured_steps(pg: Option<ProcessGroup>) -> (Vec<Vec<u32>>, Vec<f32>, bool, Option<usize>) {
    use rtx::compile::TrainStep;
    use rtx::dist::{Ddp, DdpOptions};
    let gpu = Device::Cuda(0);
    let mut net = StepNet::init(&Device::Cpu, 7);
    net.move_to(gpu);
    net.track_gradients();
    let rows = 16;
    let batch = |k: u64| {
        let x: Tensor<(usize, Const<12>)> = Tensor::randn((rows, Const), 100 + k, gpu);
        let t: Tensor<(usize, Const<5>)> = Tensor::randn((rows, Const), 200 + k, gpu);
        (x, t)
    };
    let mut step = TrainStep::new(step_sse);
    let (mut params, mut losses) = (Vec::new(), Vec::new());
    let Some(pg) = pg else {
        let mut opt = Adam::new(1e-2);
        for k in 0..6 {
            let (x, t) = batch(k);
            let loss = step.run(&mut net, &mut opt, (x,), &t).unwrap();
            losses.push(loss.item());
            params.push(step_net_bits(&net));
        }
        return (params, losses, step.is_captured(), None);
    };
    // Buckets of at most 1 KiB: fc3's weight and bias, fc2's bias, each weight on its own...
    let options = DdpOptions::default().bucket_cap_bytes(1024);
    let mut ddp = Ddp::with_options(net, pg, options).unwrap();
    let buckets = ddp.buckets();
    println!("captured DDP step: {} buckets: {buckets:?}", buckets.len());
    assert!(buckets.len() >= 3, "{buckets:?}");
    let mut opt = ddp.optimizer(Adam::new(1e-2));
    for k in 0..6 {
        let (x, t) = batch(k);
        let loss = step
            .run(ddp.module_mut(), &mut opt, (x,), &t)
            .unwrap_or_else(|e| panic!("DDP step {k}: {e}"));
        losses.push(loss.item());
        params.push(step_net_bits(ddp.module()));
    }
    let overlapped = opt.overlapped_buckets();
    (params, losses, step.is_captured(), Some(overlapped))
}

/// DDP inside the captured training step on a one-rank NCCL group: the graph packs each bucket
/// on the GPU and all-reduces it with NCCL on a side stream during the static backward; an
/// average over one rank is exact, so every step's parameters equal the plain captured step's
/// bit for bit.
#[test]
fn ddp_captured_step_through_nccl_equals_the_plain_captured_step() {
    let test = "ddp_captured_step_through_nccl_equals_the_plain_captured_step";
    let Some(pg) = group(test) else {
        return;
    };
    let (want, want_losses, captured, _) = captured_steps(None);
    assert!(captured, "the plain step runs captured");
    let (got, losses, captured, overlapped) = captured_steps(Some(pg));
    assert!(captured, "the DDP step runs captured");
    let overlapped = overlapped.unwrap();
    println!("losses {losses:?}; buckets launched during the captured backward: {overlapped}");
    assert_eq!(losses, want_losses, "the losses");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(g == w, "step {k}: the DDP step's parameters differ");
    }
    assert!(
        overlapped >= 1,
        "no bucket was all-reduced while the captured backward ran"
    );
}
