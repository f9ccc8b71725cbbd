#pragma once
// A host emulator for CUDA kernels written against kernels/cuda's CB_SIMT_EMULATION hooks, so
// that a kernel's own source (its index arithmetic, synchronization, masking and fragment
// bookkeeping) can be checked against kernels/cpu on a machine without a GPU. Each thread of
// a block is a fiber (ucontext) of one host thread; blocks run one after another. Barriers
// (__syncthreads, and the warp-wide ones inside shuffles, mma and ldmatrix) switch fibers
// until every participant has arrived; a round in which no fiber arrives anywhere is a
// deadlock and aborts with a message.
//
// Emulated, from the PTX ISA's definitions: __shfl_sync and __shfl_xor_sync;
// mma.sync.m16n8k16.row.col with f16 or bf16 inputs and f32 accumulators (fragment layouts of
// "Matrix Fragments for mma.m16n8k16"; the products are summed in fp32 in k order, not the
// hardware's order); ldmatrix .x4 .trans; cp.async (copied at once: an emulated kernel cannot race
// with its own copies, so a missing wait is not detected). Dynamic shared memory starts as 0xff
// bytes (NaN in fp16 and bf16), so reading what was never written shows. Include this header before
// the kernel's .cuh, in a translation unit compiled by the host compiler (not nvcc).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#define CB_SIMT_EMULATION 1
#undef __shared__
#define __shared__ static  // one instance, shared by the block's fibers (blocks run in turn)
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

namespace cb::simt {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

class Emulator {
 public:
  static Emulator& get() {
    static Emulator e;
    return e;
  }

  // Runs body() as every thread of every block of `grid` (blocks of block.x threads).
  void launch(Dim3 grid, Dim3 block, size_t smem_bytes, const std::function<void()>& body) {
    grid_ = grid;
    block_ = block;
    const int n = static_cast<int>(block.x * block.y * block.z);
    for (unsigned z = 0; z < grid.z; ++z) {
      for (unsigned y = 0; y < grid.y; ++y) {
        for (unsigned x = 0; x < grid.x; ++x) {
          block_idx_ = {x, y, z};
          run_block(n, smem_bytes, body);
        }
      }
    }
  }

  Dim3 thread_idx() const {
    const unsigned t = static_cast<unsigned>(current_);
    return {t % block_.x, t / block_.x % block_.y, t / (block_.x * block_.y)};
  }
  Dim3 block_idx() const { return block_idx_; }
  Dim3 block_dim() const { return block_; }
  Dim3 grid_dim() const { return grid_; }
  unsigned char* dynamic_smem() { return smem_.data(); }
  int lane() const { return current_ % 32; }
  int warp() const { return current_ / 32; }

  void sync_block() { wait(&block_barrier_); }
  void sync_warp() { wait(&warp_barriers_[static_cast<size_t>(warp())]); }
  // This lane's 8 words of the warp's exchange area, and another lane's.
  uint64_t* slot(int lane) {
    return &slots_[static_cast<size_t>(warp()) * 32 * 8 + static_cast<size_t>(lane) * 8];
  }

 private:
  struct Barrier {
    int n = 0, count = 0;
    uint64_t gen = 0;
  };
  struct Fiber {
    ucontext_t ctx{};
    bool done = false;
  };

  static void entry() {
    Emulator& e = get();
    (*e.body_)();
    e.fibers_[static_cast<size_t>(e.current_)].done = true;
    ++e.progress_;
  }

  void wait(Barrier* b) {
    const uint64_t g = b->gen;
    ++progress_;
    if (++b->count == b->n) {
      b->count = 0;
      ++b->gen;
      return;
    }
    while (b->gen == g) swapcontext(&fibers_[static_cast<size_t>(current_)].ctx, &main_);
  }

