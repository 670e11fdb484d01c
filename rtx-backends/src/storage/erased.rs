//! Storage with its element type erased to a tag: the form in which the backend entry points
//! are compiled, once, in this crate.
//!
//! A generic function is compiled again in every crate that calls it with new types: release
//! builds share no instances between crates. Were the entry points' bodies generic over the
//! element type, each user's crate would compile the CPU loops, the rayon jobs and the launch
//! code of every op it calls, which was most of a user's build. So an entry point is a shell:
//! it erases its storages ([`AnyRef::of`]), calls a non-generic function of this crate that
//! matches on the element type and runs that type's body, and turns the result back
//! ([`AnyStorage::into_typed`]). The function must not be generic, not even over a body type
//! of this crate: any generic call from a user's generic code is compiled in the user's crate.
//! The bodies are compiled here, for every element type they exist for; a user's crate
//! compiles only the shells.
//!
//! The dispatch is by visitor: a body is a type implementing [`ForFloat`], [`ForSigned`],
//! [`ForNum`] or [`ForElement`] (the element-type ladder of `rtx_kernels::dtype`), run on the
//! storage's concrete type by [`AnyRef::floats`], [`AnyRef::signeds`], [`AnyRef::nums`] or
//! [`AnyRef::elements`]. A storage
//! whose type is not on that rung gets `NoKernel`; the typed API never sends one.

use super::Storage;
use crate::{BackendError, Device, Layout, Result};
use rtx_kernels::{DType, Element, Float, Num, Signed, bf16, f16};
use std::any::Any;
use std::ops::Range;

