//! Out of memory in the middle of a training step (GPU only): with a memory limit on the
//! caching allocator (`cuda::set_memory_limit`), a step fails once in the loss's forward, once
//! in the optimizer's update and once in the backward pass (`try_backward`), each time with the
//! out-of-memory error; with the limit lifted, training goes on and ends with bitwise the
//! parameters of a run that never failed.
//!
//! The limit holds for the whole GPU while it is set: run this file's test with
//! `--test-threads=1`, as the GPU suite is run, so no other test allocates meanwhile.

use super::*;
use rtx_backends::BackendError;

#[model]
struct OomNet {
    hidden: Linear<64, 256>,
    out: Linear<256, 10>,
}

/// The same data every step: 32 samples, 10 classes.
/// A batch: inputs and class labels.
type Batch = (Tensor<(usize, Const<64>)>, Tensor<(usize,), i64>);

fn batch(dev: Device) -> Batch {
    let x = Tensor::from_vec(values(32 * 64, 50, -1.0, 1.0), (32usize, Const), dev);
    let y = Tensor::from_vec(indices(32, 51, 10), (32usize,), dev);
    (x, y)
}

fn net(dev: Device) -> OomNet {
    let mut net = OomNet {
        hidden: Linear::new(Device::Cpu, 5),
        out: Linear::new(Device::Cpu, 6),
    };
    net.move_to(dev);
    net.track_gradients();
    net
}

/// The loss of one forward pass, or the loss's error.
fn loss(net: &OomNet, dev: Device) -> rtx::Result<Tensor<()>> {
    let (x, y) = batch(dev);
    let logits = net.out.forward(&net.hidden.forward(&x).relu());
    try_cross_entropy_with(&logits, &y, CrossEntropy::default())
}

fn params(net: &OomNet) -> Vec<Vec<u64>> {
    let mut out = vec![bits(&net.hidden.weight), bits(&net.out.weight)];
    out.extend(net.hidden.bias.iter().map(bits));
    out.extend(net.out.bias.iter().map(bits));
    out
}

fn state(opt: &Adam) -> Vec<(String, Vec<u64>)> {
    let s = opt.state_dict();
    let mut out: Vec<_> = s
        .tensors
        .into_iter()
        .map(|(k, t)| (k, t.values.iter().map(|v| v.to_bits()).collect()))
        .collect();
    out.extend(s.scalars.into_iter().map(|(k, v)| (k, vec![v.to_bits()])));
    out
}

/// Whether `e` is the out-of-memory error, as its message reads.
fn is_oom(e: &rtx::Error) -> bool {
    let msg = e.to_string();
    msg.contains("out of memory: tried to allocate") && msg.contains("free of")
}

