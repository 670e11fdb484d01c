//! rtx's procedural macros: `#[model]` and `#[kernel]`.
//!
//! The crate sits at the bottom of the dependency chain (rtx-macros <- rtx-kernels <-
//! rtx-backends <- rtx). Users reach the macros through `rtx` (`rtx::model`), and the code
//! they emit names rtx's items only through the hidden `::rtx::__private` module, so a user
//! crate depends on `rtx` alone.

#![warn(missing_docs)]

mod forward;
mod kernel;
mod model;
mod ops;

use proc_macro::TokenStream;

/// Makes a struct a model: implements `rtx::nn::Module` by visiting each field under its
/// name, so parameters are named like PyTorch's (`blocks.2.attn.weight`), and `rtx::nn::Init`,
/// so `Net::init(&device, seed)` builds it with every parameter seeded from the model seed and
/// its own name.
///
/// Fields, in declaration order:
/// - a `Tensor` is a parameter named after its field;
/// - a layer or model (anything implementing `Module`, including `[M; N]` and `Vec<M>`) is
///   visited with the field's name as prefix;
/// - `#[buffer]` marks a tensor that is saved with the model but not trained (running
///   statistics);
/// - `#[skip]` leaves a field out (hyperparameters, seeds, configuration).
///
/// `#[init(expr)]` on a field builds it with `expr` instead, with `device: &Device`,
/// `seed: u64` (the model seed) and `prefix: &str` (the field's name prefix, `blocks.`) in
/// scope; a `#[skip]` field without it is `Default::default()`. A field whose type cannot be
/// built from a device and a seed (a `Vec`, a hand-written layer without `Init`) needs
/// `#[init(..)]`; the compile error at the field says so.
///
/// Any other field is a compile error at that field. Everything else a model can do
/// (`summary`, `freeze`, `train`/`eval`, moving between devices) comes from
/// `rtx::nn::ModelExt`, written once against `Module`.
///
/// On the `impl` block holding `forward`, `#[model]` compiles the forward pass: it reads the
/// flat forward (one op per `let`), fuses maximal elementwise chains into generated kernels
/// that call each op's own kernel function, and emits `forward_fused`, the static backward
/// `forward_train` and the graph builder `ir` (book: "How #[model] compiles your model").
/// Syntax outside that subset is an error at its span that names `#[model(eager)]`.
#[proc_macro_attribute]
pub fn model(attr: TokenStream, item: TokenStream) -> TokenStream {
    model::expand(attr.into(), item.into()).into()
}

