//! What every model can do, written once against [`Module`]: summaries, train and eval modes,
//! freezing, moving between devices and copying weights (with a dtype change) from another
//! model. `#[model]` emits only the traversal; these come from [`ModelExt`], implemented for
//! every [`Module`].
//!
//! **Freezing.** A parameter is frozen when its tensor does not track gradients: a frozen
//! parameter records nothing in the forward pass, gets no gradient from `backward`, and an
//! optimizer skips it (optimizers update only parameters that track gradients, and re-leaf the
//! updated tensor, so the frozen state survives steps). This is PyTorch's
//! `requires_grad_(False)`, with no extra state in the model: freeze a part by calling
//! [`ModelExt::freeze`] on that field (`model.encoder.freeze()`). A freshly built model tracks
//! nothing until [`Module::track_gradients`] (or [`ModelExt::unfreeze`]) is called, so call that
//! first and freeze afterwards.
//!
//! **Element types.** A struct's field types fix its element type, so a model cannot change
//! dtype in place. Make the struct generic over `E: Float`, build the other instantiation
//! (`Net::<bf16>::new(..)`), and fill it with [`ModelExt::copy_from`], which casts each tensor.

use super::module::{Module, TensorKind, Visitor, VisitorMut};
use crate::error::{Result, ok};
use crate::shape::{Shape, describe};
use crate::tensor::Tensor;
use crate::{Device, Error};
use rtx_kernels::{Float, bf16, f16};
use std::any::Any;
use std::collections::HashMap;

/// Features of every [`Module`], written once (import it to call them on a model).
pub trait ModelExt: Module {
    /// A tree of the model's modules and tensors, like PyTorch's module print: each module's
    /// field name, its type (paths shortened) and its parameter count, each tensor's shape and
    /// element type, buffers marked.
    ///
    /// ```
    /// use rtx::nn::ModelExt;
    /// use rtx::prelude::*;
    ///
    /// #[rtx::model]
    /// struct Affine {
    ///     weight: Tensor<Rank2<3, 2>>,
    ///     bias: Tensor<Rank1<3>>,
    /// }
    ///
    /// let m = Affine {
    ///     weight: Tensor::zeros((Const, Const), Device::Cpu),
    ///     bias: Tensor::zeros((Const,), Device::Cpu),
    /// };
    /// assert_eq!(
    ///     m.summary(),
    ///     "Affine (9 parameters) {\n  weight: [3, 2] float32\n  bias: [3] float32\n}\n"
    /// );
    /// ```
    fn summary(&self) -> String {
        let mut b = SummaryBuilder {
            stack: vec![Node::new(String::new(), "", std::any::type_name::<Self>())],
        };
        self.visit("", &mut b);
        // Unbalanced enter/leave in a hand-written layer would leave nodes open; close them.
        while b.stack.len() > 1 {
            b.close();
        }
        let mut out = String::new();
        if let Some(root) = b.stack.pop() {
            root.render(0, &mut out);
        }
        out
    }

    /// Switches to training mode (dropout active, batch norm updating its statistics).
    fn train(&mut self) {
        self.set_training(true);
    }

    /// Switches to evaluation mode (dropout off, batch norm using its running statistics).
    fn eval(&mut self) {
        self.set_training(false);
    }

    /// Freezes every parameter: it stops tracking gradients (see the module docs).
    fn freeze(&mut self) {
        struct Freeze;
        impl VisitorMut for Freeze {
            fn visit_mut<S: Shape, E: Float>(
                &mut self,
                _: &str,
                t: &mut Tensor<S, E>,
                _: TensorKind,
            ) {
                if t.tracks_grad() {
                    *t = t.detach();
                }
            }
        }
        self.visit_mut("", &mut Freeze);
    }

    /// Unfreezes every parameter (the same as [`Module::track_gradients`]).
    fn unfreeze(&mut self) {
        self.track_gradients();
    }

