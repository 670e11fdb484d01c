// rtx kernel prelude: what every generated kernel needs, with no header (NVRTC finds none).
#ifndef RTX_KERNEL_PRELUDE
#define RTX_KERNEL_PRELUDE
// f16 and bf16 travel as their 16-bit patterns and are computed in float.
struct rtx_f16 { unsigned short bits; };
struct rtx_bf16 { unsigned short bits; };
// Layout structs of strided elementwise entries (rtx_kernels::kernel::{KernelShape, KernelStrides}).
struct rtx_shape { unsigned int rank; unsigned int vectors; unsigned long long dims[6]; };
struct rtx_strides { long long offset; long long strides[6]; };
union rtx_f32_bits { float f; unsigned int u; };
union rtx_f64_bits { double f; unsigned long long u; };
struct alignas(16) rtx_u4 { unsigned int a, b, c, d; };

// Every entry point starts with RTX_ENTRY(). On Hopper the launcher may start a kernel while
// the one before it in the stream is still finishing (programmatic dependent launch), so that
// the launch and the blocks' start overlap the previous kernel's tail. The entry first lets the
// next kernel launch, then waits until the previous one has finished and its writes are
// visible: no entry touches memory before that. Launched the ordinary way, both are no-ops.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define RTX_ENTRY() asm volatile("griddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;" ::: "memory")
#else
#define RTX_ENTRY()
#endif

// The conversions are the hardware's (cvt, exact or rounded to nearest even) where the GPU has
// them, with NaN mapped to the bit patterns the CPU side (the `half` crate) gives, so every
// device agrees bit for bit; the integer forms after them are the same functions in software.
__device__ __forceinline__ float rtx_f16_to_f32(unsigned short h) {
  const unsigned int sign = ((unsigned int)h & 0x8000u) << 16;
  const unsigned int e = ((unsigned int)h >> 10) & 0x1fu;
  const unsigned int m = (unsigned int)h & 0x3ffu;
  rtx_f32_bits r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 530
  asm("cvt.f32.f16 %0, %1;" : "=f"(r.f) : "h"(h));
  if (e == 0x1fu && m != 0u) r.u = sign | 0x7f800000u | (m << 13);
#else
  if (e == 0x1fu) {
    r.u = sign | 0x7f800000u | (m << 13);
  } else if (e != 0u) {
    r.u = sign | ((e + 112u) << 23) | (m << 13);
  } else {
    // Zero or subnormal: m * 2^-24 is exact in float.
    r.f = (float)m * 5.9604644775390625e-8f;
    r.u |= sign;
  }
#endif
  return r.f;
}

// Round to nearest, ties to even; NaN stays a (quiet) NaN.
__device__ __forceinline__ unsigned short rtx_f32_to_f16(float f) {
  rtx_f32_bits b;
  b.f = f;
  const unsigned int sign = (b.u >> 16) & 0x8000u;
  const unsigned int ax = b.u & 0x7fffffffu;
  if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 530
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    if (ax < 0x33000000u) return (unsigned short)sign;
    const unsigned int m = (ax & 0x7fffffu) | 0x800000u;
    const unsigned int s = 126u - (ax >> 23);
    unsigned int r = m >> s;
    const unsigned int rem = m & ((1u << s) - 1u);
    const unsigned int half = 1u << (s - 1u);
    if (rem > half || (rem == half && (r & 1u))) r += 1u;
    return (unsigned short)(sign | r);
  }
  unsigned int r = (ax - 0x38000000u) >> 13;
  const unsigned int rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r += 1u;
  return (unsigned short)(sign | r);
#endif
}

__device__ __forceinline__ float rtx_bf16_to_f32(unsigned short h) {
  rtx_f32_bits r;
  r.u = (unsigned int)h << 16;
  return r.f;
}

__device__ __forceinline__ unsigned short rtx_f32_to_bf16(float f) {
  rtx_f32_bits b;
  b.f = f;
  if ((b.u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b.u >> 16) | 0x40u);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  return (unsigned short)((b.u + 0x7fffu + ((b.u >> 16) & 1u)) >> 16);
#endif
}

