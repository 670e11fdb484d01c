//! The casts of a mixed-precision step ([`MixedStep`](super::MixedStep)), one dispatch per
//! pair of element types each way however many tensors the model has: the master weights into
//! the working model's own buffers ([`copy_weights`]), and the working gradients into buffers
//! of the master parameters' types ([`GradCast`]), both through
//! [`Storage::cast_multi`].
//!
//! Invariants: a working tensor keeps its buffer (written in place; one that shares its buffer
//! with another handle first gets a copy of its own, as an optimizer's update does), so a
//! graph that captured the copy writes and reads the same addresses on every replay; every
//! element converts exactly as [`Tensor::cast`] converts it.

use crate::autograd::Erased;
use crate::error::{Error, Result};
use crate::nn::{Module, TensorKind, Visitor, VisitorMut};
use crate::shape::{Shape, describe};
use crate::tensor::Tensor;
use rtx_backends::storage::TableCache;
use rtx_backends::{Device, Layout, Storage};
use rtx_kernels::{DType, Float, bf16, f16};
use std::any::Any;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

/// The copy's table caches, by (master, working) element type.
pub(super) type Caches = HashMap<(DType, DType), TableCache>;

/// GPU buffers a captured copy reads and writes, kept as long as its graph.
pub(super) type Keep = Vec<Box<dyn Any + Send + Sync>>;

/// The error of a copy between models that do not match.
fn mismatch(msg: String) -> Error {
    Error::BadArgument {
        op: "MixedStep",
        msg,
    }
}

/// Whether `l` views all of a storage of `len` elements in order (what the casts read).
fn whole(l: &Layout, len: usize) -> bool {
    l.contiguous_range() == Some(0..len)
}

/// A master tensor, by name.
struct Source {
    dtype: DType,
    device: Device,
    dims: Vec<usize>,
    shape: String,
    /// The `Tensor<S, E>` itself.
    tensor: Box<dyn Any + Send + Sync>,
}

/// The master model's tensors.
struct Sources(HashMap<String, Source>);

impl Visitor for Sources {
    fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, _: TensorKind) {
        let s = Source {
            dtype: E::DTYPE,
            device: t.device(),
            dims: t.dims().to_vec(),
            shape: describe(&t.shape()),
            tensor: Box::new(t.clone()),
        };
        self.0.insert(name.to_string(), s);
    }
}

/// The tensors of one pair of element types: the master sources, and the working buffers
/// taken out of their tensors for the launch (`None` once put back).
struct CopyGroup<A, B> {
    src: Vec<Arc<Storage<A>>>,
    dst: Vec<Option<Storage<B>>>,
}

/// A copy group whatever its element types, under its (master, working) element types.
type CopyGroups = ((DType, DType), Box<dyn AnyCopy>);

/// A copy group whatever its element types.
trait AnyCopy {
    fn launch(&mut self, cache: &mut TableCache) -> Result<()>;
    /// Adds handles of its GPU buffers to `keep`.
    fn keep(&self, keep: &mut Keep);
    /// The `i`-th working buffer (a `Storage<B>`), taken back.
    fn take_dst(&mut self, i: usize) -> Option<Box<dyn Any>>;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<A: Float, B: Float> AnyCopy for CopyGroup<A, B> {
    fn launch(&mut self, cache: &mut TableCache) -> Result<()> {
        let src: Vec<&Storage<A>> = self.src.iter().map(|s| &**s).collect();
        let mut dst: Vec<&mut Storage<B>> = self.dst.iter_mut().flatten().collect();
        Ok(Storage::cast_multi(&src, &mut dst, None, cache)?)
    }

    fn keep(&self, keep: &mut Keep) {
        for s in &self.src {
            if matches!(**s, Storage::Cuda(_)) {
                keep.push(Box::new((**s).clone()));
            }
        }
        for d in self.dst.iter().flatten() {
            if matches!(d, Storage::Cuda(_)) {
                keep.push(Box::new(d.clone()));
            }
        }
    }

    fn take_dst(&mut self, i: usize) -> Option<Box<dyn Any>> {
        let d = self.dst.get_mut(i)?.take()?;
        Some(Box::new(d))
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The working tensors, checked against the sources (nothing is changed).
struct Check<'a> {
    src: &'a HashMap<String, Source>,
    seen: usize,
    error: Option<Error>,
}

impl Check<'_> {
    fn fits<S: Shape, A: Float>(s: &Source) -> bool {
        s.tensor.downcast_ref::<Tensor<S, A>>().is_some()
    }
}

impl Visitor for Check<'_> {
    fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, _: TensorKind) {
        if self.error.is_some() {
            return;
        }
        let here = describe(&t.shape());
        let Some(s) = self.src.get(name) else {
            self.error = Some(mismatch(format!(
                "the master model has no tensor `{name}` ({here})"
            )));
            return;
        };
        self.seen += 1;
        let fits = match s.dtype {
            DType::F32 => Self::fits::<S, f32>(s),
            DType::F64 => Self::fits::<S, f64>(s),
            DType::F16 => Self::fits::<S, f16>(s),
            DType::BF16 => Self::fits::<S, bf16>(s),
            _ => false,
        };
        if !fits || s.dims != t.dims() {
            self.error = Some(mismatch(format!(
                "`{name}` is {} in the master model but {here} in the working model",
                s.shape
            )));
        } else if s.device != t.device() {
            self.error = Some(mismatch(format!(
                "`{name}` is on {} in the master model but on {} in the working model: keep \
                 both on one device",
                s.device,
                t.device()
            )));
        }
    }
}

