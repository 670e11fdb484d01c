//! Mixed precision on every device: the multi-tensor casts (`Storage::cast_multi`) against the
//! CPU and against the single-tensor cast on the same GPU, bit for bit, in one launch, also
//! replayed from a captured graph; and a `MixedStep` in bf16 and f16 (captured from its second
//! run on a GPU) against the CPU.

use super::*;
use rtx::compile::MixedStep;
use rtx::compile::loss::cross_entropy;
use rtx_backends::Layout;
use rtx_backends::storage::TableCache;

/// Tensor lengths: odd ones, an empty one, and one of several of the launch's chunks.
const LENS: [usize; 7] = [1, 0, 33, 8191, 3, 20_001, 2];

/// Values of every class: random bit patterns of `A` (NaN, infinities, subnormals) among
/// values of ordinary size and values that tie when rounded to 16 bits.
fn sources<A: Float>(bits: impl Fn(u64) -> A, dev: Device) -> Vec<Storage<A>> {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    LENS.iter()
        .map(|&n| {
            let v: Vec<A> = (0..n)
                .map(|i| {
                    s ^= s >> 12;
                    s ^= s << 25;
                    s ^= s >> 27;
                    let w = s.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    match i % 3 {
                        0 => bits(w),
                        1 => A::from_f64(1.0 + (2 * (i % 9) + 1) as f64 / 256.0),
                        _ => A::from_f64((w >> 11) as f64 / (1u64 << 53) as f64 * 60.0 - 30.0),
                    }
                })
                .collect();
            Storage::from_vec(v, dev).unwrap()
        })
        .collect()
}

/// The bits of `s`, with every NaN the same (the CPU's NaN payloads come from Rust's `as`
/// and the `half` crate, a GPU's from the CUDA prelude).
fn canonical<E: Element>(s: &Storage<E>) -> Vec<u64> {
    s.to_vec(&Layout::contiguous(&[s.len()]))
        .into_iter()
        .map(|x| {
            let v = x.to_f64();
            if v.is_nan() { u64::MAX } else { v.to_bits() }
        })
        .collect()
}

/// `src` cast into fresh buffers in one call; the launches it took.
fn multi<A: Float, B: Float>(
    src: &[Storage<A>],
    scale: Option<f32>,
    dev: Device,
    cache: &mut TableCache,
) -> (Vec<Storage<B>>, u64) {
    let mut dst: Vec<Storage<B>> = src
        .iter()
        .map(|s| Storage::uninit(dev, s.len()).unwrap())
        .collect();
    let k = scale.map(|k| Storage::from_vec(vec![k], dev).unwrap());
    let refs: Vec<&Storage<A>> = src.iter().collect();
    let mut outs: Vec<&mut Storage<B>> = dst.iter_mut().collect();
    let before = rtx::launch_count(dev);
    Storage::cast_multi(&refs, &mut outs, k.as_ref(), cache).unwrap();
    (dst, rtx::launch_count(dev) - before)
}

/// One pair of types: the multi cast's bits (and, on a GPU, that it is one launch and equals
/// the single-tensor cast there bit for bit).
fn cast_case<A: Float, B: Float>(bits: impl Fn(u64) -> A + Copy, scale: Option<f32>) {
    let test = format!(
        "cast_multi {:?} to {:?} scale {scale:?}",
        A::DTYPE,
        B::DTYPE
    );
    same_on_every_device::<B>(&test, |dev| {
        let src = sources(bits, dev);
        let (dst, launches) = multi::<A, B>(&src, scale, dev, &mut TableCache::default());
        if dev != Device::Cpu {
            assert_eq!(
                launches,
                1,
                "{test} on {dev}: one launch for {} tensors",
                LENS.len()
            );
            for (t, (s, d)) in src.iter().zip(&dst).enumerate() {
                let l = Layout::contiguous(&[s.len()]);
                let single = match scale {
                    None => s.cast::<B>(&l).unwrap(),
                    Some(k) => {
                        let k = Storage::from_vec(vec![k], dev).unwrap();
                        let kl = Layout::contiguous(&[1]).broadcast_to(&[s.len()]).unwrap();
                        s.cast::<f32>(&l)
                            .unwrap()
                            .binary::<rtx::op::markers::Mul>(&l, &k, &kl)
                            .unwrap()
                            .cast::<B>(&l)
                            .unwrap()
                    }
                };
                // NaN payloads aside: the single cast first rounds its input through its own
                // type, which may quiet a NaN.
                assert_eq!(
                    canonical(d),
                    canonical(&single),
                    "{test} on {dev}: tensor {t} against `cast`"
                );
            }
        }
        dst.iter()
            .enumerate()
            .map(|(t, d)| (format!("tensor {t}"), canonical(d)))
            .collect()
    });
}

