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