/// A borrowed storage of any element type.
#[derive(Clone, Copy, Debug)]
pub enum AnyRef<'a> {
    /// `f32` elements.
    F32(&'a Storage<f32>),
    /// `f64` elements.
    F64(&'a Storage<f64>),
    /// `f16` elements.
    F16(&'a Storage<f16>),
    /// `bf16` elements.
    BF16(&'a Storage<bf16>),
    /// `i32` elements.
    I32(&'a Storage<i32>),
    /// `i64` elements.
    I64(&'a Storage<i64>),
    /// `u8` elements.
    U8(&'a Storage<u8>),
    /// `bool` elements.
    Bool(&'a Storage<bool>),
}

/// An owned storage of any element type.
#[derive(Debug)]
pub enum AnyStorage {
    /// `f32` elements.
    F32(Storage<f32>),
    /// `f64` elements.
    F64(Storage<f64>),
    /// `f16` elements.
    F16(Storage<f16>),
    /// `bf16` elements.
    BF16(Storage<bf16>),
    /// `i32` elements.
    I32(Storage<i32>),
    /// `i64` elements.
    I64(Storage<i64>),
    /// `u8` elements.
    U8(Storage<u8>),
    /// `bool` elements.
    Bool(Storage<bool>),
}

/// A body run on a storage of any float type.
pub trait ForFloat {
    /// What the body returns.
    type Out;
    /// Runs on `s`, of the float type `F`.
    fn run<F: Float>(self, s: &Storage<F>) -> Self::Out;
}

/// A body run on a storage of any numeric type (every element type but `bool`).
pub trait ForNum {
    /// What the body returns.
    type Out;
    /// Runs on `s`, of the numeric type `N`.
    fn run<N: Num>(self, s: &Storage<N>) -> Self::Out;
}

/// A body run on a storage of any signed type (the floats, `i32` and `i64`).
pub trait ForSigned {
    /// What the body returns.
    type Out;
    /// Runs on `s`, of the signed type `S`.
    fn run<S: Signed>(self, s: &Storage<S>) -> Self::Out;
}

/// A body run on a storage of any element type.
pub trait ForElement {
    /// What the body returns.
    type Out;
    /// Runs on `s`, of the element type `E`.
    fn run<E: Element>(self, s: &Storage<E>) -> Self::Out;
}

/// `a` as the concrete type `T`, which the caller's tag names.
fn down<T: 'static>(a: &dyn Any) -> &T {
    a.downcast_ref()
        .expect("a storage's tag names its element type")
}

impl<'a> AnyRef<'a> {
    /// `s` with its element type as a tag.
    pub fn of<E: Element>(s: &'a Storage<E>) -> Self {
        let a: &dyn Any = s;
        match E::DTYPE {
            DType::F32 => AnyRef::F32(down(a)),
            DType::F64 => AnyRef::F64(down(a)),
            DType::F16 => AnyRef::F16(down(a)),
            DType::BF16 => AnyRef::BF16(down(a)),
            DType::I32 => AnyRef::I32(down(a)),
            DType::I64 => AnyRef::I64(down(a)),
            DType::U8 => AnyRef::U8(down(a)),
            DType::Bool => AnyRef::Bool(down(a)),
        }
    }

    /// The element type.
    pub fn dtype(self) -> DType {
        match self {
            AnyRef::F32(_) => DType::F32,
            AnyRef::F64(_) => DType::F64,
            AnyRef::F16(_) => DType::F16,
            AnyRef::BF16(_) => DType::BF16,
            AnyRef::I32(_) => DType::I32,
            AnyRef::I64(_) => DType::I64,
            AnyRef::U8(_) => DType::U8,
            AnyRef::Bool(_) => DType::Bool,
        }
    }

    /// The device the elements live on.
    pub fn device(self) -> Device {
        self.elements(DeviceOf)
    }

    /// The storage as the concrete type `E`: an error naming `op` when it holds another.
    pub fn typed<E: Element>(self, op: &'static str) -> Result<&'a Storage<E>> {
        let a: &dyn Any = match self {
            AnyRef::F32(s) => s,
            AnyRef::F64(s) => s,
            AnyRef::F16(s) => s,
            AnyRef::BF16(s) => s,
            AnyRef::I32(s) => s,
            AnyRef::I64(s) => s,
            AnyRef::U8(s) => s,
            AnyRef::Bool(s) => s,
        };
        a.downcast_ref().ok_or_else(|| BackendError::BadArgument {
            op,
            msg: format!(
                "operands of element types {} and {}",
                E::DTYPE.name(),
                self.dtype().name()
            ),
        })
    }

    /// Runs `body` on the storage's float type; `NoKernel` for other types.
    pub fn floats<V: ForFloat<Out = Result<R>>, R>(self, op: &'static str, body: V) -> Result<R> {
        match self {
            AnyRef::F32(s) => body.run(s),
            AnyRef::F64(s) => body.run(s),
            AnyRef::F16(s) => body.run(s),
            AnyRef::BF16(s) => body.run(s),
            other => Err(not_for(op, other)),
        }
    }

    /// Runs `body` on the storage's numeric type; `NoKernel` for `bool`.
    pub fn nums<V: ForNum<Out = Result<R>>, R>(self, op: &'static str, body: V) -> Result<R> {
        match self {
            AnyRef::F32(s) => body.run(s),
            AnyRef::F64(s) => body.run(s),
            AnyRef::F16(s) => body.run(s),
            AnyRef::BF16(s) => body.run(s),
            AnyRef::I32(s) => body.run(s),
            AnyRef::I64(s) => body.run(s),
            AnyRef::U8(s) => body.run(s),
            other => Err(not_for(op, other)),
        }
    }

    /// Runs `body` on the storage's signed type; `NoKernel` for `u8` and `bool`.
    pub fn signeds<V: ForSigned<Out = Result<R>>, R>(self, op: &'static str, body: V) -> Result<R> {
        match self {
            AnyRef::F32(s) => body.run(s),
            AnyRef::F64(s) => body.run(s),
            AnyRef::F16(s) => body.run(s),
            AnyRef::BF16(s) => body.run(s),
            AnyRef::I32(s) => body.run(s),
            AnyRef::I64(s) => body.run(s),
            other => Err(not_for(op, other)),
        }
    }

    /// Runs `body` on the storage's element type.
    pub fn elements<V: ForElement>(self, body: V) -> V::Out {
        match self {
            AnyRef::F32(s) => body.run(s),
            AnyRef::F64(s) => body.run(s),
            AnyRef::F16(s) => body.run(s),
            AnyRef::BF16(s) => body.run(s),
            AnyRef::I32(s) => body.run(s),
            AnyRef::I64(s) => body.run(s),
            AnyRef::U8(s) => body.run(s),
            AnyRef::Bool(s) => body.run(s),
        }
    }
}

impl<'a> AnyRef<'a> {
    /// The number of elements held.
    pub fn len(self) -> usize {
        struct Len;
        impl ForElement for Len {
            type Out = usize;
            fn run<E: Element>(self, s: &Storage<E>) -> usize {
                s.len()
            }
        }
        self.elements(Len)
    }

    /// Whether no elements are held.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// All the elements, copied onto `device`.
    pub fn to_device(self, device: Device) -> Result<AnyStorage> {
        struct Move(Device);
        impl ForElement for Move {
            type Out = Result<AnyStorage>;
            fn run<E: Element>(self, s: &Storage<E>) -> Self::Out {
                let all = Layout::contiguous(&[s.len()]);
                s.to_device(&all, self.0).map(AnyStorage::from_typed)
            }
        }
        self.elements(Move(device))
    }

    /// Elements `range`, as a new storage on the same device.
    pub fn range_to_storage(self, range: Range<usize>) -> Result<AnyStorage> {
        struct Part(Range<usize>);
        impl ForElement for Part {
            type Out = Result<AnyStorage>;
            fn run<E: Element>(self, s: &Storage<E>) -> Self::Out {
                s.contiguous(&range_layout(s.len(), self.0)?)
                    .map(AnyStorage::from_typed)
            }
        }
        self.elements(Part(range))
    }

    /// The native bytes of elements `range`, copied to the host.
    pub fn range_bytes(self, range: Range<usize>) -> Result<Vec<u8>> {
        struct Bytes(Range<usize>);
        impl ForElement for Bytes {
            type Out = Result<Vec<u8>>;
            fn run<E: Element>(self, s: &Storage<E>) -> Self::Out {
                let host = s.try_to_vec(&range_layout(s.len(), self.0)?)?;
                Ok(crate::backend::bytes_of(&host).to_vec())
            }
        }
        self.elements(Bytes(range))
    }

    /// Overwrites `dst` (of this element type and length, on this device) with all elements.
    pub fn copy_into(self, dst: &mut AnyStorage) -> Result<()> {
        struct Into<'d>(&'d mut AnyStorage);
        impl ForElement for Into<'_> {
            type Out = Result<()>;
            fn run<E: Element>(self, s: &Storage<E>) -> Self::Out {
                let dst = self.0.typed_mut::<E>("copy")?;
                s.copy_into(&Layout::contiguous(&[s.len()]), dst)
            }
        }
        self.elements(Into(dst))
    }

    /// The backend buffer behind a storage on a registered backend, else `None`.
    pub fn on_backend(self) -> Option<super::BackendBuffer> {
        struct Ext;
        impl ForElement for Ext {
            type Out = Option<super::BackendBuffer>;
            fn run<E: Element>(self, s: &Storage<E>) -> Self::Out {
                match s {
                    Storage::Backend(b) => Some(b.erased()),
                    _ => None,
                }
            }
        }
        self.elements(Ext)
    }
}

/// The layout of elements `range` of a storage of `len`, or an error naming both.
fn range_layout(len: usize, range: Range<usize>) -> Result<Layout> {
    if range.start > range.end || range.end > len {
        return Err(BackendError::BadArgument {
            op: "copy",
            msg: format!("elements {range:?} are outside a buffer of {len}"),
        });
    }
    Ok(Layout::contiguous(&[range.len()]).with_offset(range.start))
}

/// The error of a body asked to run on an element type it does not exist for.
fn not_for(op: &'static str, s: AnyRef) -> BackendError {
    BackendError::BadArgument {
        op,
        msg: format!("no kernel for element type {}", s.dtype().name()),
    }
}

/// The device of a storage.
struct DeviceOf;

impl ForElement for DeviceOf {
    type Out = Device;
    fn run<E: Element>(self, s: &Storage<E>) -> Device {
        s.device()
    }
}

/// `Some(v)` put into a slot of type `Option<T>`, where `U` is `T` (checked).
fn put<T: 'static, U: 'static>(slot: &mut Option<T>, v: U) {
    let slot: &mut dyn Any = slot;
    *slot
        .downcast_mut::<Option<U>>()
        .expect("the result has the element type asked for") = Some(v);
}

impl AnyStorage {
    /// `s` with its element type as a tag.
    pub fn from_typed<E: Element>(s: Storage<E>) -> Self {
        let mut s = Some(s);
        match E::DTYPE {
            DType::F32 => AnyStorage::F32(take(&mut s)),
            DType::F64 => AnyStorage::F64(take(&mut s)),
            DType::F16 => AnyStorage::F16(take(&mut s)),
            DType::BF16 => AnyStorage::BF16(take(&mut s)),
            DType::I32 => AnyStorage::I32(take(&mut s)),
            DType::I64 => AnyStorage::I64(take(&mut s)),
            DType::U8 => AnyStorage::U8(take(&mut s)),
            DType::Bool => AnyStorage::Bool(take(&mut s)),
        }
    }

    /// The storage as the concrete type `E`.
    ///
    /// # Panics
    /// When it holds another element type: the shells ask only for the type their body made.
    pub fn into_typed<E: Element>(self) -> Storage<E> {
        let mut slot: Option<Storage<E>> = None;
        match self {
            AnyStorage::F32(s) => put(&mut slot, s),
            AnyStorage::F64(s) => put(&mut slot, s),
            AnyStorage::F16(s) => put(&mut slot, s),
            AnyStorage::BF16(s) => put(&mut slot, s),
            AnyStorage::I32(s) => put(&mut slot, s),
            AnyStorage::I64(s) => put(&mut slot, s),
            AnyStorage::U8(s) => put(&mut slot, s),
            AnyStorage::Bool(s) => put(&mut slot, s),
        }
        slot.expect("put fills the slot")
    }
}

impl AnyStorage {
    /// The storage, borrowed.
    pub fn as_ref(&self) -> AnyRef<'_> {
        match self {
            AnyStorage::F32(s) => AnyRef::F32(s),
            AnyStorage::F64(s) => AnyRef::F64(s),
            AnyStorage::F16(s) => AnyRef::F16(s),
            AnyStorage::BF16(s) => AnyRef::BF16(s),
            AnyStorage::I32(s) => AnyRef::I32(s),
            AnyStorage::I64(s) => AnyRef::I64(s),
            AnyStorage::U8(s) => AnyRef::U8(s),
            AnyStorage::Bool(s) => AnyRef::Bool(s),
        }
    }

    /// The storage as the concrete type `E`, mutably: an error naming `op` when it holds
    /// another.
    pub fn typed_mut<E: Element>(&mut self, op: &'static str) -> Result<&mut Storage<E>> {
        let held = self.as_ref().dtype();
        let a: &mut dyn Any = match self {
            AnyStorage::F32(s) => s,
            AnyStorage::F64(s) => s,
            AnyStorage::F16(s) => s,
            AnyStorage::BF16(s) => s,
            AnyStorage::I32(s) => s,
            AnyStorage::I64(s) => s,
            AnyStorage::U8(s) => s,
            AnyStorage::Bool(s) => s,
        };
        a.downcast_mut().ok_or_else(|| BackendError::BadArgument {
            op,
            msg: format!(
                "operands of element types {} and {}",
                E::DTYPE.name(),
                held.name()
            ),
        })
    }
}

/// The value of `slot` as the concrete storage type `Storage<T>`, where `E` is `T` (checked).
fn take<E: Element, T: 'static>(slot: &mut Option<Storage<E>>) -> Storage<T> {
    let slot: &mut dyn Any = slot;
    slot.downcast_mut::<Option<Storage<T>>>()
        .and_then(Option::take)
        .expect("the tag names the storage's element type")
}

/// A mutably borrowed storage of any element type: the operand an in-place op overwrites.
/// Its body is reached through a shared operand's visitor and asks for it by type.
pub struct AnyMut<'a> {
    dtype: DType,
    s: &'a mut dyn Any,
}

impl<'a> AnyMut<'a> {
    /// `s` with its element type as a tag.
    pub fn of<E: Element>(s: &'a mut Storage<E>) -> Self {
        AnyMut { dtype: E::DTYPE, s }
    }

    /// The storage as the concrete type `E`: an error naming `op` when it holds another.
    pub fn typed<E: Element>(self, op: &'static str) -> Result<&'a mut Storage<E>> {
        let held = self.dtype;
        self.s
            .downcast_mut()
            .ok_or_else(|| BackendError::BadArgument {
                op,
                msg: format!(
                    "operands of element types {} and {}",
                    E::DTYPE.name(),
                    held.name()
                ),
            })
    }
}

/// A scalar operand of any element type, erased as its storage is.
pub fn scalar<E: Element>(c: &E) -> &dyn Any {
    c
}

/// A scalar erased by [`scalar`], as the concrete type `T` of the body it reaches.
pub fn scalar_as<T: Element>(c: &dyn Any) -> T {
    *down(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_goes_through_its_tag_and_back() {
        fn round_trip<E: Element>(v: Vec<E>) {
            let s = Storage::from_vec(v.clone(), Device::Cpu).unwrap();
            assert_eq!(AnyRef::of(&s).dtype(), E::DTYPE);
            let back: Storage<E> = AnyStorage::from_typed(s).into_typed();
            assert_eq!(back.to_vec(&Layout::contiguous(&[v.len()])), v);
        }
        round_trip(vec![1.5f32, -2.0]);
        round_trip(vec![1.5f64]);
        round_trip(vec![f16::from_f32(0.5)]);
        round_trip(vec![bf16::from_f32(0.5)]);
        round_trip(vec![3i32, -4]);
        round_trip(vec![i64::MAX]);
        round_trip(vec![7u8]);
        round_trip(vec![true, false]);
    }

    #[test]
    fn a_body_for_floats_refuses_integers_by_name() {
        struct Len;
        impl ForFloat for Len {
            type Out = Result<usize>;
            fn run<F: Float>(self, s: &Storage<F>) -> Result<usize> {
                Ok(s.len())
            }
        }
        let f = Storage::from_vec(vec![1.0f32; 3], Device::Cpu).unwrap();
        assert_eq!(AnyRef::of(&f).floats("len", Len).unwrap(), 3);
        let i = Storage::from_vec(vec![1i32; 3], Device::Cpu).unwrap();
        let e = AnyRef::of(&i).floats("len", Len).unwrap_err().to_string();
        assert!(e.contains("len") && e.contains("int32"), "{e}");
        assert!(AnyRef::of(&i).typed::<f32>("mix").is_err());
    }
}