/// The working tensors' buffers taken out into copy groups (or, for a master tensor that is
/// a view, cast into them at once).
struct Take<'a> {
    src: &'a HashMap<String, Source>,
    groups: Vec<CopyGroups>,
    /// Where each taken buffer went: its group and its place there.
    taken: HashMap<String, (usize, usize)>,
    error: Option<Error>,
}

impl Take<'_> {
    fn add<S: Shape, A: Float, B: Float>(
        &mut self,
        name: &str,
        s: &Source,
        t: &mut Tensor<S, B>,
    ) -> Result<()> {
        let s = s
            .tensor
            .downcast_ref::<Tensor<S, A>>()
            .ok_or_else(|| mismatch(format!("`{name}` changed type during the copy")))?;
        // The working tensor's own buffer: a copy first when another handle shares it.
        if t.storage_mut().is_none() {
            let copy = t.storage().contiguous(t.layout())?;
            let node = t.node().cloned();
            *t = Tensor::from_storage(copy, t.shape()).with_node(node);
        }
        if !whole(s.layout(), s.storage().len()) {
            // A view (rare for a parameter): cast on its own and copied in.
            let cast = s.storage().cast::<B>(s.layout())?;
            let l = Layout::contiguous(t.dims());
            let dst = t
                .storage_mut()
                .ok_or_else(|| mismatch(format!("the copy of `{name}` is shared")))?;
            return Ok(cast.copy_into(&l, dst)?);
        }
        let dst = t
            .owned_storage_mut()
            .ok_or_else(|| mismatch(format!("the copy of `{name}` is shared")))?;
        let dst = std::mem::replace(dst, Storage::Cpu(Vec::new()));
        let key = (A::DTYPE, B::DTYPE);
        let gi = match self.groups.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                let g: Box<dyn AnyCopy> = Box::new(CopyGroup::<A, B> {
                    src: Vec::new(),
                    dst: Vec::new(),
                });
                self.groups.push((key, g));
                self.groups.len() - 1
            }
        };
        let Some(g) = self.groups[gi]
            .1
            .as_any_mut()
            .downcast_mut::<CopyGroup<A, B>>()
        else {
            unreachable!("the group of a key has the key's types")
        };
        g.src.push(s.storage_arc().clone());
        g.dst.push(Some(dst));
        self.taken.insert(name.to_string(), (gi, g.dst.len() - 1));
        Ok(())
    }
}

impl VisitorMut for Take<'_> {
    fn visit_mut<S: Shape, E: Float>(&mut self, name: &str, t: &mut Tensor<S, E>, _: TensorKind) {
        if self.error.is_some() {
            return;
        }
        let Some(s) = self.src.get(name) else {
            return;
        };
        let r = match s.dtype {
            DType::F32 => self.add::<S, f32, E>(name, s, t),
            DType::F64 => self.add::<S, f64, E>(name, s, t),
            DType::F16 => self.add::<S, f16, E>(name, s, t),
            DType::BF16 => self.add::<S, bf16, E>(name, s, t),
            d => Err(mismatch(format!("`{name}` has the element type {d}"))),
        };
        if let Err(e) = r {
            self.error = Some(e);
        }
    }
}

/// The taken buffers, put back into their tensors.
struct PutBack<'a> {
    groups: &'a mut [CopyGroups],
    taken: &'a HashMap<String, (usize, usize)>,
}

impl VisitorMut for PutBack<'_> {
    fn visit_mut<S: Shape, E: Float>(&mut self, name: &str, t: &mut Tensor<S, E>, _: TensorKind) {
        let Some(&(g, i)) = self.taken.get(name) else {
            return;
        };
        let Some(d) = self.groups[g].1.take_dst(i) else {
            return;
        };
        if let (Ok(d), Some(slot)) = (d.downcast::<Storage<E>>(), t.owned_storage_mut()) {
            *slot = *d;
        }
    }
}

