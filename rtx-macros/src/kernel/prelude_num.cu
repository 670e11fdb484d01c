// rtx kernel prelude, second part: integer and bool element types, the conversions of
// rtx_kernels::Element (bit for bit what the CPU backend computes), and wrapping arithmetic.
// Included after prelude.cu by kernels over `T: Num` or `T: Element`, cast kernels and kernels
// that store f64 or i64 values into `T` buffers.
#ifndef RTX_KERNEL_PRELUDE_NUM
#define RTX_KERNEL_PRELUDE_NUM
// Integer and bool element types compute in their own type.
template <> struct rtx_elem<int> {
  typedef int acc;
  static __device__ __forceinline__ int widen(int x) { return x; }
  static __device__ __forceinline__ int narrow(int x) { return x; }
};
template <> struct rtx_elem<long long> {
  typedef long long acc;
  static __device__ __forceinline__ long long widen(long long x) { return x; }
  static __device__ __forceinline__ long long narrow(long long x) { return x; }
};
template <> struct rtx_elem<unsigned char> {
  typedef unsigned char acc;
  static __device__ __forceinline__ unsigned char widen(unsigned char x) { return x; }
  static __device__ __forceinline__ unsigned char narrow(unsigned char x) { return x; }
};
template <> struct rtx_elem<bool> {
  typedef bool acc;
  static __device__ __forceinline__ bool widen(bool x) { return x; }
  static __device__ __forceinline__ bool narrow(bool x) { return x; }
};

// f64 to bf16 as the `half` crate's bf16::from_f64 does it: the low 32 bits of the mantissa
// are dropped first, then the rest rounds to nearest (ties to even).
__device__ __forceinline__ unsigned short rtx_f64_to_bf16(double v) {
  rtx_f64_bits b;
  b.f = v;
  const unsigned int x = (unsigned int)(b.u >> 32);
  const unsigned int sign = x & 0x80000000u;
  const unsigned int exp = x & 0x7ff00000u;
  const unsigned int man = x & 0x000fffffu;
  if (exp == 0x7ff00000u) {
    const unsigned int nan_bit = (man == 0u && (unsigned int)b.u == 0u) ? 0u : 0x40u;
    return (unsigned short)((sign >> 16) | 0x7f80u | nan_bit | (man >> 13));
  }
  const unsigned int half_sign = sign >> 16;
  const int half_exp = (int)(exp >> 20) - 1023 + 127;
  if (half_exp >= 0xff) return (unsigned short)(half_sign | 0x7f80u);
  if (half_exp <= 0) {
    if (7 - half_exp > 21) return (unsigned short)half_sign;
    const unsigned int m = man | 0x00100000u;
    unsigned int half_man = m >> (14 - half_exp);
    const unsigned int round_bit = 1u << (13 - half_exp);
    if ((m & round_bit) != 0u && (m & (3u * round_bit - 1u)) != 0u) half_man += 1u;
    return (unsigned short)(half_sign | half_man);
  }
  const unsigned int bits = half_sign | ((unsigned int)half_exp << 7) | (man >> 13);
  const unsigned int round_bit = 0x00001000u;
  if ((man & round_bit) != 0u && (man & (3u * round_bit - 1u)) != 0u) return (unsigned short)(bits + 1u);
  return (unsigned short)bits;
}

// Element::from_f64: Rust's `as` (round to nearest; integers saturate and NaN becomes 0); f16
// rounds through f32, as the `half` crate does on x86 CPUs with F16C (all since 2013).
template <typename S> __device__ __forceinline__ S rtx_from_f64(double v);
template <> __device__ __forceinline__ float rtx_from_f64<float>(double v) { return (float)v; }
template <> __device__ __forceinline__ double rtx_from_f64<double>(double v) { return v; }
template <> __device__ __forceinline__ rtx_f16 rtx_from_f64<rtx_f16>(double v) {
  rtx_f16 r;
  r.bits = rtx_f32_to_f16((float)v);
  return r;
}
template <> __device__ __forceinline__ rtx_bf16 rtx_from_f64<rtx_bf16>(double v) {
  rtx_bf16 r;
  r.bits = rtx_f64_to_bf16(v);
  return r;
}
template <> __device__ __forceinline__ int rtx_from_f64<int>(double v) {
  if (v != v) return 0;
  if (v <= -2147483648.0) return (-2147483647 - 1);
  if (v >= 2147483647.0) return 2147483647;
  return (int)v;
}
template <> __device__ __forceinline__ long long rtx_from_f64<long long>(double v) {
  if (v != v) return 0ll;
  if (v <= -9223372036854775808.0) return (-9223372036854775807ll - 1ll);
  if (v >= 9223372036854775808.0) return 9223372036854775807ll;
  return (long long)v;
}
template <> __device__ __forceinline__ unsigned char rtx_from_f64<unsigned char>(double v) {
  if (v != v || v <= 0.0) return (unsigned char)0;
  if (v >= 255.0) return (unsigned char)255;
  return (unsigned char)v;
}
template <> __device__ __forceinline__ bool rtx_from_f64<bool>(double v) { return v != 0.0; }