#[test]
fn out_of_memory_mid_step_leaves_training_usable() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("out of memory mid-step: skipped: no CUDA device: {why}");
            return;
        }
    };
    for dev in gpus {
        let Device::Cuda(ordinal) = dev else { continue };
        // The uninterrupted run: five steps.
        let mut want = net(dev);
        let mut opt = Adam::new(1e-2);
        for _ in 0..5 {
            let grads = ok_or_panic(loss(&want, dev)).backward();
            opt.step(&mut want, &grads);
        }

        let mut model = net(dev);
        let mut opt = Adam::new(1e-2);
        for _ in 0..2 {
            let grads = ok_or_panic(loss(&model, dev)).backward();
            opt.step(&mut model, &grads);
        }

        // Step 3 fails in the loss's forward: no room for even its one-element output.
        let (x, y) = batch(dev);
        let logits = model.out.forward(&model.hidden.forward(&x).relu());
        let used = cuda::memory_stats(ordinal)
            .map(|s| s.allocated)
            .unwrap_or(0);
        set_limit(ordinal, Some(used));
        let failed = try_cross_entropy_with(&logits, &y, CrossEntropy::default());
        set_limit(ordinal, None);
        match failed {
            Err(e) => assert!(is_oom(&e), "expected out of memory, got: {e}"),
            Ok(_) => panic!("the loss allocated past a limit of {used} bytes"),
        }
        drop(logits);
        // Step 3 again, without a limit.
        let grads = ok_or_panic(loss(&model, dev)).backward();
        opt.step(&mut model, &grads);

        // Step 4 fails in the optimizer, after the first parameter's update was computed:
        // room for the hidden weight's new value and moments (3 x 64 KiB) and one more
        // 1 KiB block, and the hidden bias needs three.
        let grads = ok_or_panic(loss(&model, dev)).backward();
        let (before, before_state) = (params(&model), state(&opt));
        let used = cuda::memory_stats(ordinal)
            .map(|s| s.allocated)
            .unwrap_or(0);
        // GPU updates run in place, so a step allocates only to copy a parameter someone else
        // holds (as a forward graph kept alive would). With both weights held, the limit leaves
        // room for the first copy only: the step fails at `out.weight`, after `hidden.weight`'s
        // update was queued.
        let held = (model.hidden.weight.clone(), model.out.weight.clone());
        set_limit(ordinal, Some(used + 256 * 64 * 4 + 1024));
        let failed = opt.try_step(&mut model, &grads);
        set_limit(ordinal, None);
        drop(held);
        match failed {
            Err(e) => assert!(is_oom(&e), "expected out of memory, got: {e}"),
            Ok(()) => panic!("the optimizer step fit under the limit"),
        }
        assert!(params(&model) == before, "a failed step changed parameters");
        assert!(
            state(&opt) == before_state,
            "a failed step changed the state"
        );
        // The same gradients again, without a limit.
        opt.step(&mut model, &grads);
        drop(grads);

        // Step 5 fails in the backward pass: the forward ran, and its graph stays alive with the
        // loss, so the gradients (64 KiB for the hidden weight alone) are all new blocks. The
        // limit counts live blocks (`allocated`), not the cache, and leaves room for the
        // loss's seed gradient (one 512-byte block), so the failure comes from a backward rule.
        let step5 = ok_or_panic(loss(&model, dev));
        let (before, before_state) = (params(&model), state(&opt));
        let used = cuda::memory_stats(ordinal)
            .map(|s| s.allocated)
            .unwrap_or(0);
        set_limit(ordinal, Some(used + 1024));
        let failed = step5.try_backward();
        set_limit(ordinal, None);
        match failed {
            Err(e) => {
                assert!(is_oom(&e), "expected out of memory, got: {e}");
                // The seed gradient is one f32 and fits; the first rule, cross entropy's, asks
                // for its [32, 10] input gradient (1280 bytes) and does not.
                if let rtx::Error::Backend(BackendError::OutOfMemory { requested, .. }) = &e {
                    assert!(*requested > 4, "the seed gradient failed, not a rule: {e}");
                }
            }
            Ok(g) => panic!(
                "the backward pass ({} gradients) fit in 1 KiB over the {used} bytes live",
                g.len()
            ),
        }
        assert!(
            params(&model) == before,
            "a failed backward changed parameters"
        );
        assert!(
            state(&opt) == before_state,
            "a failed backward changed the state"
        );
        // The same loss again, without a limit: the failed pass left its graph as it was.
        let grads = ok_or_panic(step5.try_backward());
        drop(step5);
        opt.step(&mut model, &grads);
        assert!(
            params(&model) == params(&want),
            "after the failures, training on {dev} did not match the uninterrupted run"
        );
        println!("out of memory mid-step on {dev}: all three failures recovered");
    }
}

fn set_limit(ordinal: usize, limit: Option<usize>) {
    if let Err(e) = cuda::set_memory_limit(ordinal, limit) {
        panic!("set_memory_limit: {e}");
    }
}

#[track_caller]
fn ok_or_panic<T>(r: rtx::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}