    /// The names of the parameters that are frozen (do not track gradients).
    fn frozen_parameters(&self) -> Vec<String> {
        struct Frozen(Vec<String>);
        impl Visitor for Frozen {
            fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, k: TensorKind) {
                if k == TensorKind::Parameter && !t.tracks_grad() {
                    self.0.push(name.to_string());
                }
            }
        }
        let mut f = Frozen(Vec::new());
        self.visit("", &mut f);
        f.0
    }

    /// Moves every tensor to `device`; parameters that tracked gradients still do (as new
    /// leaves), so frozen parts stay frozen.
    ///
    /// # Panics
    /// If a tensor cannot be moved (the device is missing or out of memory).
    #[track_caller]
    fn move_to(&mut self, device: Device) {
        ok(self.try_move_to(device))
    }

    /// [`ModelExt::move_to`], returning the first device error. Tensors visited before the
    /// failure have moved; the rest stay where they were.
    fn try_move_to(&mut self, device: Device) -> Result<()> {
        struct Move {
            device: Device,
            error: Option<Error>,
        }
        impl VisitorMut for Move {
            fn visit_mut<S: Shape, E: Float>(
                &mut self,
                _: &str,
                t: &mut Tensor<S, E>,
                _: TensorKind,
            ) {
                if self.error.is_some() || t.device() == self.device {
                    return;
                }
                match t.storage().to_device(t.layout(), self.device) {
                    Ok(moved) => t.set_storage(moved),
                    Err(e) => self.error = Some(e.into()),
                }
            }
        }
        let mut m = Move {
            device,
            error: None,
        };
        self.visit_mut("", &mut m);
        m.error.map_or(Ok(()), Err)
    }

    /// Sets every tensor to the value of the tensor of the same name in `source`, casting the
    /// element type where they differ (f32 to bf16, ...); same-typed tensors share storage.
    /// Gradient tracking of `self`'s parameters is kept. Use it to change a model's dtype
    /// (build `Net<bf16>`, copy from `Net<f32>`) or to sync a target network.
    ///
    /// # Panics
    /// If a name is missing on either side, or two tensors of one name differ in shape.
    #[track_caller]
    fn copy_from<M: Module + ?Sized>(&mut self, source: &M) {
        ok(self.try_copy_from(source))
    }

    /// [`ModelExt::copy_from`], returning an error naming the tensor. On error nothing has
    /// changed.
    fn try_copy_from<M: Module + ?Sized>(&mut self, source: &M) -> Result<()> {
        let mut src = Collect(HashMap::new());
        source.visit("", &mut src);
        // A dry run first, so a mismatch leaves the model untouched.
        let mut check = Assign {
            src: &src.0,
            seen: 0,
            apply: false,
            error: None,
        };
        self.visit_mut("", &mut check);
        if let Some(e) = check.error {
            return Err(e);
        }
        if check.seen != src.0.len() {
            let mut names = self.tensor_names().into_iter().map(|(n, _)| n);
            let mut extra: Vec<&String> =
                src.0.keys().filter(|k| !names.any(|n| &n == *k)).collect();
            extra.sort();
            let msg = format!("the source has tensors this model lacks: {extra:?}");
            return Err(Error::BadArgument {
                op: "copy_from",
                msg,
            });
        }
        let mut apply = Assign {
            src: &src.0,
            seen: 0,
            apply: true,
            error: None,
        };
        self.visit_mut("", &mut apply);
        apply.error.map_or(Ok(()), Err)
    }

    /// Writes every parameter and buffer to a safetensors file under its `state_dict` name,
    /// atomically; PyTorch's `load_state_dict` reads the file into the twin model (see
    /// [`crate::io`] for the format, naming and atomicity).
    ///
    /// ```
    /// use rtx::prelude::*;
    ///
    /// let path = std::env::temp_dir().join(format!("rtx-doc-save-{}.safetensors", std::process::id()));
    /// let model = Linear::<3, 2>::new(Device::Cpu, 0);
    /// model.save(&path)?;
    /// let ck = rtx::io::Checkpoint::open(&path)?;
    /// assert_eq!(ck.names().collect::<Vec<_>>(), ["bias", "weight"]);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), rtx::Error>(())
    /// ```
    fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let mut ck = crate::io::Checkpoint::new();
        ck.add_model("", self)?;
        ck.save(path)
    }

    /// Reads every parameter and buffer from a safetensors file (written by
    /// [`ModelExt::save`] or by PyTorch's `safetensors.torch.save_file(state_dict)`),
    /// strictly as PyTorch's `load_state_dict(strict=True)`: missing or unexpected keys and
    /// wrong shapes are errors naming the file and the keys, and leave the model unchanged.
    /// Float tensors of another dtype are cast; gradient tracking is kept (see [`crate::io`]).
    ///
    /// ```
    /// use rtx::prelude::*;
    ///
    /// let path = std::env::temp_dir().join(format!("rtx-doc-load-{}.safetensors", std::process::id()));
    /// Linear::<3, 2>::new(Device::Cpu, 0).save(&path)?;
    /// let mut wide = Linear::<3, 2, f64>::new(Device::Cpu, 1);
    /// wide.load(&path)?; // f32 in the file, cast to f64
    /// let e = Linear::<3, 2>::new(Device::Cpu, 0).without_bias().load(&path).unwrap_err();
    /// assert!(e.to_string().contains("unexpected keys: `bias`"));
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), rtx::Error>(())
    /// ```
    fn load(&mut self, path: impl AsRef<std::path::Path>) -> Result<()> {
        crate::io::Checkpoint::open(path)?.load_model("", self)
    }
}

