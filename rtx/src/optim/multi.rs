//! Multi-tensor optimizer steps on a GPU: while a step visits the model, each GPU parameter's
//! update is queued (its parameter, gradient and state handles) instead of launched, and at
//! the end of the step one launch per group updates every queued tensor in place. A group is
//! one element type on one GPU with the same step scalars (Adam's bias corrections depend on
//! each parameter's step count; SGD's first step differs), so a model of one element type
//! trained in lockstep costs one launch per step.
//!
//! Invariant: a queued parameter and its state are owned by the optimizer alone (taken through
//! `owned_storage`, as the CPU's in-place path does), so writing them in place changes no other
//! tensor; the queue is emptied by every `flush`, launched or not.

use crate::error::Result;
use rtx_backends::storage::{AdamSlot, SgdSlot, TableCache};
use rtx_backends::{AdamScalars, SgdScalars};
use rtx_backends::{Device, Layout, Storage};
use rtx_kernels::{DType, Float};
use std::any::Any;
use std::collections::HashMap;

/// The update a group runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Update {
    /// Adam/AdamW with these scalars; `true` under AMSGrad.
    Adam(AdamScalars, bool),
    /// SGD with these scalars.
    Sgd(SgdScalars),
}

/// One queued tensor: the parameter, its gradient as viewed, and its state (Adam: `m`, `v`
/// and `vmax` under AMSGrad; SGD: the momentum buffer when momentum is on).
pub(crate) struct Queued<E> {
    pub param: Storage<E>,
    pub grad: (Storage<E>, Layout),
    pub state: Vec<Storage<E>>,
}

/// The tensors of one group, of element type `E`.
struct Group<E> {
    update: Update,
    tensors: Vec<Queued<E>>,
}

/// A group whatever its element type.
trait AnyGroup {
    fn launch(&self, cache: &mut TableCache) -> Result<()>;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<E: Float> AnyGroup for Group<E> {
    fn launch(&self, cache: &mut TableCache) -> Result<()> {
        match self.update {
            Update::Adam(s, amsgrad) => {
                let slots: Vec<AdamSlot<'_, E>> = self
                    .tensors
                    .iter()
                    .map(|q| AdamSlot {
                        param: &q.param,
                        grad: (&q.grad.0, &q.grad.1),
                        m: &q.state[0],
                        v: &q.state[1],
                        vmax: if amsgrad { q.state.get(2) } else { None },
                    })
                    .collect();
                Storage::adam_update_multi(&slots, &s, cache)?;
            }
            Update::Sgd(s) => {
                let slots: Vec<SgdSlot<'_, E>> = self
                    .tensors
                    .iter()
                    .map(|q| SgdSlot {
                        param: &q.param,
                        grad: (&q.grad.0, &q.grad.1),
                        buf: q.state.first(),
                    })
                    .collect();
                Storage::sgd_update_multi(&slots, &s, cache)?;
            }
        }
        Ok(())
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Where a group's table cache is kept between steps: element type, device, and the group's
/// rank among this step's groups of that type and device (usually 0).
type CacheKey = (DType, Device, usize);

/// The queue of one optimizer, and its launch tables kept between steps.
#[derive(Default)]
pub(crate) struct GpuSteps {
    groups: Vec<(DType, Device, Box<dyn AnyGroup>)>,
    caches: HashMap<CacheKey, TableCache>,
}

impl GpuSteps {
    /// Queues one tensor's update on `device` (a GPU).
    pub(crate) fn queue<E: Float>(&mut self, device: Device, update: Update, q: Queued<E>) {
        for (dt, dev, g) in &mut self.groups {
            if *dt == E::DTYPE
                && *dev == device
                && let Some(g) = g.as_any_mut().downcast_mut::<Group<E>>()
                && g.update == update
            {
                g.tensors.push(q);
                return;
            }
        }
        let g = Group {
            update,
            tensors: vec![q],
        };
        self.groups.push((E::DTYPE, device, Box::new(g)));
    }

    /// Drops the queued updates without launching them (a step that failed part-way).
    pub(crate) fn discard(&mut self) {
        self.groups.clear();
    }

    /// Launches every queued group (one launch each) and empties the queue; stops at the
    /// first error.
    pub(crate) fn flush(&mut self) -> Result<()> {
        let groups = std::mem::take(&mut self.groups);
        let mut rank: HashMap<(DType, Device), usize> = HashMap::new();
        for (dt, dev, g) in groups {
            let r = rank.entry((dt, dev)).or_default();
            let cache = self.caches.entry((dt, dev, *r)).or_default();
            *r += 1;
            g.launch(cache)?;
        }
        Ok(())
    }
}
