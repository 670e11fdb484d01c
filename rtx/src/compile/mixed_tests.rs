//! Unit tests of the mixed step's casts (`mixed_cast.rs`) on the CPU: each way is one
//! dispatch for a model of many tensors, gives the per-tensor casts' values bit for bit, and
//! leaves the working tensors in their own buffers. The whole step is tested in
//! `tests/integration/mixed_precision.rs`, and on a GPU in `tests/devices/compiled.rs`.

use super::mixed_cast::{Caches, GradCast, copy_weights};
use super::step::param_places;
use crate::autograd::Erased;
use crate::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

/// A model of tensors of odd sizes, one larger than a CPU chunk.
type Model<E> = Vec<Tensor<(usize, usize), E>>;

const SIZES: [(usize, usize); 6] = [(3, 5), (1, 5), (7, 2), (1, 2), (9, 4099), (1, 1)];

/// Values over many binades, ties of bf16 and f16 among them.
fn master() -> Model<f32> {
    SIZES
        .iter()
        .enumerate()
        .map(|(i, &(r, c))| {
            let x =
                Tensor::<(usize, usize), f32>::randn_with((r, c), 0.0, 30.0, i as u64, Device::Cpu);
            let v: Vec<f32> = x
                .to_vec()
                .into_iter()
                .enumerate()
                .map(|(j, v)| match j % 4 {
                    0 => 1.0 + (2 * (j % 7) + 1) as f32 / 256.0,
                    1 => v * 1e-6,
                    _ => v,
                })
                .collect();
            Tensor::from_vec(v, (r, c), Device::Cpu)
        })
        .collect()
}

fn working<E: Float>() -> Model<E> {
    SIZES
        .iter()
        .map(|&s| Tensor::zeros(s, Device::Cpu).requires_grad())
        .collect()
}

fn bits<E: Float>(t: &Tensor<(usize, usize), E>) -> Vec<u64> {
    t.to_vec().iter().map(|x| x.to_f64().to_bits()).collect()
}

fn copy_is_one_dispatch<E: Float>() {
    let m = master();
    let mut w = working::<E>();
    let places = param_places(&w);
    let before = crate::launch_count(Device::Cpu);
    copy_weights(&m, &mut w, &mut Caches::new()).unwrap();
    assert_eq!(
        crate::launch_count(Device::Cpu) - before,
        1,
        "{:?}",
        E::DTYPE
    );
    assert_eq!(
        param_places(&w),
        places,
        "the working tensors keep their buffers"
    );
    assert!(w.iter().all(|t| t.tracks_grad()));
    // The per-tensor route: `copy_from` casts each tensor on its own.
    let mut reference = working::<E>();
    let before = crate::launch_count(Device::Cpu);
    reference.copy_from(&m);
    assert!(crate::launch_count(Device::Cpu) - before >= SIZES.len() as u64);
    for (i, (a, b)) in w.iter().zip(&reference).enumerate() {
        assert_eq!(bits(a), bits(b), "{:?} tensor {i}", E::DTYPE);
    }
}

#[test]
fn the_weights_cast_is_one_dispatch_into_the_working_buffers() {
    copy_is_one_dispatch::<bf16>();
    copy_is_one_dispatch::<f16>();
}

#[test]
fn a_shared_working_tensor_gets_a_buffer_of_its_own_and_a_view_source_is_cast_alone() {
    let mut m = master();
    // A master tensor that is a view (transposed): cast on its own, into the working buffer.
    m[2] = m[2].t().contiguous().t();
    assert!(m[2].layout().contiguous_range().is_none());
    let mut w = working::<bf16>();
    let held = w[0].clone();
    let places = param_places(&w);
    let before = crate::launch_count(Device::Cpu);
    copy_weights(&m, &mut w, &mut Caches::new()).unwrap();
    // One multi cast, one copy for the shared tensor, a cast and a copy for the view.
    assert_eq!(crate::launch_count(Device::Cpu) - before, 4);
    let now = param_places(&w);
    assert_ne!(
        now[0], places[0],
        "the shared tensor moved to a buffer of its own"
    );
    assert_eq!(now[1..], places[1..]);
    assert!(
        held.to_vec().iter().all(|&x| x == bf16::ZERO),
        "the other handle is untouched"
    );
    for (i, (a, b)) in w.iter().zip(&m).enumerate() {
        assert_eq!(bits(a), bits(&b.cast::<bf16>()), "tensor {i}");
    }
}

#[test]
fn mismatched_models_are_errors_that_change_nothing() {
    let m = master();
    let mut w: Model<bf16> = working();
    w.pop();
    let e = copy_weights(&m, &mut w, &mut Caches::new()).unwrap_err();
    assert!(e.to_string().contains("lacks: [\"5\"]"), "{e}");
    let mut w: Model<bf16> = working();
    w[1] = Tensor::zeros((5, 1), Device::Cpu);
    let e = copy_weights(&m, &mut w, &mut Caches::new()).unwrap_err();
    assert!(e.to_string().contains("`1` is"), "{e}");
    assert!(w[0].to_vec().iter().all(|&x| x == bf16::ZERO));
}

/// Working gradients by name, one of them a transposed view.
fn working_grads<W: Float>() -> (Model<W>, HashMap<String, Erased>) {
    let g: Model<W> = master().iter().map(|t| t.cast::<W>()).collect();
    let mut by_name: HashMap<String, Erased> = HashMap::new();
    for (i, t) in g.iter().enumerate() {
        let t = if i == 4 {
            t.t().contiguous().t()
        } else {
            t.clone()
        };
        by_name.insert(i.to_string(), Arc::new(t));
    }
    (g, by_name)
}

fn grads_are_one_dispatch<W: Float>(unscale: Option<f32>) {
    let m = master();
    let (g, by_name) = working_grads::<W>();
    let u = unscale.map(|u| Tensor::<(), f32>::full((), u, Device::Cpu));
    let mut cast = GradCast::<W>::new(&m, &by_name).unwrap();
    let before = crate::launch_count(Device::Cpu);
    cast.launch(u.as_ref()).unwrap();
    // The multi cast, and the dense copy of the one view.
    assert_eq!(crate::launch_count(Device::Cpu) - before, 2);
    let out = cast.into_grads();
    assert_eq!(out.len(), SIZES.len());
    for (i, w) in g.iter().enumerate() {
        let got = out[&i.to_string()]
            .downcast_ref::<Tensor<(usize, usize), f32>>()
            .unwrap();
        // The per-tensor route mixed precision took before: cast, then multiply in f32.
        let want = match &u {
            Some(u) => w.cast::<f32>() * u,
            None => w.cast::<f32>(),
        };
        assert_eq!(bits(got), bits(&want), "{:?} gradient {i}", W::DTYPE);
    }
}

#[test]
fn the_gradients_cast_is_one_dispatch_with_or_without_unscaling() {
    grads_are_one_dispatch::<bf16>(None);
    grads_are_one_dispatch::<f16>(Some(1.0 / 65536.0));
    grads_are_one_dispatch::<f16>(Some(0.3));
}

#[test]
fn gradients_are_shared_with_their_cast_only_on_a_gpu() {
    let (_, by_name) = working_grads::<bf16>();
    let cast = GradCast::<bf16>::new(&master(), &by_name).unwrap();
    assert!(cast.shared().is_err());
}

#[test]
fn the_casts_state_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<GradCast<bf16>>();
    send::<Caches>();
    send::<super::mixed_cast::Keep>();
}