  void run_block(int n, size_t smem_bytes, const std::function<void()>& body) {
    body_ = &body;
    smem_.assign(smem_bytes + 16, 0xff);
    block_barrier_ = Barrier{n, 0, 0};
    warp_barriers_.assign(static_cast<size_t>((n + 31) / 32), Barrier{});
    for (int w = 0; w * 32 < n; ++w)
      warp_barriers_[static_cast<size_t>(w)].n = std::min(32, n - w * 32);
    slots_.assign(warp_barriers_.size() * 32 * 8, 0);
    fibers_.assign(static_cast<size_t>(n), Fiber{});
    while (stacks_.size() < fibers_.size()) stacks_.emplace_back(new char[kStack]);  // kept
    for (size_t i = 0; i < fibers_.size(); ++i) {
      Fiber& f = fibers_[i];
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = stacks_[i].get();
      f.ctx.uc_stack.ss_size = kStack;
      f.ctx.uc_link = &main_;
      makecontext(&f.ctx, &Emulator::entry, 0);
    }
    int remaining = n;
    while (remaining > 0) {
      const uint64_t before = progress_;
      for (int i = 0; i < n; ++i) {
        Fiber& f = fibers_[static_cast<size_t>(i)];
        if (f.done) continue;
        current_ = i;
        swapcontext(&main_, &f.ctx);
        if (f.done) --remaining;
      }
      if (remaining > 0 && progress_ == before) {
        std::fprintf(stderr, "simt emulator: deadlock in block (%u, %u, %u): %d threads wait\n",
                     block_idx_.x, block_idx_.y, block_idx_.z, remaining);
        std::abort();
      }
    }
    current_ = -1;
  }

  static constexpr size_t kStack = 128u << 10;
  std::vector<std::unique_ptr<char[]>> stacks_;
  Dim3 grid_, block_, block_idx_;
  const std::function<void()>* body_ = nullptr;
  std::vector<unsigned char> smem_;
  Barrier block_barrier_;
  std::vector<Barrier> warp_barriers_;
  std::vector<uint64_t> slots_;
  std::vector<Fiber> fibers_;
  ucontext_t main_{};
  int current_ = -1;
  uint64_t progress_ = 0;
};

inline unsigned char* dynamic_smem() {
  return Emulator::get().dynamic_smem();
}

template <typename T>
float elem_to_float(uint16_t bits) {
  T v;
  std::memcpy(static_cast<void*>(&v), &bits, 2);
  if constexpr (std::is_same<T, __half>::value) {
    return __half2float(v);
  } else {
    return __bfloat162float(v);
  }
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: d += A . B for the warp's fragments.
template <typename T>
void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  Emulator& e = Emulator::get();
  uint64_t* mine = e.slot(e.lane());
  for (int r = 0; r < 4; ++r) mine[r] = a[r];
  mine[4] = b0;
  mine[5] = b1;
  e.sync_warp();
  const int g = e.lane() / 4, t = e.lane() % 4;
  const auto half_of = [](uint64_t reg, int k) {
    return static_cast<uint16_t>((reg >> (16 * (k % 2))) & 0xffffu);
  };
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i / 2) * 8, col = 2 * t + i % 2;
    float acc = d[i];
    for (int k = 0; k < 16; ++k) {
      const uint64_t ar = e.slot((row % 8) * 4 + (k % 8) / 2)[(row / 8) + 2 * (k / 8)];
      const uint64_t br = e.slot(col * 4 + (k % 8) / 2)[4 + k / 8];
      acc += elem_to_float<T>(half_of(ar, k)) * elem_to_float<T>(half_of(br, k));
    }
    out[i] = acc;
  }
  e.sync_warp();
  for (int i = 0; i < 4; ++i) d[i] = out[i];
}

// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: lane l gives row l % 8 of matrix l / 8 and
// receives, of each matrix m, rows 2(l % 4) and 2(l % 4) + 1 at column l / 4.
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  Emulator& e = Emulator::get();
  e.slot(e.lane())[0] = reinterpret_cast<uintptr_t>(row);
  e.sync_warp();
  const int g = e.lane() / 4, t = e.lane() % 4;
  for (int m = 0; m < 4; ++m) {
    const auto* lo = reinterpret_cast<const uint16_t*>(e.slot(m * 8 + 2 * t)[0]);
    const auto* hi = reinterpret_cast<const uint16_t*>(e.slot(m * 8 + 2 * t + 1)[0]);
    r[m] = static_cast<uint32_t>(lo[g]) | (static_cast<uint32_t>(hi[g]) << 16);
  }
  e.sync_warp();
}

inline void cp_async16(void* dst, const void* src, bool valid) {
  if (valid) {
    std::memcpy(dst, src, 16);
  } else {
    std::memset(dst, 0, 16);
  }
}

}  // namespace cb::simt