// Element::from_i64: integers wrap, floats round to nearest (f16 and bf16 through f64).
template <typename S> __device__ __forceinline__ S rtx_from_i64(long long v);
template <> __device__ __forceinline__ float rtx_from_i64<float>(long long v) { return (float)v; }
template <> __device__ __forceinline__ double rtx_from_i64<double>(long long v) { return (double)v; }
template <> __device__ __forceinline__ rtx_f16 rtx_from_i64<rtx_f16>(long long v) { return rtx_from_f64<rtx_f16>((double)v); }
template <> __device__ __forceinline__ rtx_bf16 rtx_from_i64<rtx_bf16>(long long v) { return rtx_from_f64<rtx_bf16>((double)v); }
template <> __device__ __forceinline__ int rtx_from_i64<int>(long long v) { return (int)(unsigned int)(unsigned long long)v; }
template <> __device__ __forceinline__ long long rtx_from_i64<long long>(long long v) { return v; }
template <> __device__ __forceinline__ unsigned char rtx_from_i64<unsigned char>(long long v) { return (unsigned char)(unsigned long long)v; }
template <> __device__ __forceinline__ bool rtx_from_i64<bool>(long long v) { return v != 0ll; }

// Element::to_f64 (exact but for i64 beyond 2^53) and Element::to_i64 (floats truncate and
// saturate, NaN becomes 0).
__device__ __forceinline__ double rtx_to_f64(float x) { return (double)x; }
__device__ __forceinline__ double rtx_to_f64(double x) { return x; }
__device__ __forceinline__ double rtx_to_f64(rtx_f16 x) { return (double)rtx_f16_to_f32(x.bits); }
__device__ __forceinline__ double rtx_to_f64(rtx_bf16 x) { return (double)rtx_bf16_to_f32(x.bits); }
__device__ __forceinline__ double rtx_to_f64(int x) { return (double)x; }
__device__ __forceinline__ double rtx_to_f64(long long x) { return (double)x; }
__device__ __forceinline__ double rtx_to_f64(unsigned char x) { return (double)x; }
__device__ __forceinline__ double rtx_to_f64(bool x) { return x ? 1.0 : 0.0; }
template <typename S> __device__ __forceinline__ long long rtx_to_i64(S x) { return rtx_from_f64<long long>(rtx_to_f64(x)); }
__device__ __forceinline__ long long rtx_to_i64(int x) { return (long long)x; }
__device__ __forceinline__ long long rtx_to_i64(long long x) { return x; }
__device__ __forceinline__ long long rtx_to_i64(unsigned char x) { return (long long)x; }
__device__ __forceinline__ long long rtx_to_i64(bool x) { return x ? 1ll : 0ll; }

// Element::cast: between integer (or bool) types through i64, exactly; otherwise through f64.
template <typename S> struct rtx_is_int { static const bool value = false; };
template <> struct rtx_is_int<int> { static const bool value = true; };
template <> struct rtx_is_int<long long> { static const bool value = true; };
template <> struct rtx_is_int<unsigned char> { static const bool value = true; };
template <> struct rtx_is_int<bool> { static const bool value = true; };
template <typename S, typename D> __device__ __forceinline__ D rtx_cast(S x) {
  if (rtx_is_int<S>::value && rtx_is_int<D>::value) return rtx_from_i64<D>(rtx_to_i64(x));
  return rtx_from_f64<D>(rtx_to_f64(x));
}