impl<M: Module + ?Sized> ModelExt for M {}

/// A source tensor of [`ModelExt::copy_from`], with its type erased.
struct Erased {
    tensor: Box<dyn Any>,
    dims: Vec<usize>,
    shape: String,
}

/// Collects a source model's tensors by name.
struct Collect(HashMap<String, Erased>);

impl Visitor for Collect {
    fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, _: TensorKind) {
        let erased = Erased {
            tensor: Box::new(t.detach()),
            dims: t.dims().to_vec(),
            shape: describe(&t.shape()),
        };
        self.0.insert(name.to_string(), erased);
    }
}

/// Checks (and, when `apply`, assigns) each tensor from the collected source.
struct Assign<'a> {
    src: &'a HashMap<String, Erased>,
    seen: usize,
    apply: bool,
    error: Option<Error>,
}

/// The source tensor as a `Tensor<S, E>`: shared when the type matches, else cast from
/// whichever float type it has; `None` when its shape type differs.
fn convert<S: Shape, E: Float>(any: &dyn Any) -> Option<Tensor<S, E>> {
    if let Some(t) = any.downcast_ref::<Tensor<S, E>>() {
        return Some(t.clone());
    }
    if let Some(t) = any.downcast_ref::<Tensor<S, f32>>() {
        return Some(t.cast());
    }
    if let Some(t) = any.downcast_ref::<Tensor<S, f64>>() {
        return Some(t.cast());
    }
    if let Some(t) = any.downcast_ref::<Tensor<S, f16>>() {
        return Some(t.cast());
    }
    any.downcast_ref::<Tensor<S, bf16>>().map(|t| t.cast())
}

impl VisitorMut for Assign<'_> {
    fn visit_mut<S: Shape, E: Float>(&mut self, name: &str, t: &mut Tensor<S, E>, _: TensorKind) {
        if self.error.is_some() {
            return;
        }
        let here = describe(&t.shape());
        let fail = |msg: String| {
            Some(Error::BadArgument {
                op: "copy_from",
                msg,
            })
        };
        let Some(src) = self.src.get(name) else {
            self.error = fail(format!("the source has no tensor `{name}` ({here})"));
            return;
        };
        self.seen += 1;
        let converted = if src.dims == t.dims() {
            convert::<S, E>(src.tensor.as_ref())
        } else {
            None
        };
        let Some(new) = converted else {
            self.error = fail(format!(
                "`{name}` is {} in the source but {here} here",
                src.shape
            ));
            return;
        };
        if self.apply {
            let new = crate::no_grad(|| new.to_device(t.device()));
            *t = if t.tracks_grad() {
                new.requires_grad()
            } else {
                new
            };
        }
    }
}

/// One line of a summary: a module with children, or a tensor.
enum Entry {
    Module(Node),
    Tensor {
        name: String,
        shape: String,
        kind: TensorKind,
        numel: usize,
    },
}

/// A module in a summary tree.
struct Node {
    name: String,
    prefix: String,
    type_name: &'static str,
    /// Times this node was entered again with the same prefix (the root is opened by
    /// `summary` itself and then entered by the model's own `visit`).
    reentered: usize,
    children: Vec<Entry>,
}

impl Node {
    fn new(name: String, prefix: &str, type_name: &'static str) -> Node {
        Node {
            name,
            prefix: prefix.to_string(),
            type_name,
            reentered: 0,
            children: Vec::new(),
        }
    }