/// Writes a GPU kernel in Rust: the function yields, when the crate compiles, native Rust
/// that runs and tests on the CPU, and self-contained CUDA C++ source (no headers needed, so
/// NVRTC compiles it as is) with one `extern "C"` entry per element type (f32, f64, f16, bf16;
/// f16 and bf16 compute in f32, f32 and f64 in their own type).
///
/// Every kernel is generic over one element type, `fn name<T: Float>(..)`. Inside the body,
/// `T` values are held in the compute type (`T::Acc`): reading a `T` buffer widens, writing
/// narrows, and float literals (`0.5`, no suffix) have the compute type. Alongside the native
/// function, a module of the same name holds `KERNEL: KernelSource` (name, kind, CUDA source,
/// entry symbols and their argument lists; see `rtx_kernels::kernel`).
///
/// The bound decides the element types: `T: Float` gives entries for f32, f64, f16 and bf16;
/// `T: Num` adds i32, i64 and u8; `T: Element` adds bool too. Integer and bool types compute
/// in their own type. Over `T: Num`, arithmetic on `T` is `Num`'s (integers wrap, integer
/// division by zero or of the minimum by -1 gives 0, floats are unchanged), and the methods
/// of `T` are `max`, `min` and `abs`; over `T: Element`, `T` values are only moved, compared
/// and selected. `T::LOWEST` and `T::HIGHEST` (infinities for floats, the range ends for
/// integers) are the identities of max and min; `T::INFINITY`, `T::NEG_INFINITY` and `T::NAN`
/// need `T: Float`.
///
/// # The three kinds
///
/// **Elementwise**, `#[kernel(elementwise)]`: a scalar function of `T` inputs; `#[uniform]`
/// marks scalars passed once for all elements (`T`, `usize`, `i32`, `u32` or `i64`).
/// ```ignore
/// #[kernel(elementwise)]
/// pub fn leaky_relu<T: Float>(x: T, #[uniform] slope: T) -> T {
///     if x > 0.0 { x } else { slope * x }
/// }
/// ```
/// generates `fn leaky_relu<T: Float>(x: T, slope: T) -> T`, and in `mod leaky_relu`:
/// `KERNEL`, `map(x: &[T], slope: T, out: &mut [T])` (equal lengths) and
/// `map_strided(x: &[T], x_strides: &KernelStrides, slope: T, out: &mut [T], shape:
/// &KernelShape)` (each input read at its own offset and strides over the output's shape, a
/// zero stride broadcasting; rank up to 6), both returning `Result<(), LaunchError>`. CUDA
/// entries `leaky_relu_contig_{f32,f64,f16,bf16}(x, slope, out, n)` (16-byte vector loads
/// when every pointer is aligned, then a scalar tail) and `leaky_relu_strided_*(x,
/// x_strides, slope, out, shape, n)`; both are grid-stride loops, so any grid works.
///
/// Where the body is differentiable, the macro also derives, for each `T` input `x`, a
/// kernel `<name>_grad_<x>` (here `leaky_relu_grad_x(x, slope, grad) -> T`, returning
/// `grad * d out / d x`) by forward-mode symbolic differentiation over the `let` bindings:
/// arithmetic, `exp`, `ln`, `ln_1p`, `sqrt`, `sin`, `cos`, `tanh`, `erf`, `abs`, `recip`,
/// `powi`, `powf`, `mul_add`, `max`/`min` (ties to the first operand), `if`/`else` (branch
/// by branch; the condition is not differentiated) and `as T` casts of integers (zero). Bodies with
/// loops or assignments get no derivative; `#[kernel(elementwise, grad)]` makes that an
/// error, `no_grad` turns derivation off.
///
/// Masks and predicates: an elementwise input may be `bool` (a mask buffer, read as is) and
/// the function may return `bool` (written as one byte, 0 or 1); such kernels take no vector
/// loads and get no derivative. `fn select<T: Element>(cond: bool, a: T, b: T) -> T` and
/// `fn lt<T: Element>(a: T, b: T) -> bool` are two; their entries' `out_dtype` says `Bool`.
///
/// Between element types: a second type parameter names the output type,
/// `fn cast<T: Element, U: Element>(x: T) -> U { x }`. The body computes in `T`'s compute
/// type, its value is rounded to `T`, then converted to `U` exactly as `Element::cast` does
/// (between integer types through i64; otherwise through f64), natively and on the GPU.
/// Entries exist for every (input, output) pair: `cast_contig_f32_to_bf16`,
/// `cast_strided_i64_to_u8`, ...; pick one with `KERNEL.entry_to(dtype, out, variant)`.
///
/// **Reduce**, `#[kernel(reduce(identity = .., map = |x| .., finish = |acc, n| ..))]` on a
/// combine function (`map` and `finish` are optional; `n` is the axis length as `T`):
/// ```ignore
/// #[kernel(reduce(identity = 0.0, finish = |acc, n| acc / n))]
/// pub fn mean<T: Float>(acc: T, x: T) -> T { acc + x }
/// ```
/// generates the combine as `fn mean<T: Float>(acc: T, x: T) -> T`, and in `mod mean`:
/// `KERNEL`, `reduce(x: &[T], outer, axis, inner, out: &mut [T])` over a row-major
/// `[outer, axis, inner]` view and `reduce_axis(x: &[T], shape: &[usize], axis, keepdim) ->
/// Result<(Vec<T>, Vec<usize>), LaunchError>`. CUDA entries `mean_{f32,..}(x, out, outer,
/// axis, inner)`: one block per output (grid-stride over outputs; block size a multiple of
/// 32, at most 1024), each thread striding the axis, then warp shuffles and shared memory,
/// in a fixed order for a given block size. Three more entries make wide reductions
/// memory-bound: `mean_cols_*` (same arguments; a warp's threads on neighbouring elements of
/// `inner`, so a middle axis reads coalesced), and `mean_partial_*(x, partial, n, chunk)`
/// then `mean_final_*(partial, out, parts, n)` (long rows in two stages, the partial results
/// in the compute type). The native version folds in index order.
///
/// **SIMT**, `#[kernel]`: buffers `&[T]` / `&mut [T]` (also of `f64`, `usize`, `i32`, `u32`,
/// `i64`, `u64`, and of the compute type `T::Acc`, read and written without conversion: f32
/// for f16, bf16 and f32, f64 for f64, for values such as row statistics that must not be
/// rounded to `T`), scalars, layouts (`s: KernelShape` read with `s.rank()` and `s.dim(d)`,
/// `st: KernelStrides` with `st.offset()` and `st.stride(d)`, all `usize`; passed by value as
/// `rtx_kernels::kernel::KernelShape`/`KernelStrides`, so a kernel can walk any strided view),
/// loops and the intrinsics `thread_idx_x()`, `block_idx_x()`,
/// `block_dim_x()`, `grid_dim_x()` (and `_y`, `_z`; all `usize`), `lane_id()`,
/// `sync_threads()`, `warp_shuffle_down(v, offset: u32)`, `warp_shuffle_xor(v, mask: u32)`,
/// `atomic_add(&mut buf[i], v);` (or `let old = atomic_add(&mut buf[i], v);`, the element's
/// value before the add: a ticket that finds the last block to finish), `thread_fence()`
/// (CUDA's `__threadfence()`: this thread's earlier writes are seen by every block before its
/// later ones), `grid_sync()` (every thread of every block waits for all the others, as
/// cooperative groups' `grid.sync()`: a kernel that calls it, itself or through a device
/// function, is launched cooperatively, and a grid of more blocks than the GPU holds at once
/// is an error, not a hang; every thread must reach each `grid_sync`, so no `return` before
/// one; natively the blocks run together, a thread each), shared memory declared at the top of the body as
/// `#[shared] let s: [T; 256];`, and per-thread arrays `let mut v = [T::NEG_INFINITY; N];`
/// read and written as `v[k]` (`N` an integer literal or a `const N: usize = 32;` declared
/// in the body; natively a Rust array, whose indexing panics out of bounds; in CUDA a local
/// array `A v[N];`, unchecked). A `for` over a constant range (`0..N`, at most 256 steps) is
/// emitted with `#pragma unroll`, so indices that are constants after unrolling keep such
/// an array in registers. The tensor cores (f16 and bf16 only; the kernel then has no f32 or
/// f64 instantiation): `cp_async(&mut tile, word, x, i, n)`, `cp_async_commit()`,
/// `cp_async_wait(n)`, `ldmatrix_x4(&mut frag, at, &tile, word)` (and `_x1`, `_x2`, `_trans`),
/// `mma_m16n8k16(&mut acc, ci, &a, ai, &b, bi)` and `pack2(lo, hi)`, and on Hopper
/// `wgmma_m64n{64,128,256}k16(&mut acc, ci, &ta, a_word, &tb, b_word)` (both operands in
/// shared tiles, K-major) and `wgmma_rs_m64n{64,128,256}k16(&mut acc, ci, &a, ai, &tb, b_word,
/// b_panel)` (A from registers, B N-major, its 64-column panels `b_panel` words apart) with
/// `wgmma_fence()`,
/// `wgmma_commit()`, `wgmma_wait(n, &mut acc)` and `fence_proxy_async()`, with tiles as
/// `#[shared]` arrays of `u32` words and fragments as per-thread arrays, in PTX's layouts
/// (the book's chapter "Writing kernels" and `rtx_kernels::kernel::tensor_core` document them).
/// Hopper's tensor memory accelerator: a parameter `map: TensorMap` (a 2-D view of a buffer,
/// `rtx_kernels::kernel::TensorMap`), `tma_load_2d(&mut tile, word, x, map, col, row, &mut
/// bar, i)` (a box of `map`'s view of `x` into the tile in the 128-byte swizzle), and barriers
/// as `#[shared]` arrays of `u64` with `mbarrier_init(&mut bar, i, count)`,
/// `mbarrier_arrive(&mut bar, i)`, `mbarrier_arrive_expect_tx(&mut bar, i, bytes)` and
/// `mbarrier_wait(&mut bar, i, parity)` (`rtx_kernels::kernel::tma` emulates them).
/// ```ignore
/// #[kernel]
/// pub fn axpy<T: Float>(a: T, x: &[T], y: &mut [T], n: usize) {
///     let i = block_idx_x() * block_dim_x() + thread_idx_x();
///     if i < n { y[i] = a * x[i] + y[i]; }
/// }
/// ```
/// generates `fn axpy<T: Float>(launch: LaunchConfig, a: T, x: &[T], y: &mut [T], n: usize)
/// -> Result<(), LaunchError>`, which emulates the launch on the CPU: blocks one after
/// another; the threads of a block one after another when the body never synchronizes,
/// otherwise one OS thread each against a real barrier (threads that returned stop counting,
/// as on the GPU) with warp shuffles exchanged through per-warp slots. CUDA entries
/// `axpy_{f32,..}(a, x, y, n)`; a `T` scalar is passed in the compute type. Shuffles assume
/// full warps (a block size that is a multiple of 32), as `__shfl_*_sync(0xffffffff, ..)`
/// does.
///
/// A SIMT parameter may also be a table of `T` buffers, `ps: &[&mut [T]]` (written) or
/// `gs: &[&[T]]` (read), indexed row then element, `ps[t][i]`, so that one launch addresses
/// many tensors of different lengths (the multi-tensor optimizer kernels). Natively a written
/// table is `&mut [&mut [T]]` and a read one `&[&[T]]`; the CUDA entry takes a device array of
/// row pointers (`S* const*`, `const S* const*`), which the launcher uploads. Rows read and
/// write as `&[T]` / `&mut [T]` parameters do; their lengths, when the kernel needs them, are
/// another parameter. A table of the compute type, `&[&[T::Acc]]` or `&[&mut [T::Acc]]`
/// (`const A* const*`, `A* const*` in CUDA), holds buffers as `&[T::Acc]` does (f32 rows in a
/// bf16 kernel: the multi-tensor casts). Tables are launched through the backends' entry
/// points, not `rtx::kernel::launch`.
///
/// # Applying a kernel to tensors
///
/// Each kernel's module also holds a unit struct `Op`, its marker type, implementing
/// `rtx::kernel::Elementwise<N>` (for elementwise kernels whose `N` inputs and result are
/// `T`), `rtx::kernel::Reduce` or `rtx::kernel::Simt`. `rtx::kernel` applies it to tensors on
/// any device: `x.map(leaky_relu::Op, &[0.1])`, `rtx::kernel::map2(huber::Op, &x, &y,
/// &[1.0])`, `x.reduce_with::<1>(mean::Op)`, `rtx::kernel::launch(axpy::Op, config, args)`.
/// The CPU runs the native code, a GPU the CUDA entry for the tensor's element type.
///
/// # The subset
///
/// Literals, parameters, `let`/`let mut` (with `T`, `f64`, `usize`, `i32`, `u32`, `i64`,
/// `u64` or `bool` annotations; an unannotated integer literal binding is `usize`, an
/// unannotated float literal binding is `T`), shadowing, arithmetic, comparisons,
/// `&&`/`||`, bit operations and shifts on integers, `+=` and friends, the math methods
/// `x.exp()`, `ln`, `ln_1p`, `sqrt`, `sin`, `cos`, `tanh`, `erf`, `abs`, `recip`, `a.max(b)`,
/// `min` (C's `fmax`/`fmin`: a NaN operand is skipped), `powi(i32)`, `powf(T)`,
/// `a.mul_add(b, c)` (`a * b + c` rounded once: `fmaf` on a GPU, so the devices agree bit for
/// bit) on `T` and `f64`, the integer methods `a.wrapping_add(b)`, `wrapping_sub`, `wrapping_mul` (on every
/// integer type) and `a.mul_hi(b)` (the high half of the full product of two `u32` or two
/// `u64`), `as` casts between `T`, `f64` and the integer types, the constants of `T` above,
/// `if`/`else` (also as a value), blocks, `for i in a..b`, `for i in (a..b).step_by(s)`,
/// `while`, `loop`, `break`, `continue` and, in SIMT kernels, `return;`. Anything else
/// (method calls outside that list, closures, calls to other functions, paths to other
/// items, `unsafe`, macros, `match`, references, `return` with a value...) is a compile error
/// at its span that lists what is supported.
///
/// `f64` is the one concrete float type, for work that must be exact whatever `T` is (the
/// random kernels): its arithmetic rounds every operation on the GPU too (no fused
/// multiply-add, which NVRTC does by default for `T`), so it is bitwise the CPU's, and
/// arithmetic of float literals in `f64` context is folded exactly. A store of an `f64` or
/// `i64` value into a `T` buffer, `out[i] = v as T;`, converts once, straight to `T`, as
/// `Element::from_f64` / `Element::from_i64` do (elsewhere `v as T` converts to the compute
/// type). Integer arithmetic wraps on the GPU; natively, `+`, `-` and `*` on integers panic on
/// overflow in debug builds, so write `wrapping_*` where wrapping is meant.
///
/// # Calling other kernels
///
/// A kernel over `T: Float` may call an elementwise kernel whose parameters are all `T`, by
/// its path, as a plain function: `let y = gelu(x);`, `super::softplus(x)`. Natively this is a
/// Rust call of the callee's compute-type function `name::scalar` (values stay in `T`'s
/// compute type, f32 for f16 and bf16, across the call); in CUDA it calls the callee's device
/// function, whose source the caller's takes in when the crate compiles. A derivative derived
/// through a call uses the callee's derived derivative (`name::d0`, ...), so every formula is
/// written once. The callee must be differentiable where the caller is differentiated.
///
/// # Device functions
///
/// `#[kernel(device)]` on a function over `T` makes a *device function*: SIMT code that SIMT
/// kernels (and other device functions) call, so kernels share their common parts (a warp
/// reduction, a block reduction through shared memory, a row read in chunks) instead of
/// repeating them. Its body is a SIMT body (intrinsics, barriers, shuffles, buffers, local
/// arrays, loops, `return;` when it returns nothing); it returns nothing or a scalar (its
/// last expression). Besides scalars and buffers (`x: &[T]`, `y: &mut [T]`, `&[T::Acc]`) it
/// takes arrays by reference: a caller's per-thread array, `v: &mut [T; 32]` or `&[T; 32]`,
/// and a caller's shared array, `#[shared] red: &mut [T; 32]` (lengths are literals; a device
/// function declares no shared array of its own).
/// ```ignore
/// #[kernel(device)]
/// pub fn warp_sum<T: Float>(v: T) -> T {
///     let mut s = v;
///     let mut mask: u32 = 16;
///     while mask > 0 {
///         s += warp_shuffle_xor(s, mask);
///         mask /= 2;
///     }
///     s
/// }
///
/// #[kernel(device)]
/// pub fn block_sum<T: Float>(v: T, #[shared] red: &mut [T; 32]) -> T {
///     let t = warp_sum(v);
///     if lane_id() == 0 {
///         red[thread_idx_x() / 32] = t;
///     }
///     sync_threads();
///     let mut total = 0.0;
///     for w in 0..(block_dim_x() + 31) / 32 {
///         total += red[w];
///     }
///     total
/// }
///
/// #[kernel]
/// pub fn row_sums<T: Float>(x: &[T], out: &mut [T], cols: usize) {
///     #[shared]
///     let red: [T; 32];
///     let mut s = 0.0;
///     for c in (thread_idx_x()..cols).step_by(block_dim_x()) {
///         s += x[block_idx_x() * cols + c];
///     }
///     let total = block_sum(s, &mut red);
///     if thread_idx_x() == 0 {
///         out[block_idx_x()] = total;
///     }
/// }
/// ```
/// A call passes values, buffers by name (`x`, `out`) and arrays by reference (`&mut red`,
/// `&mut v`, `&v`). Its value is a `T` unless its context gives it another type
/// (`let n: usize = f(..);`, `if f(..) {`, a statement `f(..);`); rustc checks the arguments
/// and that type against the callee's signature, at the call. A device function is no kernel
/// (no `KERNEL`, no launch): what `#[kernel(device)]` generates is a module of its name that
/// exports `call` (the body natively, on the caller's emulated thread), `DEVICE` (the CUDA `template <typename A, typename S = A> __device__
/// __forceinline__` function `<name>_body`, behind an include guard, which callers' sources
/// take in), `USES_SYNC` (whether the function synchronizes or shuffles, which decides how
/// a calling kernel's blocks are emulated), `USES_GRID_SYNC` (whether it calls
/// `grid_sync`, which makes a calling kernel's launch cooperative) and `CROSSES_BLOCKS`
/// (whether it uses `atomic_add`, `thread_fence` or `grid_sync`, which keeps a calling
/// kernel's emulated blocks from running in parallel). Being inlined, a device function costs nothing on
/// the GPU, and a per-thread array it indexes by constants stays in registers. Elementwise
/// kernels export `call` too, so SIMT code calls both kinds alike.
///
/// # Specialized entries
///
/// `#[kernel(specialize(d = 64, 128))]` on a SIMT kernel gives each listed value of the integer
/// parameter `d` an entry point of its own (`name_bf16__d64`), whose body is the kernel's with
/// `d` a constant; the descriptor lists them in `KernelEntry::specialized`, and a launch whose
/// `d` has a listed value runs that entry, any other value the general one. The compiler folds
/// the constant through the body, so loops over `d` get fixed trip counts and the branches on
/// it vanish, and, each body being an entry alone, registers are allocated for that body and
/// not for the largest of them (the fused attention kernels use it for head dims 64 and 128).
/// The kernel's meaning is unchanged, and natively it runs as written. Several
/// `specialize(..)` together give an entry per combination of their values
/// (`specialize(m = 1), specialize(kind = 8, 3)`: `name_f32__m1_kind8` and `__m1_kind3`), and a
/// launch runs the first whose values it has all.
///
/// # Paths
///
/// The generated code names rtx-kernels through `::rtx::__private::rtx_kernels` by default,
/// so a user crate needs only `rtx`. Inside rtx-kernels (or a crate that depends on it
/// directly), write `#[kernel(.., crate = crate)]` or `crate = ::rtx_kernels`; the path must
/// be absolute.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    kernel::expand(attr.into(), item.into()).into()
}

/// Writes `UnaryOp` and the unary marker types from the op registry (`src/ops.rs`); used once,
/// in `rtx-kernels/src/op.rs`.
#[doc(hidden)]
#[proc_macro]
pub fn unary_op_registry(_: TokenStream) -> TokenStream {
    ops::registry().into()
}

/// Writes the float-only `Tensor` methods of the unary ops from the op registry; used once,
/// in `rtx/src/tensor/elementwise.rs`.
#[doc(hidden)]
#[proc_macro]
pub fn unary_op_methods(_: TokenStream) -> TokenStream {
    ops::methods().into()
}