// Arithmetic of `Num` on compute types: floats as they are; integers wrap (through their
// unsigned twin, as signed overflow is undefined in C++) and divide by zero (or MIN by -1)
// into 0.
__device__ __forceinline__ float rtx_add(float a, float b) { return a + b; }
__device__ __forceinline__ double rtx_add(double a, double b) { return a + b; }
__device__ __forceinline__ int rtx_add(int a, int b) { return (int)((unsigned int)a + (unsigned int)b); }
__device__ __forceinline__ long long rtx_add(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
__device__ __forceinline__ unsigned char rtx_add(unsigned char a, unsigned char b) { return (unsigned char)((unsigned int)a + (unsigned int)b); }
__device__ __forceinline__ float rtx_sub(float a, float b) { return a - b; }
__device__ __forceinline__ double rtx_sub(double a, double b) { return a - b; }
__device__ __forceinline__ int rtx_sub(int a, int b) { return (int)((unsigned int)a - (unsigned int)b); }
__device__ __forceinline__ long long rtx_sub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
__device__ __forceinline__ unsigned char rtx_sub(unsigned char a, unsigned char b) { return (unsigned char)((unsigned int)a - (unsigned int)b); }
__device__ __forceinline__ float rtx_mul(float a, float b) { return a * b; }
__device__ __forceinline__ double rtx_mul(double a, double b) { return a * b; }
__device__ __forceinline__ int rtx_mul(int a, int b) { return (int)((unsigned int)a * (unsigned int)b); }
__device__ __forceinline__ long long rtx_mul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
__device__ __forceinline__ unsigned char rtx_mul(unsigned char a, unsigned char b) { return (unsigned char)((unsigned int)a * (unsigned int)b); }
__device__ __forceinline__ float rtx_div(float a, float b) { return a / b; }
__device__ __forceinline__ double rtx_div(double a, double b) { return a / b; }
__device__ __forceinline__ int rtx_div(int a, int b) {
  return (b == 0 || (b == -1 && a == (-2147483647 - 1))) ? 0 : a / b;
}
__device__ __forceinline__ long long rtx_div(long long a, long long b) {
  return (b == 0ll || (b == -1ll && a == (-9223372036854775807ll - 1ll))) ? 0ll : a / b;
}
__device__ __forceinline__ unsigned char rtx_div(unsigned char a, unsigned char b) {
  return b == 0 ? (unsigned char)0 : (unsigned char)(a / b);
}
__device__ __forceinline__ float rtx_neg(float a) { return -a; }
__device__ __forceinline__ double rtx_neg(double a) { return -a; }
__device__ __forceinline__ int rtx_neg(int a) { return (int)(0u - (unsigned int)a); }
__device__ __forceinline__ long long rtx_neg(long long a) { return (long long)(0ull - (unsigned long long)a); }
__device__ __forceinline__ unsigned char rtx_neg(unsigned char a) { return (unsigned char)(0u - (unsigned int)a); }
__device__ __forceinline__ int rtx_abs(int a) { return a < 0 ? rtx_neg(a) : a; }
__device__ __forceinline__ long long rtx_abs(long long a) { return a < 0ll ? rtx_neg(a) : a; }
__device__ __forceinline__ unsigned char rtx_abs(unsigned char a) { return a; }

// The identities of max and min (`T::LOWEST`, `T::HIGHEST`).
template <typename A> __device__ __forceinline__ A rtx_lowest();
template <> __device__ __forceinline__ float rtx_lowest<float>() { return -rtx_inf<float>(); }
template <> __device__ __forceinline__ double rtx_lowest<double>() { return -rtx_inf<double>(); }
template <> __device__ __forceinline__ int rtx_lowest<int>() { return (-2147483647 - 1); }
template <> __device__ __forceinline__ long long rtx_lowest<long long>() { return (-9223372036854775807ll - 1ll); }
template <> __device__ __forceinline__ unsigned char rtx_lowest<unsigned char>() { return (unsigned char)0; }
template <> __device__ __forceinline__ bool rtx_lowest<bool>() { return false; }
template <typename A> __device__ __forceinline__ A rtx_highest();
template <> __device__ __forceinline__ float rtx_highest<float>() { return rtx_inf<float>(); }
template <> __device__ __forceinline__ double rtx_highest<double>() { return rtx_inf<double>(); }
template <> __device__ __forceinline__ int rtx_highest<int>() { return 2147483647; }
template <> __device__ __forceinline__ long long rtx_highest<long long>() { return 9223372036854775807ll; }
template <> __device__ __forceinline__ unsigned char rtx_highest<unsigned char>() { return (unsigned char)255; }
template <> __device__ __forceinline__ bool rtx_highest<bool>() { return true; }

// Warp shuffles of the one-byte compute types, through int.
__device__ __forceinline__ unsigned char rtx_shfl_down(unsigned char v, unsigned int o) { return (unsigned char)rtx_shfl_down((int)v, o); }
__device__ __forceinline__ bool rtx_shfl_down(bool v, unsigned int o) { return rtx_shfl_down((int)v, o) != 0; }
__device__ __forceinline__ unsigned char rtx_shfl_xor(unsigned char v, unsigned int m) { return (unsigned char)rtx_shfl_xor((int)v, m); }
__device__ __forceinline__ bool rtx_shfl_xor(bool v, unsigned int m) { return rtx_shfl_xor((int)v, m) != 0; }
#endif // RTX_KERNEL_PRELUDE_NUM