// Storage type S -> compute type acc, and back.
template <typename S> struct rtx_elem;
template <> struct rtx_elem<float> {
  typedef float acc;
  static __device__ __forceinline__ float widen(float x) { return x; }
  static __device__ __forceinline__ float narrow(float x) { return x; }
};
template <> struct rtx_elem<double> {
  typedef double acc;
  static __device__ __forceinline__ double widen(double x) { return x; }
  static __device__ __forceinline__ double narrow(double x) { return x; }
};
template <> struct rtx_elem<rtx_f16> {
  typedef float acc;
  static __device__ __forceinline__ float widen(rtx_f16 x) { return rtx_f16_to_f32(x.bits); }
  static __device__ __forceinline__ rtx_f16 narrow(float x) { rtx_f16 r; r.bits = rtx_f32_to_f16(x); return r; }
};
template <> struct rtx_elem<rtx_bf16> {
  typedef float acc;
  static __device__ __forceinline__ float widen(rtx_bf16 x) { return rtx_bf16_to_f32(x.bits); }
  static __device__ __forceinline__ rtx_bf16 narrow(float x) { rtx_bf16 r; r.bits = rtx_f32_to_bf16(x); return r; }
};

// 16 bytes of elements, loaded and stored as one vector access.
template <typename S> union rtx_vec {
  rtx_u4 raw;
  S v[16 / sizeof(S)];
};
template <typename S> __device__ __forceinline__ bool rtx_aligned16(const S* p) {
  return ((unsigned long long)p & 15ull) == 0ull;
}
template <typename S> __device__ __forceinline__ rtx_vec<S> rtx_load_vec(const S* p, unsigned long long v) {
  rtx_vec<S> r;
  r.raw = reinterpret_cast<const rtx_u4*>(p)[v];
  return r;
}
template <typename S> __device__ __forceinline__ void rtx_store_vec(S* p, unsigned long long v, rtx_vec<S> x) {
  reinterpret_cast<rtx_u4*>(p)[v] = x.raw;
}
// N elements of T moved as one access of N * sizeof(T) bytes (strided entries' vector path,
// where bool masks travel beside 16-byte element vectors).
template <int B> struct rtx_raw;
template <> struct rtx_raw<16> { typedef rtx_u4 t; };
template <> struct rtx_raw<8> { typedef unsigned long long t; };
template <> struct rtx_raw<4> { typedef unsigned int t; };
template <> struct rtx_raw<2> { typedef unsigned short t; };
template <> struct rtx_raw<1> { typedef unsigned char t; };
template <typename T, unsigned int N> union rtx_pack {
  typename rtx_raw<sizeof(T) * N>::t raw;
  T v[N];
};
template <typename T, unsigned int N> __device__ __forceinline__ rtx_pack<T, N> rtx_load_pack(const T* p) {
  rtx_pack<T, N> r;
  r.raw = *reinterpret_cast<const typename rtx_raw<sizeof(T) * N>::t*>(p);
  return r;
}
template <typename T, unsigned int N> __device__ __forceinline__ rtx_pack<T, N> rtx_splat_pack(T x) {
  rtx_pack<T, N> r;
  for (unsigned int k = 0; k < N; ++k) r.v[k] = x;
  return r;
}
template <typename T, unsigned int N> __device__ __forceinline__ void rtx_store_pack(T* p, rtx_pack<T, N> x) {
  *reinterpret_cast<typename rtx_raw<sizeof(T) * N>::t*>(p) = x.raw;
}

