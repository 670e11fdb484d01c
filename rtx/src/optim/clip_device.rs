//! Gradient clipping by global norm with the work on one GPU: per element type, one launch
//! sums the squares of every gradient into per-chunk partial sums; one launch reduces them to
//! the norm and the clipping coefficient, left in device memory; one launch per element type
//! writes the (scaled, when the coefficient is below 1) gradients; the norm is read back once
//! at the end.
//!
//! Invariant: the gradients are visited in the same order, with the same first-visit rule, as
//! [`super::clip`]'s host path, so each parameter's gradient is counted and scaled once, and
//! each scaled gradient goes back to the parameter it came from.

use super::clip::first_visit;
use crate::autograd::Gradients;
use crate::error::{Error, Result};
use crate::nn::{Module, TensorKind, Visitor};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::storage::{DeviceClip, TableCache};
use rtx_backends::{Device, Layout, Storage};
use rtx_kernels::{DType, Float};
use std::any::Any;
use std::collections::{HashSet, VecDeque};

/// The gradients of one element type, then their scaled copies.
struct Grads<E> {
    grads: Vec<(Storage<E>, Layout)>,
    scaled: VecDeque<Storage<E>>,
}

/// [`Grads`] whatever the element type.
trait AnyGrads {
    fn lens(&self) -> Vec<usize>;
    fn add(&self, clip: &mut DeviceClip, cache: &mut TableCache) -> Result<()>;
    fn scale(&mut self, clip: &DeviceClip, cache: &mut TableCache) -> Result<()>;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<E: Float> AnyGrads for Grads<E> {
    fn lens(&self) -> Vec<usize> {
        self.grads.iter().map(|(_, l)| l.numel()).collect()
    }

    fn add(&self, clip: &mut DeviceClip, cache: &mut TableCache) -> Result<()> {
        let gs: Vec<(&Storage<E>, &Layout)> = self.grads.iter().map(|(g, l)| (g, l)).collect();
        Ok(clip.add(&gs, cache)?)
    }

    fn scale(&mut self, clip: &DeviceClip, cache: &mut TableCache) -> Result<()> {
        let gs: Vec<(&Storage<E>, &Layout)> = self.grads.iter().map(|(g, l)| (g, l)).collect();
        self.scaled = clip.scale(&gs, cache)?.into();
        Ok(())
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The gradients of `model` in `grads`, grouped by element type, with the devices they are on.
struct Collect<'a> {
    grads: &'a Gradients,
    seen: HashSet<usize>,
    groups: Vec<(DType, Box<dyn AnyGrads>)>,
    devices: HashSet<Device>,
}

impl Visitor for Collect<'_> {
    fn visit<S: Shape, E: Float>(&mut self, _: &str, t: &Tensor<S, E>, kind: TensorKind) {
        if kind != TensorKind::Parameter || !first_visit(&mut self.seen, t) {
            return;
        }
        let Some(g) = self.grads.get(t) else {
            return;
        };
        self.devices.insert(g.device());
        let entry = (g.storage().clone(), *g.layout());
        for (dt, group) in &mut self.groups {
            if *dt == E::DTYPE
                && let Some(group) = group.as_any_mut().downcast_mut::<Grads<E>>()
            {
                group.grads.push(entry);
                return;
            }
        }
        let group = Grads {
            grads: vec![entry],
            scaled: VecDeque::new(),
        };
        self.groups.push((E::DTYPE, Box::new(group)));
    }
}

/// Puts each scaled gradient back in place of the one it was made from.
struct Replace<'a> {
    grads: &'a mut Gradients,
    seen: HashSet<usize>,
    groups: &'a mut [(DType, Box<dyn AnyGrads>)],
    err: Option<Error>,
}

impl Visitor for Replace<'_> {
    fn visit<S: Shape, E: Float>(&mut self, _: &str, t: &Tensor<S, E>, kind: TensorKind) {
        if kind != TensorKind::Parameter || !first_visit(&mut self.seen, t) {
            return;
        }
        let Some(g) = self.grads.get(t) else {
            return;
        };
        let next = self
            .groups
            .iter_mut()
            .filter(|(dt, _)| *dt == E::DTYPE)
            .find_map(|(_, group)| group.as_any_mut().downcast_mut::<Grads<E>>())
            .and_then(|group| group.scaled.pop_front());
        match next {
            Some(s) => self.grads.replace(t, Tensor::from_storage(s, g.shape())),
            None => {
                self.err.get_or_insert_with(|| Error::BadArgument {
                    op: "clip_grad_norm",
                    msg: "a gradient has no scaled copy: the model's parameters changed \
                          between visits"
                        .into(),
                });
            }
        }
    }
}

/// Clips on the GPU when every gradient is on one GPU: `Some(norm)`; `None` when they are
/// elsewhere (the host path clips them).
pub(super) fn clip_on_gpu(
    grads: &mut Gradients,
    model: &impl Module,
    max_norm: f64,
) -> Result<Option<f64>> {
    let mut c = Collect {
        grads,
        seen: HashSet::new(),
        groups: Vec::new(),
        devices: HashSet::new(),
    };
    crate::no_grad(|| model.visit("", &mut c));
    let (mut groups, devices) = (c.groups, c.devices);
    let device = match devices.iter().next() {
        Some(&d @ Device::Cuda(_)) if devices.len() == 1 => d,
        _ => return Ok(None),
    };
    let chunks = groups
        .iter()
        .map(|(_, g)| DeviceClip::chunks(&g.lens()))
        .sum();
    let mut clip = DeviceClip::new(device, chunks)?;
    // The tables change with the gradients every step; a fresh cache per call is enough.
    let mut caches: Vec<TableCache> = groups.iter().map(|_| TableCache::default()).collect();
    for ((_, g), cache) in groups.iter().zip(&mut caches) {
        g.add(&mut clip, cache)?;
    }
    clip.coefficient(max_norm)?;
    for ((_, g), cache) in groups.iter_mut().zip(&mut caches) {
        g.scale(&clip, cache)?;
    }
    let mut r = Replace {
        grads,
        seen: HashSet::new(),
        groups: &mut groups,
        err: None,
    };
    crate::no_grad(|| model.visit("", &mut r));
    if let Some(e) = r.err {
        return Err(e);
    }
    Ok(Some(clip.norm()?))
}