/// Sets every tensor of `working` to the same-named tensor of `master`, cast, writing the
/// working tensors' own buffers: one dispatch per pair of element types (f32 to bf16: one for
/// the whole model). `caches` keeps each launch's table; the returned handles are the GPU
/// buffers the launches read and wrote (a graph that captured them keeps them). On error
/// nothing has changed, but for a device error during the launches.
pub(super) fn copy_weights<M: Module, N: Module>(
    master: &M,
    working: &mut N,
    caches: &mut Caches,
) -> Result<Keep> {
    let mut src = Sources(HashMap::new());
    master.visit("", &mut src);
    let mut check = Check {
        src: &src.0,
        seen: 0,
        error: None,
    };
    working.visit("", &mut check);
    if let Some(e) = check.error {
        return Err(e);
    }
    if check.seen != src.0.len() {
        let names: std::collections::HashSet<String> =
            working.tensor_names().into_iter().map(|(n, _)| n).collect();
        let mut extra: Vec<&String> = src.0.keys().filter(|k| !names.contains(*k)).collect();
        extra.sort();
        return Err(mismatch(format!(
            "the master model has tensors the working model lacks: {extra:?}"
        )));
    }
    let mut take = Take {
        src: &src.0,
        groups: Vec::new(),
        taken: HashMap::new(),
        error: None,
    };
    working.visit_mut("", &mut take);
    let Take {
        mut groups,
        taken,
        error,
        ..
    } = take;
    let mut result = error.map_or(Ok(()), Err);
    let mut keep = Keep::new();
    if result.is_ok() {
        for (key, g) in &mut groups {
            result = g.launch(caches.entry(*key).or_default());
            if result.is_err() {
                break;
            }
            g.keep(&mut keep);
        }
    }
    // Always: a working tensor must not be left without its buffer.
    working.visit_mut(
        "",
        &mut PutBack {
            groups: &mut groups,
            taken: &taken,
        },
    );
    result.map(|()| keep)
}

/// The gradients of one master element type `E`: the working gradients (`W`, dense or
/// staged through a dense copy) and the buffers they are cast into.
struct GradGroup<W, E> {
    names: Vec<String>,
    src: Vec<(Arc<Storage<W>>, Layout)>,
    /// A dense copy of each gradient that is a view, refilled before every launch.
    staging: Vec<Option<Storage<W>>>,
    dst: Vec<Storage<E>>,
    /// The master gradient tensor over a buffer, per gradient (it knows the shape).
    #[allow(clippy::type_complexity)]
    make: Vec<Box<dyn Fn(Storage<E>) -> Erased + Send + Sync>>,
}

