#include "lib/formats/dequant.h"

#include <cstring>
#include <string>

#include "lib/core/error.h"

namespace cb::formats {
namespace {

constexpr size_t kBlock = 32;

uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Q8_0 block: fp16 d, 32 x int8 q; x = q * d.
void dequant_q8_0(const uint8_t* src, float* dst, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b, src += 2 + kBlock, dst += kBlock) {
    const float d = fp16_to_fp32(load_u16(src));
    for (size_t j = 0; j < kBlock; ++j) {
      dst[j] = static_cast<float>(static_cast<int8_t>(src[2 + j])) * d;
    }
  }
}

// Q4_0 block: fp16 d, 16 bytes; element j is the low nibble of byte j, element j + 16
// the high nibble; x = d * (q - 8).
void dequant_q4_0(const uint8_t* src, float* dst, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b, src += 2 + kBlock / 2, dst += kBlock) {
    const float d = fp16_to_fp32(load_u16(src));
    const uint8_t* qs = src + 2;
    for (size_t j = 0; j < kBlock / 2; ++j) {
      dst[j] = d * static_cast<float>(static_cast<int>(qs[j] & 0x0f) - 8);
      dst[j + kBlock / 2] = d * static_cast<float>(static_cast<int>(qs[j] >> 4) - 8);
    }
  }
}

// Q4_1 block: fp16 d, fp16 m, 16 bytes (nibbles as Q4_0); x = d * q + m. An fp16 scale
// times a 4- or 8-bit integer is exact in fp32, so every format here rounds at most once
// (the add of m) and the result is bit-identical to ggml's reference, FMA or not.
void dequant_q4_1(const uint8_t* src, float* dst, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b, src += 4 + kBlock / 2, dst += kBlock) {
    const float d = fp16_to_fp32(load_u16(src));
    const float m = fp16_to_fp32(load_u16(src + 2));
    const uint8_t* qs = src + 4;
    for (size_t j = 0; j < kBlock / 2; ++j) {
      const float lo = d * static_cast<float>(qs[j] & 0x0f);
      const float hi = d * static_cast<float>(qs[j] >> 4);
      dst[j] = lo + m;
      dst[j + kBlock / 2] = hi + m;
    }
  }
}

// Q5_0 block: fp16 d, 32 high bits (little-endian u32), 16 bytes of low nibbles as Q4_0;
// element j's fifth bit is bit j; x = d * (q - 16).
void dequant_q5_0(const uint8_t* src, float* dst, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b, src += 22, dst += kBlock) {
    const float d = fp16_to_fp32(load_u16(src));
    const uint32_t qh = load_u32(src + 2);
    const uint8_t* qs = src + 6;
    for (size_t j = 0; j < kBlock / 2; ++j) {
      const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      dst[j] = d * static_cast<float>(lo - 16);
      dst[j + kBlock / 2] = d * static_cast<float>(hi - 16);
    }
  }
}

// Q5_1 block: fp16 d, fp16 m, then as Q5_0 without the offset; x = d * q + m.
void dequant_q5_1(const uint8_t* src, float* dst, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b, src += 24, dst += kBlock) {
    const float d = fp16_to_fp32(load_u16(src));
    const float m = fp16_to_fp32(load_u16(src + 2));
    const uint32_t qh = load_u32(src + 4);
    const uint8_t* qs = src + 8;
    for (size_t j = 0; j < kBlock / 2; ++j) {
      const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      const float a = d * static_cast<float>(lo);
      const float c = d * static_cast<float>(hi);
      dst[j] = a + m;
      dst[j + kBlock / 2] = c + m;
    }
  }
}

// The K-quants: super-blocks of 256 elements in sub-blocks of 16 or 32, each sub-block with
// its own scale (and min) quantized against the super-block's fp16 d (and dmin). As for the
// 32-element formats, every product of an fp16 scale and the small integers here is exact in
// fp32 but Q6_K's last factor, and each element rounds at most once, the same way with FMA.

// Q2_K: scales[16] (low nibble: scale, high: min, of each 16 elements), qs[64] (2-bit q),
// fp16 d, fp16 dmin. Each half of 128 takes 32 bytes of qs, four 2-bit planes of them;
// x = d * scale * q - dmin * min.
void dequant_q2_k(const uint8_t* src, float* dst, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b, src += 84) {
    const uint8_t* scales = src;
    const uint8_t* q = src + 16;
    const float d = fp16_to_fp32(load_u16(src + 80));
    const float dmin = fp16_to_fp32(load_u16(src + 82));
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {
          const uint8_t sc = scales[is++];
          const float dl = d * static_cast<float>(sc & 0x0f);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) {
            *dst++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
          }
        }
      }
    }
  }
}