#[test]
fn multi_tensor_casts_match_the_cpu_and_the_single_cast_bit_for_bit() {
    let f32_bits = |w: u64| f32::from_bits((w >> 32) as u32);
    let bf16_bits = |w: u64| bf16::from_bits((w >> 48) as u16);
    let f16_bits = |w: u64| f16::from_bits((w >> 48) as u16);
    cast_case::<f32, bf16>(f32_bits, None);
    cast_case::<f32, f16>(f32_bits, None);
    cast_case::<f32, f32>(f32_bits, Some(0.5));
    cast_case::<bf16, f32>(bf16_bits, None);
    cast_case::<bf16, f32>(bf16_bits, Some(1.0 / 65536.0));
    cast_case::<f16, f32>(f16_bits, Some(0.3));
}

#[test]
fn pairs_without_a_multi_kernel_still_convert_like_the_cpu() {
    let f64_bits = |w: u64| f64::from_bits(w);
    same_on_every_device::<f16>("cast_multi f64 to f16", |dev| {
        let src = sources(f64_bits, dev);
        let (dst, _) = multi::<f64, f16>(&src, None, dev, &mut TableCache::default());
        dst.iter()
            .enumerate()
            .map(|(t, d)| (format!("tensor {t}"), canonical(d)))
            .collect()
    });
}

#[test]
fn a_captured_multi_cast_replays_over_new_values() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("captured cast_multi: skipped: no CUDA device: {why}");
            return;
        }
    };
    let f32_bits = |w: u64| f32::from_bits((w >> 32) as u32);
    let new: Vec<Vec<f32>> = LENS
        .iter()
        .enumerate()
        .map(|(t, &n)| values::<f32>(n, 90 + t as u64, -4.0, 4.0))
        .collect();
    for dev in gpus {
        let Device::Cuda(ordinal) = dev else {
            continue;
        };
        let mut src = sources(f32_bits, dev);
        let mut dst: Vec<Storage<bf16>> = src
            .iter()
            .map(|s| Storage::uninit(dev, s.len()).unwrap())
            .collect();
        let mut cache = TableCache::default();
        let cast = |src: &[Storage<f32>], dst: &mut [Storage<bf16>], cache: &mut TableCache| {
            let refs: Vec<&Storage<f32>> = src.iter().collect();
            let mut outs: Vec<&mut Storage<bf16>> = dst.iter_mut().collect();
            Storage::cast_multi(&refs, &mut outs, None, cache)
        };
        // Before capturing: the table is uploaded; while capturing it is found cached.
        cast(&src, &mut dst, &mut cache).unwrap();
        cuda::begin_capture(ordinal).unwrap();
        let captured = cast(&src, &mut dst, &mut cache);
        let graph = cuda::end_capture(ordinal).unwrap();
        captured.unwrap();
        assert_eq!(
            cache.uploads(),
            1,
            "one upload of the table, none while capturing"
        );
        for (s, v) in src.iter_mut().zip(&new) {
            let host = Storage::from_vec(v.clone(), dev).unwrap();
            host.copy_into(&Layout::contiguous(&[v.len()]), s).unwrap();
        }
        graph.replay().unwrap();
        for (t, (d, v)) in dst.iter().zip(&new).enumerate() {
            let got = d.to_vec(&Layout::contiguous(&[d.len()]));
            let want: Vec<bf16> = v.iter().map(|&x| x.cast()).collect();
            assert_eq!(got, want, "captured cast_multi on {dev}: tensor {t}");
        }
    }
}