/// A gradient group whatever its master element type.
trait AnyGrad: Send {
    fn launch(&mut self, unscale: Option<&Storage<f32>>, cache: &mut TableCache) -> Result<()>;
    /// Tensors sharing the buffers (on a GPU, where a handle's clone shares its buffer).
    fn shared(&self, out: &mut HashMap<String, Erased>);
    /// The buffers, moved into tensors.
    fn into_grads(self: Box<Self>, out: &mut HashMap<String, Erased>);
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<W: Float, E: Float> AnyGrad for GradGroup<W, E> {
    fn launch(&mut self, unscale: Option<&Storage<f32>>, cache: &mut TableCache) -> Result<()> {
        for ((g, l), staged) in self.src.iter().zip(&mut self.staging) {
            if let Some(s) = staged {
                g.copy_into(l, s)?;
            }
        }
        let src: Vec<&Storage<W>> = self
            .src
            .iter()
            .zip(&self.staging)
            .map(|((g, _), staged)| staged.as_ref().unwrap_or(&**g))
            .collect();
        let mut dst: Vec<&mut Storage<E>> = self.dst.iter_mut().collect();
        Ok(Storage::cast_multi(&src, &mut dst, unscale, cache)?)
    }

    fn shared(&self, out: &mut HashMap<String, Erased>) {
        for ((n, d), make) in self.names.iter().zip(&self.dst).zip(&self.make) {
            out.insert(n.clone(), make(d.clone()));
        }
    }

    fn into_grads(self: Box<Self>, out: &mut HashMap<String, Erased>) {
        let GradGroup {
            names, dst, make, ..
        } = *self;
        for ((n, d), make) in names.into_iter().zip(dst).zip(make) {
            out.insert(n, make(d));
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The cast of a step's gradients: the working model's (element type `W`, by name) into fresh
/// buffers of the master parameters' types, multiplied by an unscale factor when given (f16's
/// loss scale), in one launch per master element type. Built once, it can be launched again
/// over the same buffers (a captured step's gradients, which its graph rewrites in place).
pub(super) struct GradCast<W> {
    groups: Vec<(DType, Box<dyn AnyGrad>)>,
    caches: HashMap<DType, TableCache>,
    device: Device,
    _w: PhantomData<W>,
}

impl<W: Float> GradCast<W> {
    /// The cast of `working`'s gradients to `master`'s parameters (by name), with its output
    /// buffers allocated (nothing is launched yet). Parameters without a gradient of type `W`
    /// get none.
    pub(super) fn new<M: Module>(master: &M, working: &HashMap<String, Erased>) -> Result<Self> {
        struct Plan<'a, W> {
            working: &'a HashMap<String, Erased>,
            groups: Vec<(DType, Box<dyn AnyGrad>)>,
            device: Device,
            error: Option<Error>,
            _w: PhantomData<W>,
        }
        impl<W: Float> Plan<'_, W> {
            fn add<S: Shape, E: Float>(&mut self, name: &str, g: &Tensor<S, W>) -> Result<()> {
                let dev = g.device();
                self.device = dev;
                let n = g.numel();
                let staging = match whole(g.layout(), g.storage().len()) {
                    true => None,
                    false => Some(Storage::<W>::uninit(dev, n)?),
                };
                let dst = Storage::<E>::uninit(dev, n)?;
                let shape = g.shape();
                let gi = match self.groups.iter().position(|(d, _)| *d == E::DTYPE) {
                    Some(i) => i,
                    None => {
                        let group: Box<dyn AnyGrad> = Box::new(GradGroup::<W, E> {
                            names: Vec::new(),
                            src: Vec::new(),
                            staging: Vec::new(),
                            dst: Vec::new(),
                            make: Vec::new(),
                        });
                        self.groups.push((E::DTYPE, group));
                        self.groups.len() - 1
                    }
                };
                let Some(group) = self.groups[gi]
                    .1
                    .as_any_mut()
                    .downcast_mut::<GradGroup<W, E>>()
                else {
                    unreachable!("the group of a type has that type")
                };
                group.names.push(name.to_string());
                group.src.push((g.storage_arc().clone(), *g.layout()));
                group.staging.push(staging);
                group.dst.push(dst);
                group.make.push(Box::new(move |s: Storage<E>| {
                    Arc::new(Tensor::<S, E>::from_storage(s, shape)) as Erased
                }));
                Ok(())
            }
        }
        impl<W: Float> Visitor for Plan<'_, W> {
            fn visit<S: Shape, E: Float>(
                &mut self,
                name: &str,
                _: &Tensor<S, E>,
                kind: TensorKind,
            ) {
                if kind != TensorKind::Parameter || self.error.is_some() {
                    return;
                }
                let Some(g) = self
                    .working
                    .get(name)
                    .and_then(|g| g.downcast_ref::<Tensor<S, W>>())
                else {
                    return;
                };
                if let Err(e) = self.add::<S, E>(name, g) {
                    self.error = Some(e);
                }
            }
        }
        let mut plan = Plan::<W> {
            working,
            groups: Vec::new(),
            device: Device::Cpu,
            error: None,
            _w: PhantomData,
        };
        master.visit("", &mut plan);
        if let Some(e) = plan.error {
            return Err(e);
        }
        Ok(GradCast {
            groups: plan.groups,
            caches: HashMap::new(),
            device: plan.device,
            _w: PhantomData,
        })
    }

    /// Casts every gradient into its buffer: one launch per master element type (plus a copy
    /// per gradient that is a view). `unscale` (one f32, read on the device) multiplies them.
    pub(super) fn launch(&mut self, unscale: Option<&Tensor<(), f32>>) -> Result<()> {
        let k = match unscale {
            Some(u) if u.layout().offset() != 0 => {
                return Err(mismatch("the unscale factor is a view".into()));
            }
            Some(u) => Some(u.storage()),
            None => None,
        };
        for (dt, g) in &mut self.groups {
            g.launch(k, self.caches.entry(*dt).or_default())?;
        }
        Ok(())
    }

    /// The master gradients, by name: tensors over the buffers [`GradCast::launch`] writes,
    /// so they see every later launch. Only on a GPU, where tensors share a buffer's handle.
    pub(super) fn shared(&self) -> Result<HashMap<String, Erased>> {
        if self.device == Device::Cpu {
            return Err(mismatch(
                "the gradients of a mixed step are shared with their cast only on a GPU".into(),
            ));
        }
        let mut out = HashMap::new();
        for (_, g) in &self.groups {
            g.shared(&mut out);
        }
        Ok(out)
    }

    /// The master gradients, by name, taking the buffers.
    pub(super) fn into_grads(self) -> HashMap<String, Erased> {
        let mut out = HashMap::new();
        for (_, g) in self.groups {
            g.into_grads(&mut out);
        }
        out
    }
}