// Q3_K: hmask[32], qs[64] (2 low bits), scales[12] (sixteen 6-bit scales: the low nibbles in
// bytes 0-7, the top two bits in bytes 8-11), fp16 d. Bit k of hmask[l] belongs to the k-th
// group of 32 in the order the 2-bit planes are read; a clear bit subtracts 4;
// x = d * (scale - 32) * q.
void dequant_q3_k(const uint8_t* src, float* dst, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b, src += 110) {
    const uint8_t* hm = src;
    const uint8_t* q = src + 32;
    const uint8_t* s = src + 96;
    const float d = fp16_to_fp32(load_u16(src + 108));
    int scale[16];
    for (int i = 0; i < 16; ++i) {
      const int low = i < 8 ? s[i] & 0x0f : s[i - 8] >> 4;
      const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
      scale[i] = (low | (high << 4)) - 32;
    }
    int is = 0;
    uint8_t m = 1;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d * static_cast<float>(scale[is++]);
          for (int l = 0; l < 16; ++l) {
            const int idx = l + 16 * part;
            const int v = ((q[idx] >> shift) & 3) - ((hm[idx] & m) != 0 ? 0 : 4);
            *dst++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

// The 6-bit scale and min of sub-block j of Q4_K/Q5_K (12 bytes for eight pairs): j < 4 in
// the low six bits of bytes j and j + 4; otherwise the low and high nibbles of byte j + 4
// with the top two bits of bytes j - 4 and j.
void scale_min_k4(int j, const uint8_t* q, int* sc, int* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K: fp16 d, fp16 dmin, scales[12], qs[128]. Each 64 elements take 32 bytes: the low
// nibbles are sub-block 2i, the high nibbles 2i + 1; x = d * scale * q - dmin * min.
// Q5_K adds qh[32] before qs: bit 2i (low nibbles) or 2i + 1 (high) of qh[l] adds 16.
void dequant_q45_k(const uint8_t* src, float* dst, size_t nblocks, bool five) {
  const size_t bytes = five ? 176 : 144;
  for (size_t b = 0; b < nblocks; ++b, src += bytes) {
    const float d = fp16_to_fp32(load_u16(src));
    const float dmin = fp16_to_fp32(load_u16(src + 2));
    const uint8_t* scales = src + 4;
    const uint8_t* qh = src + 16;
    const uint8_t* q = src + (five ? 48 : 16);
    for (int i = 0; i < 4; ++i, q += 32) {
      for (int part = 0; part < 2; ++part) {
        int sc = 0, mn = 0;
        scale_min_k4(2 * i + part, scales, &sc, &mn);
        const float dl = d * static_cast<float>(sc);
        const float ml = dmin * static_cast<float>(mn);
        const int bit = 2 * i + part;
        for (int l = 0; l < 32; ++l) {
          int v = part == 0 ? q[l] & 0x0f : q[l] >> 4;
          if (five && ((qh[l] >> bit) & 1) != 0) v += 16;
          *dst++ = dl * static_cast<float>(v) - ml;
        }
      }
    }
  }
}

// Q6_K: ql[128] (4 low bits), qh[64] (2 high bits), int8 scales[16], fp16 d. Each half of
// 128 elements takes 64 bytes of ql and 32 of qh: element l + 32k (k = 0..3) has the low
// (k < 2) or high (k >= 2) nibble of ql[l + 32 (k % 2)], bits 2k and 2k + 1 of qh[l] above
// them, and scale l / 16 + 2k; x = d * scale * (q - 32), d * scale rounded first.
void dequant_q6_k(const uint8_t* src, float* dst, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b, src += 210) {
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const uint8_t* sc = src + 192;
    const float d = fp16_to_fp32(load_u16(src + 208));
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, dst += 128) {
      for (int l = 0; l < 32; ++l) {
        for (int k = 0; k < 4; ++k) {
          const uint8_t low = ql[l + 32 * (k % 2)];
          const int q = ((k < 2 ? low & 0x0f : low >> 4) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
          const float ds = d * static_cast<float>(static_cast<int8_t>(sc[l / 16 + 2 * k]));
          dst[l + 32 * k] = ds * static_cast<float>(q);
        }
      }
    }
  }
}

}  // namespace

void dequantize(DType t, const uint8_t* src, float* dst, size_t n) {
  const size_t block = dtype_block_elems(t);
  if (n % block != 0) {
    throw make_error(
        "dequantize",
        std::string(dtype_name(t)) + " data of " + std::to_string(n) +
            " elements is not a whole number of " + std::to_string(block) + "-element blocks",
        "quantized rows must hold a multiple of " + std::to_string(block) + " elements");
  }
  switch (t) {
    case DType::F32:
      if (n != 0) std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
      return;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(src + 2 * i));
      return;
    case DType::Q8_0: dequant_q8_0(src, dst, n / kBlock); return;
    case DType::Q4_0: dequant_q4_0(src, dst, n / kBlock); return;
    case DType::Q4_1: dequant_q4_1(src, dst, n / kBlock); return;
    case DType::Q5_0: dequant_q5_0(src, dst, n / kBlock); return;
    case DType::Q5_1: dequant_q5_1(src, dst, n / kBlock); return;
    case DType::Q2_K: dequant_q2_k(src, dst, n / block); return;
    case DType::Q3_K: dequant_q3_k(src, dst, n / block); return;
    case DType::Q4_K: dequant_q45_k(src, dst, n / block, false); return;
    case DType::Q5_K: dequant_q45_k(src, dst, n / block, true); return;
    case DType::Q6_K: dequant_q6_k(src, dst, n / block); return;
    case DType::I32: break;
  }
  throw make_error("dequantize",
                   std::string("cannot convert ") + dtype_name(t) + " elements to f32",
                   "only float and GGUF quantized tensors hold weights");
}

}  // namespace cb::formats