#define threadIdx (::cb::simt::Emulator::get().thread_idx())
#define blockIdx (::cb::simt::Emulator::get().block_idx())
#define blockDim (::cb::simt::Emulator::get().block_dim())
#define gridDim (::cb::simt::Emulator::get().grid_dim())

inline void __syncthreads() {
  ::cb::simt::Emulator::get().sync_block();
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  ::cb::simt::Emulator::get().sync_warp();
}
namespace cb::simt {
// A value from lane `src` of the warp (every lane of the warp must call it).
template <typename V>
V shuffle_from(V v, int src) {
  static_assert(sizeof(V) <= 8, "shuffles of up to 8 bytes");
  Emulator& e = Emulator::get();
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(V));
  e.slot(e.lane())[7] = bits;
  e.sync_warp();
  bits = e.slot(src & 31)[7];
  e.sync_warp();
  V r;
  std::memcpy(&r, &bits, sizeof(V));
  return r;
}
}  // namespace cb::simt

template <typename V>
V __shfl_xor_sync(unsigned, V v, int lane_mask) {
  return ::cb::simt::shuffle_from(v, ::cb::simt::Emulator::get().lane() ^ lane_mask);
}
template <typename V>
V __shfl_sync(unsigned, V v, int src_lane) {
  return ::cb::simt::shuffle_from(v, src_lane);
}
template <typename V>
V __ldg(const V* p) {
  return *p;
}
template <typename V>
V __ldcg(const V* p) {
  return *p;
}
// Blocks run one after another on one host thread: an atomic is a plain read-modify-write and
// a fence orders nothing that is not already ordered.
inline int atomicAdd(int* p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}
inline void __threadfence() {}
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}
// CUDA's round-to-nearest float operations, never fused with their neighbours.
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fsub_rn(float a, float b) {
  volatile float r = a - b;
  return r;
}
// nvcuda::wmma for 16x16x16 tiles of fp16/bf16 with fp32 accumulators, as a kernel that only
// fills, loads, multiplies and stores fragments sees it (the fragments' element layout is
// unspecified, so such a kernel cannot depend on it): every lane holds the whole tile. Loads
// are warp-collective, between two warp barriers; a store starts at one. A lane stores only the
// elements e with e % 32 == its lane, so a kernel that reads the stored tile without a __syncwarp
// first reads the poison other lanes have not yet replaced.
namespace nvcuda::wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "16x16x16 tiles");
  float x[16 * 16];  // [row][col] of the tile (A: M x K, B: K x N, accumulator: M x N)
};

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, float v) {
  for (float& e : f.x) e = v;
}

template <typename Use, typename T, typename Layout, typename P>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const P* p, unsigned ld) {
  static_assert(std::is_same<P, T>::value, "operands load from their own type");
  ::cb::simt::Emulator& e = ::cb::simt::Emulator::get();
  e.sync_warp();
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) {
      const P& v = std::is_same<Layout, row_major>::value ? p[r * ld + c] : p[c * ld + r];
      if constexpr (std::is_same<P, __half>::value) {
        f.x[r * 16 + c] = __half2float(v);
      } else {
        f.x[r * 16 + c] = __bfloat162float(v);
      }
    }
  }
  e.sync_warp();
}

// d = a . b + c, each element's 16 products summed in fp32 in k order.
template <typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, T, LA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[16 * 16];
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      float acc = c.x[i * 16 + j];
      for (int k = 0; k < 16; ++k) acc += a.x[i * 16 + k] * b.x[k * 16 + j];
      out[i * 16 + j] = acc;
    }
  }
  std::memcpy(d.x, out, sizeof out);
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ld, layout_t layout) {
  ::cb::simt::Emulator& e = ::cb::simt::Emulator::get();
  e.sync_warp();
  for (int i = e.lane(); i < 16 * 16; i += 32) {
    const int r = i / 16, c = i % 16;
    p[layout == mem_row_major ? r * ld + c : c * ld + r] = f.x[i];
  }
}
}  // namespace nvcuda::wmma

// CUDA's integer min and max of device code.
inline int min(int a, int b) {
  return a < b ? a : b;
}
inline int max(int a, int b) {
  return a > b ? a : b;
}