#[model]
struct Net<E: Float> {
    fc1: Linear<12, 32, E>,
    fc2: Linear<32, 32, E>,
    fc3: Linear<32, 5, E>,
}

#[model]
impl<E: Float> Net<E> {
    fn forward(&self, x: &Tensor<(Const<8>, Const<12>), E>) -> Tensor<(Const<8>, Const<5>), E> {
        let h = self.fc1.forward(x);
        let h = h.gelu_tanh();
        let h = self.fc2.forward(&h);
        let h = h.relu();
        self.fc3.forward(&h)
    }
}

/// What [`mixed_steps`] gives: the master weights after, the losses, the last step's
/// launches, whether the step was captured, and the steps the loss scale skipped.
type Run = (Vec<f64>, Vec<f64>, u64, bool, u64);

/// Six steps of a `MixedStep` in `W` on `dev` (captured from the second on a GPU), fresh
/// inputs each step. SGD, whose update is linear in the gradients, keeps the GPU's rounding
/// differences (bf16 products rounded from other sums) as small in the weights as they are
/// in the gradients.
fn mixed_steps<W: Float>(dev: Device) -> Run {
    let mut master = Net::<f32>::init(&Device::Cpu, 5);
    master.move_to(dev);
    master.track_gradients();
    let mut working = Net::<W>::init(&Device::Cpu, 0);
    working.move_to(dev);
    working.track_gradients();
    let mut opt = Sgd::new(0.05);
    let mut step = MixedStep::new(cross_entropy);
    let (mut losses, mut launches) = (Vec::new(), 0);
    for k in 0..6u64 {
        let x = Tensor::from_vec(values::<W>(8 * 12, 60 + k, -1.0, 1.0), (Const, Const), dev);
        let y = Tensor::from_vec(indices(8, 70 + k, 5), (Const,), dev);
        let before = rtx::launch_count(dev);
        let loss = step
            .run(&mut master, &mut working, &mut opt, (x,), &y)
            .unwrap();
        launches = rtx::launch_count(dev) - before;
        losses.push(loss.item().to_f64());
    }
    let mut params = f64s(&master.fc1.weight);
    params.extend(f64s(&master.fc2.weight));
    params.extend(f64s(&master.fc3.weight));
    (
        params,
        losses,
        launches,
        step.is_captured(),
        step.skipped_steps(),
    )
}

fn mixed_case<W: Float>() {
    let (want, want_losses, _, captured, want_skipped) = mixed_steps::<W>(Device::Cpu);
    assert!(!captured);
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!(
                "mixed step ({:?}): skipped: no CUDA device: {why}",
                W::DTYPE
            );
            return;
        }
    };
    let (atol, _) = tolerance(W::DTYPE);
    for dev in gpus {
        let (got, losses, launches, captured, skipped) = mixed_steps::<W>(dev);
        println!(
            "mixed step ({:?}) on {dev}: {launches} launches a step; losses {losses:?}; \
             {skipped} steps skipped",
            W::DTYPE
        );
        assert!(captured, "a GPU step is captured from its second run");
        assert_eq!(
            skipped,
            want_skipped,
            "{:?}: the loss scale skipped",
            W::DTYPE
        );
        for (i, (g, w)) in losses.iter().zip(&want_losses).enumerate() {
            assert!(
                (g - w).abs() <= 4.0 * atol * (1.0 + w.abs()),
                "{:?} loss {i}: {g} vs {w}",
                W::DTYPE
            );
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= atol * (1.0 + w.abs()),
                "{:?} parameter {i}: {g} vs {w}",
                W::DTYPE
            );
        }
        if W::DTYPE == DType::BF16 {
            // Two input copies, the graph, the gradients' cast, the optimizer's update.
            assert!(launches <= 5, "{launches} launches");
        }
    }
}

#[test]
fn a_captured_mixed_step_matches_the_cpu() {
    mixed_case::<bf16>();
    mixed_case::<f16>();
}
