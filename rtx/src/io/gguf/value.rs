//! GGUF metadata values: [`GgufValue`], one arm per value type of the format, with accessors
//! that return `None` for any other type (the typed getters of [`Gguf`](super::Gguf) turn that
//! into an error naming the key).

use std::fmt;

/// One metadata value of a GGUF file. Arrays may hold any type, other arrays included; a GGUF
/// array names one element type for all its elements, so an array read from a file is
/// homogeneous.
#[derive(Clone, Debug, PartialEq)]
pub enum GgufValue {
    /// `uint8` (type 0).
    U8(u8),
    /// `int8` (type 1).
    I8(i8),
    /// `uint16` (type 2).
    U16(u16),
    /// `int16` (type 3).
    I16(i16),
    /// `uint32` (type 4).
    U32(u32),
    /// `int32` (type 5).
    I32(i32),
    /// `float32` (type 6).
    F32(f32),
    /// `bool` (type 7): one byte, 0 or 1.
    Bool(bool),
    /// `string` (type 8): UTF-8, with a `u64` length.
    String(String),
    /// `array` (type 9): an element type, a `u64` count and the elements.
    Array(Vec<GgufValue>),
    /// `uint64` (type 10).
    U64(u64),
    /// `int64` (type 11).
    I64(i64),
    /// `float64` (type 12).
    F64(f64),
}

impl GgufValue {
    /// The GGUF name of the value's type (`"uint32"`, `"array"`), as messages say it.
    pub fn type_name(&self) -> &'static str {
        match self {
            GgufValue::U8(_) => "uint8",
            GgufValue::I8(_) => "int8",
            GgufValue::U16(_) => "uint16",
            GgufValue::I16(_) => "int16",
            GgufValue::U32(_) => "uint32",
            GgufValue::I32(_) => "int32",
            GgufValue::F32(_) => "float32",
            GgufValue::Bool(_) => "bool",
            GgufValue::String(_) => "string",
            GgufValue::Array(_) => "array",
            GgufValue::U64(_) => "uint64",
            GgufValue::I64(_) => "int64",
            GgufValue::F64(_) => "float64",
        }
    }

    /// The string, if the value is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a `u32`, if it is an unsigned integer of at most 32 bits (`uint8`,
    /// `uint16`, `uint32`).
    pub fn as_u32(&self) -> Option<u32> {
        match *self {
            GgufValue::U8(x) => Some(x.into()),
            GgufValue::U16(x) => Some(x.into()),
            GgufValue::U32(x) => Some(x),
            _ => None,
        }
    }

    /// The value as a `u64`, if it is an unsigned integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U64(x) => Some(x),
            _ => self.as_u32().map(u64::from),
        }
    }

    /// The value as an `i32`, if it is a signed integer of at most 32 bits.
    pub fn as_i32(&self) -> Option<i32> {
        match *self {
            GgufValue::I8(x) => Some(x.into()),
            GgufValue::I16(x) => Some(x.into()),
            GgufValue::I32(x) => Some(x),
            _ => None,
        }
    }

    /// The value as an `i64`, if it is a signed integer of any width.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            GgufValue::I64(x) => Some(x),
            _ => self.as_i32().map(i64::from),
        }
    }

    /// The value as an `f32`, if it is a `float32`.
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            GgufValue::F32(x) => Some(x),
            _ => None,
        }
    }

    /// The value as an `f64`, if it is a `float32` or a `float64`.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(x) => Some(x.into()),
            GgufValue::F64(x) => Some(x),
            _ => None,
        }
    }

    /// The bool, if the value is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            GgufValue::Bool(x) => Some(x),
            _ => None,
        }
    }

    /// The elements, if the value is an array.
    pub fn as_array(&self) -> Option<&[GgufValue]> {
        match self {
            GgufValue::Array(v) => Some(v),
            _ => None,
        }
    }
}

impl fmt::Display for GgufValue {
    /// The value as messages show it: numbers and bools as Rust prints them, strings quoted
    /// (cut after 40 characters), arrays as their element type and length.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GgufValue::U8(x) => write!(f, "uint8 {x}"),
            GgufValue::I8(x) => write!(f, "int8 {x}"),
            GgufValue::U16(x) => write!(f, "uint16 {x}"),
            GgufValue::I16(x) => write!(f, "int16 {x}"),
            GgufValue::U32(x) => write!(f, "uint32 {x}"),
            GgufValue::I32(x) => write!(f, "int32 {x}"),
            GgufValue::F32(x) => write!(f, "float32 {x}"),
            GgufValue::Bool(x) => write!(f, "bool {x}"),
            GgufValue::String(s) if s.chars().count() > 40 => {
                let cut: String = s.chars().take(40).collect();
                write!(f, "string {cut:?}...")
            }
            GgufValue::String(s) => write!(f, "string {s:?}"),
            GgufValue::Array(v) => match v.first() {
                Some(x) => write!(f, "array of {} {}", v.len(), x.type_name()),
                None => write!(f, "empty array"),
            },
            GgufValue::U64(x) => write!(f, "uint64 {x}"),
            GgufValue::I64(x) => write!(f, "int64 {x}"),
            GgufValue::F64(x) => write!(f, "float64 {x}"),
        }
    }
}