// Math in the compute type.
__device__ __forceinline__ float rtx_exp(float x) { return expf(x); }
__device__ __forceinline__ double rtx_exp(double x) { return exp(x); }
// One hardware instruction (about 2 ulp); a result below 2^-126 is flushed to zero.
__device__ __forceinline__ float rtx_exp2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ double rtx_exp2(double x) { return exp2(x); }
__device__ __forceinline__ float rtx_ln(float x) { return logf(x); }
__device__ __forceinline__ double rtx_ln(double x) { return log(x); }
__device__ __forceinline__ float rtx_ln_1p(float x) { return log1pf(x); }
__device__ __forceinline__ double rtx_ln_1p(double x) { return log1p(x); }
__device__ __forceinline__ float rtx_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double rtx_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float rtx_sin(float x) { return sinf(x); }
__device__ __forceinline__ double rtx_sin(double x) { return sin(x); }
__device__ __forceinline__ float rtx_cos(float x) { return cosf(x); }
__device__ __forceinline__ double rtx_cos(double x) { return cos(x); }
__device__ __forceinline__ float rtx_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double rtx_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float rtx_erf(float x) { return erff(x); }
__device__ __forceinline__ double rtx_erf(double x) { return erf(x); }
__device__ __forceinline__ float rtx_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double rtx_abs(double x) { return fabs(x); }
__device__ __forceinline__ float rtx_powf(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double rtx_powf(double x, double y) { return pow(x, y); }
__device__ __forceinline__ float rtx_mul_add(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double rtx_mul_add(double a, double b, double c) { return fma(a, b, c); }
__device__ __forceinline__ float rtx_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double rtx_max(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ float rtx_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ double rtx_min(double a, double b) { return fmin(a, b); }
template <typename I> __device__ __forceinline__ I rtx_max(I a, I b) { return a < b ? b : a; }
template <typename I> __device__ __forceinline__ I rtx_min(I a, I b) { return b < a ? b : a; }
// Repeated squaring, the same steps as rtx_kernels::kernel::rt::powi.
template <typename A> __device__ __forceinline__ A rtx_powi(A x, int n) {
  A base = x;
  unsigned int e = n < 0 ? 0u - (unsigned int)n : (unsigned int)n;
  A acc = A(1.0);
  while (e > 0u) {
    if (e & 1u) acc = acc * base;
    base = base * base;
    e >>= 1;
  }
  return n < 0 ? A(1.0) / acc : acc;
}
template <typename A> __device__ __forceinline__ A rtx_inf();
template <> __device__ __forceinline__ float rtx_inf<float>() { rtx_f32_bits b; b.u = 0x7f800000u; return b.f; }
template <> __device__ __forceinline__ double rtx_inf<double>() { rtx_f64_bits b; b.u = 0x7ff0000000000000ull; return b.f; }
template <typename A> __device__ __forceinline__ A rtx_nan();
template <> __device__ __forceinline__ float rtx_nan<float>() { rtx_f32_bits b; b.u = 0x7fc00000u; return b.f; }
template <> __device__ __forceinline__ double rtx_nan<double>() { rtx_f64_bits b; b.u = 0x7ff8000000000000ull; return b.f; }

// Threads, warps and atomics.
__device__ __forceinline__ unsigned int rtx_linear_tid() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ float rtx_shfl_down(float v, unsigned int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ int rtx_shfl_down(int v, unsigned int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ unsigned int rtx_shfl_down(unsigned int v, unsigned int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ unsigned long long rtx_shfl_down(unsigned long long v, unsigned int o) {
  unsigned int lo = __shfl_down_sync(0xffffffffu, (unsigned int)v, o);
  unsigned int hi = __shfl_down_sync(0xffffffffu, (unsigned int)(v >> 32), o);
  return ((unsigned long long)hi << 32) | lo;
}
__device__ __forceinline__ long long rtx_shfl_down(long long v, unsigned int o) {
  return (long long)rtx_shfl_down((unsigned long long)v, o);
}
__device__ __forceinline__ double rtx_shfl_down(double v, unsigned int o) {
  rtx_f64_bits b;
  b.f = v;
  b.u = rtx_shfl_down(b.u, o);
  return b.f;
}
__device__ __forceinline__ float rtx_shfl_xor(float v, unsigned int m) { return __shfl_xor_sync(0xffffffffu, v, (int)m); }
__device__ __forceinline__ int rtx_shfl_xor(int v, unsigned int m) { return __shfl_xor_sync(0xffffffffu, v, (int)m); }
__device__ __forceinline__ unsigned int rtx_shfl_xor(unsigned int v, unsigned int m) { return __shfl_xor_sync(0xffffffffu, v, (int)m); }
__device__ __forceinline__ unsigned long long rtx_shfl_xor(unsigned long long v, unsigned int m) {
  unsigned int lo = __shfl_xor_sync(0xffffffffu, (unsigned int)v, (int)m);
  unsigned int hi = __shfl_xor_sync(0xffffffffu, (unsigned int)(v >> 32), (int)m);
  return ((unsigned long long)hi << 32) | lo;
}
__device__ __forceinline__ long long rtx_shfl_xor(long long v, unsigned int m) {
  return (long long)rtx_shfl_xor((unsigned long long)v, m);
}
__device__ __forceinline__ double rtx_shfl_xor(double v, unsigned int m) {
  rtx_f64_bits b;
  b.f = v;
  b.u = rtx_shfl_xor(b.u, m);
  return b.f;
}
// Each returns the element's value before the add (`let old = atomic_add(..)`).
__device__ __forceinline__ float rtx_atomic_add(float* p, float v) { return atomicAdd(p, v); }
__device__ __forceinline__ double rtx_atomic_add(double* p, double v) { return atomicAdd(p, v); }
__device__ __forceinline__ int rtx_atomic_add(int* p, int v) { return atomicAdd(p, v); }
__device__ __forceinline__ unsigned int rtx_atomic_add(unsigned int* p, unsigned int v) {
  return atomicAdd(p, v);
}
__device__ __forceinline__ unsigned long long rtx_atomic_add(unsigned long long* p,
                                                             unsigned long long v) {
  return atomicAdd(p, v);
}
__device__ __forceinline__ long long rtx_atomic_add(long long* p, long long v) {
  return (long long)atomicAdd((unsigned long long*)p, (unsigned long long)v);
}
// 16-bit floats: compare-and-swap on the aligned 32-bit word holding the element; the old
// value widened.
template <typename H> __device__ __forceinline__ float rtx_atomic_add_16(H* p, float v) {
  unsigned int* w = (unsigned int*)((unsigned long long)p & ~3ull);
  const unsigned int shift = ((unsigned long long)p & 2ull) ? 16u : 0u;
  unsigned int old = *w;
  unsigned int assumed;
  H h;
  do {
    assumed = old;
    h.bits = (unsigned short)(assumed >> shift);
    const H sum = rtx_elem<H>::narrow(rtx_elem<H>::widen(h) + v);
    const unsigned int next = (assumed & ~(0xffffu << shift)) | ((unsigned int)sum.bits << shift);
    old = atomicCAS(w, assumed, next);
  } while (old != assumed);
  return rtx_elem<H>::widen(h);
}
__device__ __forceinline__ float rtx_atomic_add(rtx_f16* p, float v) { return rtx_atomic_add_16(p, v); }
__device__ __forceinline__ float rtx_atomic_add(rtx_bf16* p, float v) { return rtx_atomic_add_16(p, v); }
__device__ __forceinline__ void rtx_thread_fence() { __threadfence(); }
// grid_sync(): every block of a cooperative launch (all resident at once) waits here for the
// others. One arrival counter per module: block 0 adds 2^31 - (blocks - 1) and each other block
// 1, so every barrier flips the counter's top bit and leaves its low bits as they were, and it
// needs no reset between barriers or launches. Thread 0 arrives for its block after the block's
// barrier, with a release add (the block's writes, ordered before it by the barrier, are seen
// by whoever acquires the flip), and polls with acquire loads (the other blocks' writes are
// seen by its block's threads after the second barrier): no full fence either side.
__device__ unsigned int rtx_grid_arrived;
__device__ __forceinline__ void rtx_grid_sync() {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
    const bool first = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
    const unsigned int add = first ? 0x80000000u - (blocks - 1u) : 1u;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    unsigned int old, now;
    asm volatile("atom.add.release.gpu.u32 %0, [%1], %2;"
                 : "=r"(old) : "l"(&rtx_grid_arrived), "r"(add) : "memory");
    do {
      asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(now) : "l"(&rtx_grid_arrived) : "memory");
    } while (((old ^ now) & 0x80000000u) == 0u);
#else
    __threadfence();
    const unsigned int old = atomicAdd(&rtx_grid_arrived, add);
    while (((old ^ *(volatile unsigned int*)&rtx_grid_arrived) & 0x80000000u) == 0u) {
    }
    __threadfence();
#endif
  }
  __syncthreads();
}
#endif // RTX_KERNEL_PRELUDE
// rtx tensor-core prelude: the inline PTX behind #[kernel]'s tensor-core intrinsics (sm_80 and
// newer), with no header. Fragment layouts are PTX's (rtx_kernels::kernel::tensor_core
// documents them and emulates each instruction on the CPU).
#ifndef RTX_KERNEL_PRELUDE_MMA
#define RTX_KERNEL_PRELUDE_MMA
// The shared-window address of a generic pointer into shared memory, as ldmatrix and cp.async
// take it (32 bits suffice: the window is smaller than 4 GiB).
__device__ __forceinline__ unsigned int rtx_smem_addr(const void* p) {
  unsigned int a;
  asm("{ .reg .u64 rtx_s; cvta.to.shared.u64 rtx_s, %1; cvt.u32.u64 %0, rtx_s; }" : "=r"(a) : "l"(p));
  return a;
}
// The global-window address of a generic pointer into global memory.
__device__ __forceinline__ unsigned long long rtx_global_addr(const void* p) {
  unsigned long long g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(p));
  return g;
}
// Callers pass a tile's address as rtx_smem_addr(tile) + 4 * word, and a source's as
// rtx_global_addr(src) plus the byte offset, so the conversions (opaque to the compiler, as
// inline PTX) are computed once per array rather than once per instruction.
// cp.async of 16 bytes (.cg: cached in L2 only, the tile goes to shared memory anyway): n
// elements of src from index on (at most 16 bytes' worth), the rest of the 16 bytes zeroed.
// With n = 0 nothing is read, and the address given is src itself, in bounds.
template <typename S>
__device__ __forceinline__ void rtx_cp_async16(unsigned int dst, unsigned long long src, unsigned long long index, unsigned long long n) {
  const unsigned long long most = 16ull / sizeof(S);
  const unsigned int bytes = (unsigned int)((n < most ? n : most) * sizeof(S));
  const unsigned long long from = bytes != 0u ? src + index * sizeof(S) : src;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(from), "r"(bytes) : "memory");
}
__device__ __forceinline__ void rtx_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// PTX takes the count of groups left pending as an immediate.
template <int N> __device__ __forceinline__ void rtx_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// ldmatrix: each lane gives one 16-byte row (lanes 8m..8m+7 the rows of matrix m) and receives
// one 32-bit word of each matrix.
__device__ __forceinline__ void rtx_ldmatrix_x1(unsigned int& r0, unsigned int row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(row));
}
__device__ __forceinline__ void rtx_ldmatrix_x2(unsigned int& r0, unsigned int& r1, unsigned int row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(row));
}
__device__ __forceinline__ void rtx_ldmatrix_x4(unsigned int& r0, unsigned int& r1, unsigned int& r2, unsigned int& r3, unsigned int row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(row));
}
__device__ __forceinline__ void rtx_ldmatrix_x1_trans(unsigned int& r0, unsigned int row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(row));
}
__device__ __forceinline__ void rtx_ldmatrix_x2_trans(unsigned int& r0, unsigned int& r1, unsigned int row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(row));
}
__device__ __forceinline__ void rtx_ldmatrix_x4_trans(unsigned int& r0, unsigned int& r1, unsigned int& r2, unsigned int& r3, unsigned int row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(row));
}
// D = A B + C on a 16 x 8 x 16 tile, in place on the accumulator (D is C), f32 accumulation;
// the element type of A and B is the storage type S.
template <typename S> struct rtx_mma;
template <> struct rtx_mma<rtx_bf16> {
  static __device__ __forceinline__ void m16n8k16(float& d0, float& d1, float& d2, float& d3, unsigned int a0, unsigned int a1,
                                                  unsigned int a2, unsigned int a3, unsigned int b0, unsigned int b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
};
template <> struct rtx_mma<rtx_f16> {
  static __device__ __forceinline__ void m16n8k16(float& d0, float& d1, float& d2, float& d3, unsigned int a0, unsigned int a1,
                                                  unsigned int a2, unsigned int a3, unsigned int b0, unsigned int b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
};
// Two compute-type values rounded to S and packed into one word, lo in the low half: one cvt
// of the pair (a NaN becomes the canonical NaN here: packed words only feed mma operands).
template <typename S> __device__ __forceinline__ unsigned int rtx_pack2(float lo, float hi);
template <> __device__ __forceinline__ unsigned int rtx_pack2<rtx_bf16>(float lo, float hi) {
  unsigned int r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <> __device__ __forceinline__ unsigned int rtx_pack2<rtx_f16>(float lo, float hi) {
  unsigned int r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// store2: o[0] = lo and o[1] = hi as one 32-bit store (o is 4-byte aligned: an even index).
template <typename S> __device__ __forceinline__ void rtx_store2(S* o, float lo, float hi) {
  *reinterpret_cast<unsigned int*>(o) = rtx_pack2<S>(lo, hi);
}
// Hopper's warpgroup products (sm_90a). A tile operand is K-major in the 128-byte swizzle:
// rows of 64 16-bit elements (128 bytes), 16-byte chunk c of row r at chunk c ^ (r % 8), 8-row
// groups 1024 bytes apart, the tile on a 1024-byte boundary (the hardware takes the swizzle
// from the address bits). Its descriptor: the start address and the group stride (1024
// bytes) in 16-byte units, the leading offset unused (1), swizzle mode 1 (128 bytes).
__device__ __forceinline__ unsigned long long rtx_wgmma_desc(unsigned int addr) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
// The descriptor of an N-major (MN-major) tile in the 128-byte swizzle: K rows of 64-element
// panels, 8-row groups 1024 bytes apart (the stride byte offset), panels `panel` bytes apart
// (the leading byte offset); the instruction's trans-b bit says the tile is N-major.
__device__ __forceinline__ unsigned long long rtx_wgmma_desc_mn(unsigned int addr, unsigned int panel) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)((panel >> 4) & 0x3FFFu) << 16) | (64ull << 32) | (1ull << 62);
}
// Whether the storage type S is bf16 (else f16): the instruction names the type in its text.
template <typename S> struct rtx_is_bf16 { static const bool value = false; };
template <> struct rtx_is_bf16<rtx_bf16> { static const bool value = true; };
__device__ __forceinline__ void rtx_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void rtx_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N groups are pending, then passes every accumulator register through an
// empty asm, so no read of the accumulator is moved above the wait.
template <int N, typename A, int L> __device__ __forceinline__ void rtx_wgmma_wait(A (&acc)[L]) {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#pragma unroll
  for (int i = 0; i < L; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}
// Makes this thread's earlier shared-memory writes (stores, landed cp.async copies) visible to
// the async proxy, through which wgmma reads its tiles.
__device__ __forceinline__ void rtx_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Hopper's tensor memory accelerator. A tensor map is the 128-byte CUtensorMap the launcher
// encodes (cuTensorMapEncodeTiled); the kernel takes it as a __grid_constant__ parameter, and
// the copy reads it there by its generic address.
struct __align__(64) rtx_tensor_map { unsigned long long opaque[16]; };
__device__ __forceinline__ void rtx_mbarrier_init(unsigned int bar, unsigned int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void rtx_mbarrier_arrive(unsigned int bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void rtx_mbarrier_arrive_expect_tx(unsigned int bar, unsigned int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// try_wait suspends the thread for a time the hardware chooses, so the loop spins little.
__device__ __forceinline__ void rtx_mbarrier_wait(unsigned int bar, unsigned int parity) {
  asm volatile(
      "{\n .reg .pred p;\n RTX_MBAR_WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra RTX_MBAR_WAIT;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void rtx_tma_load_2d(unsigned int dst, const rtx_tensor_map* map, int col, int row, unsigned int bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"((unsigned long long)map), "r"(col), "r"(row), "r"(bar) : "memory");
}
#endif // RTX_KERNEL_PRELUDE_MMA

// `matmul_tc`: SIMT kernel generated by #[kernel] from Rust.
#ifndef RTX_DYN_SHARED
#define RTX_DYN_SHARED extern __shared__ __align__(16)
#endif
template <typename S, typename A>
__device__ __forceinline__ void matmul_tc_impl(const S* a, const S* b, S* c, unsigned long long m, unsigned long long n, unsigned long long k) {
  RTX_DYN_SHARED unsigned char rtx_dyn_shared[];
  unsigned int (&sa)[12288] = *reinterpret_cast<unsigned int (*)[12288]>(rtx_dyn_shared + (0));
  unsigned int (&sb)[12288] = *reinterpret_cast<unsigned int (*)[12288]>(rtx_dyn_shared + ((((0) + 12288 * sizeof(unsigned int) + 15) & ~15ull)));
  unsigned int tid = ((unsigned int)(((unsigned long long)threadIdx.x)));
  unsigned int lane = (tid % 32u);
  unsigned int wm = ((tid / 32u) / 4u);
  unsigned int wn = ((tid / 32u) % 4u);
  unsigned long long m0 = (((unsigned long long)blockIdx.y) * 128ull);
  unsigned long long n0 = (((unsigned long long)blockIdx.x) * 128ull);
  bool aligned = (((k % 8ull) == 0ull) && ((n % 8ull) == 0ull));
  unsigned long long tiles = ((k + 63ull) / 64ull);
  unsigned int quad = (lane / 8u);
  unsigned int r8 = (lane % 8u);
  unsigned int a_row = ((((wm * 64u) + ((quad % 2u) * 8u)) + r8) * 32u);
  unsigned int b_row = ((((quad % 2u) * 8u) + r8) * 64u);
  unsigned int b_chunk = ((wn * 4u) + (quad / 2u));
  unsigned int ar = (tid / 8u);
  unsigned long long a_col = ((unsigned long long)(((tid % 8u) * 8u)));
  unsigned long long a_src = (((m0 + ((unsigned long long)(ar))) * k) + a_col);
  unsigned int a_dst = ((ar * 32u) + (((tid % 8u) ^ (ar % 8u)) * 4u));
  unsigned int br = (tid / 16u);
  unsigned long long b_col = (n0 + ((unsigned long long)(((tid % 16u) * 8u))));
  unsigned int b_dst = ((br * 64u) + (((tid % 16u) ^ (br % 8u)) * 4u));
  const A rtx_t0 = A(0.0);
  A acc[64];
  #pragma unroll
  for (int rtx_t1 = 0; rtx_t1 < 64; ++rtx_t1) acc[rtx_t1] = rtx_t0;
  const unsigned int rtx_t2 = 0u;
  unsigned int af[32];
  #pragma unroll
  for (int rtx_t3 = 0; rtx_t3 < 32; ++rtx_t3) af[rtx_t3] = rtx_t2;
  const unsigned int rtx_t4 = 0u;
  unsigned int bf[16];
  #pragma unroll
  for (int rtx_t5 = 0; rtx_t5 < 16; ++rtx_t5) bf[rtx_t5] = rtx_t4;
  unsigned long long kt = 0ull;
  unsigned int load_stage = 0u;
  unsigned int use_stage = 0u;
  while ((kt < ((tiles + 3ull) - 1ull))) {
    rtx_cp_async_wait<1>();
    __syncthreads();
    if ((kt < tiles)) {
      unsigned int stage = (load_stage * 4096u);
      unsigned long long k0 = (kt * 64ull);
      #pragma unroll
      for (unsigned long long i = 0ull; i < 4ull; i += 1) {
        bool row_ok = (((m0 + ((unsigned long long)(ar))) + (32ull * i)) < m);
        unsigned long long gk = (k0 + a_col);
        unsigned long long src = ((a_src + ((32ull * i) * k)) + k0);
        unsigned long long gkb = ((k0 + ((unsigned long long)(br))) + (16ull * i));
        unsigned long long gn = b_col;
        unsigned long long dst = ((unsigned long long)(((stage + a_dst) + (((unsigned int)(i)) * 1024u))));
        unsigned long long bdst = ((unsigned long long)(((stage + b_dst) + (((unsigned int)(i)) * 1024u))));
        if (aligned) {
          unsigned long long na = ((row_ok && (gk < k)) ? (k - gk) : 0ull);
          rtx_cp_async16<S>((rtx_smem_addr(sa) + 4u * (unsigned int)(dst)), rtx_global_addr(a), src, na);
          unsigned long long nb = (((gkb < k) && (gn < n)) ? (n - gn) : 0ull);
          rtx_cp_async16<S>((rtx_smem_addr(sb) + 4u * (unsigned int)(bdst)), rtx_global_addr(b), ((gkb * n) + gn), nb);
        } else {
          #pragma unroll
          for (unsigned long long p = 0ull; p < 4ull; p += 1) {
            unsigned long long e = (gk + (2ull * p));
            A lo = ((row_ok && (e < k)) ? rtx_elem<S>::widen(a[(src + (2ull * p))]) : A(0.0));
            A hi = ((row_ok && ((e + 1ull) < k)) ? rtx_elem<S>::widen(a[((src + (2ull * p)) + 1ull)]) : A(0.0));
            sa[(dst + p)] = rtx_pack2<S>(lo, hi);
            unsigned long long f = (gn + (2ull * p));
            A lo_1 = (((gkb < k) && (f < n)) ? rtx_elem<S>::widen(b[((gkb * n) + f)]) : A(0.0));
            A hi_1 = (((gkb < k) && ((f + 1ull) < n)) ? rtx_elem<S>::widen(b[(((gkb * n) + f) + 1ull)]) : A(0.0));
            sb[(bdst + p)] = rtx_pack2<S>(lo_1, hi_1);
          }
        }
      }
      load_stage = ((load_stage == 2u) ? 0u : (load_stage + 1u));
    }
    rtx_cp_async_commit();
    if ((kt >= (3ull - 1ull))) {
      unsigned int stage_1 = (use_stage * 4096u);
      #pragma unroll
      for (unsigned long long step = 0ull; step < 5ull; step += 1) {
        if ((step < 4ull)) {
          unsigned long long fa = ((step % 2ull) * 16ull);
          unsigned long long fb = ((step % 2ull) * 8ull);
          #pragma unroll
          for (unsigned long long mi = 0ull; mi < 4ull; mi += 1) {
            unsigned int chunk = (((2u * ((unsigned int)(step))) + (quad / 2u)) ^ r8);
            unsigned int word = (((stage_1 + a_row) + (((unsigned int)(mi)) * 512u)) + (chunk * 4u));
            rtx_ldmatrix_x4(af[((fa + (mi * 4ull))) + 0ull], af[((fa + (mi * 4ull))) + 1ull], af[((fa + (mi * 4ull))) + 2ull], af[((fa + (mi * 4ull))) + 3ull], (rtx_smem_addr(sa) + 4u * (unsigned int)(((unsigned long long)(word)))));
          }
          #pragma unroll
          for (unsigned long long nj = 0ull; nj < 2ull; nj += 1) {
            unsigned int chunk_1 = ((b_chunk + (((unsigned int)(nj)) * 2u)) ^ r8);
            unsigned int word_1 = (((stage_1 + (((unsigned int)(step)) * 1024u)) + b_row) + (chunk_1 * 4u));
            rtx_ldmatrix_x4_trans(bf[((fb + (nj * 4ull))) + 0ull], bf[((fb + (nj * 4ull))) + 1ull], bf[((fb + (nj * 4ull))) + 2ull], bf[((fb + (nj * 4ull))) + 3ull], (rtx_smem_addr(sb) + 4u * (unsigned int)(((unsigned long long)(word_1)))));
          }
        }
        if ((step > 0ull)) {
          unsigned long long fa_1 = (((step - 1ull) % 2ull) * 16ull);
          unsigned long long fb_1 = (((step - 1ull) % 2ull) * 8ull);
          #pragma unroll
          for (unsigned long long mi_1 = 0ull; mi_1 < 4ull; mi_1 += 1) {
            #pragma unroll
            for (unsigned long long nt = 0ull; nt < 4ull; nt += 1) {
              unsigned long long at = (((mi_1 * 4ull) + nt) * 4ull);
              rtx_mma<S>::m16n8k16(acc[(at) + 0ull], acc[(at) + 1ull], acc[(at) + 2ull], acc[(at) + 3ull], af[((fa_1 + (mi_1 * 4ull))) + 0ull], af[((fa_1 + (mi_1 * 4ull))) + 1ull], af[((fa_1 + (mi_1 * 4ull))) + 2ull], af[((fa_1 + (mi_1 * 4ull))) + 3ull], bf[((fb_1 + (nt * 2ull))) + 0ull], bf[((fb_1 + (nt * 2ull))) + 1ull]);
            }
          }
        }
      }
      use_stage = ((use_stage == 2u) ? 0u : (use_stage + 1u));
    }
    kt += 1ull;
  }
  unsigned int g = (lane / 4u);
  unsigned int t4 = (lane % 4u);
  #pragma unroll
  for (unsigned long long mi_2 = 0ull; mi_2 < 4ull; mi_2 += 1) {
    #pragma unroll
    for (unsigned long long nt_1 = 0ull; nt_1 < 4ull; nt_1 += 1) {
      #pragma unroll
      for (unsigned long long i_1 = 0ull; i_1 < 4ull; i_1 += 1) {
        unsigned long long row = (((m0 + ((unsigned long long)(((wm * 64u) + g)))) + (mi_2 * 16ull)) + ((i_1 / 2ull) * 8ull));
        unsigned long long col = (((n0 + ((unsigned long long)(((wn * 32u) + (t4 * 2u))))) + (nt_1 * 8ull)) + (i_1 % 2ull));
        if (((row < m) && (col < n))) {
          const unsigned long long rtx_t6 = ((row * n) + col);
          c[rtx_t6] = rtx_elem<S>::narrow(acc[((((mi_2 * 4ull) + nt_1) * 4ull) + i_1)]);
        }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(256, 2) matmul_tc_f16(const rtx_f16* a, const rtx_f16* b, rtx_f16* c, unsigned long long m, unsigned long long n, unsigned long long k) {
  RTX_ENTRY();
  matmul_tc_impl<rtx_f16, float>(a, b, c, m, n, k);
}
extern "C" __global__ void __launch_bounds__(256, 2) matmul_tc_bf16(const rtx_bf16* a, const rtx_bf16* b, rtx_bf16* c, unsigned long long m, unsigned long long n, unsigned long long k) {
  RTX_ENTRY();
  matmul_tc_impl<rtx_bf16, float>(a, b, c, m, n, k);
}