    fn parameters(&self) -> usize {
        self.children
            .iter()
            .map(|c| match c {
                Entry::Module(m) => m.parameters(),
                Entry::Tensor { kind, numel, .. } if *kind == TensorKind::Parameter => *numel,
                Entry::Tensor { .. } => 0,
            })
            .sum()
    }

    fn render(&self, depth: usize, out: &mut String) {
        let indent = "  ".repeat(depth);
        let label = if self.name.is_empty() {
            String::new()
        } else {
            format!("{}: ", self.name)
        };
        let ty = short_type_name(self.type_name);
        let n = self.parameters();
        if self.children.is_empty() {
            // A layer without tensors (an activation, pooling, dropout): its type says it all.
            out.push_str(&format!("{indent}{label}{ty}\n"));
            return;
        }
        let unit = if n == 1 { "parameter" } else { "parameters" };
        out.push_str(&format!("{indent}{label}{ty} ({n} {unit}) {{\n"));
        for c in &self.children {
            match c {
                Entry::Module(m) => m.render(depth + 1, out),
                Entry::Tensor {
                    name, shape, kind, ..
                } => {
                    let tag = if *kind == TensorKind::Buffer {
                        " (buffer)"
                    } else {
                        ""
                    };
                    out.push_str(&format!("{indent}  {name}: {shape}{tag}\n"));
                }
            }
        }
        out.push_str(&format!("{indent}}}\n"));
    }
}

/// Builds the summary tree from a traversal.
struct SummaryBuilder {
    stack: Vec<Node>,
}

impl SummaryBuilder {
    fn top(&mut self) -> &mut Node {
        let last = self.stack.len() - 1;
        &mut self.stack[last]
    }

    /// `full` relative to the innermost open module, without a trailing dot.
    /// Adds the tensor `name` of shape `shape` (described) to the module open now.
    fn add_tensor(
        &mut self,
        name: &str,
        shape: String,
        dtype: rtx_kernels::DType,
        kind: TensorKind,
        numel: usize,
    ) {
        let entry = Entry::Tensor {
            name: self.relative(name),
            shape: format!("{shape} {dtype}"),
            kind,
            numel,
        };
        self.top().children.push(entry);
    }

    fn relative(&mut self, full: &str) -> String {
        let prefix = &self.top().prefix;
        let rel = full.strip_prefix(prefix.as_str()).unwrap_or(full);
        rel.trim_end_matches('.').to_string()
    }

    fn close(&mut self) {
        if let Some(node) = self.stack.pop() {
            self.top().children.push(Entry::Module(node));
        }
    }
}

impl Visitor for SummaryBuilder {
    fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, kind: TensorKind) {
        // A shell over a function that is not generic (compiled once, not once per shape).
        self.add_tensor(name, describe(&t.shape()), E::DTYPE, kind, t.numel());
    }

    fn enter(&mut self, prefix: &str, type_name: &'static str) {
        if self.top().prefix == prefix {
            let top = self.top();
            top.reentered += 1;
            top.type_name = type_name;
            return;
        }
        let name = self.relative(prefix);
        self.stack.push(Node::new(name, prefix, type_name));
    }

    fn leave(&mut self, prefix: &str) {
        let top = self.top();
        if top.prefix != prefix {
            return;
        }
        if top.reentered > 0 {
            top.reentered -= 1;
        } else if self.stack.len() > 1 {
            self.close();
        }
    }
}

/// `std::any::type_name` without module paths: `alloc::vec::Vec<my::Block<f32>>` becomes
/// `Vec<Block<f32>>`.
pub(crate) fn short_type_name(full: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(word.rsplit("::").next().unwrap_or(word));
        word.clear();
    };
    for c in full.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::short_type_name;

    #[test]
    fn type_names_lose_their_paths() {
        assert_eq!(
            short_type_name("alloc::vec::Vec<my::Block<f32>>"),
            "Vec<Block<f32>>"
        );
        assert_eq!(short_type_name("[a::b::Block; 3]"), "[Block; 3]");
        assert_eq!(
            short_type_name("rtx::Tensor<(rtx::shape::Const<3>,), f32>"),
            "Tensor<(Const<3>,), f32>"
        );
    }
}
