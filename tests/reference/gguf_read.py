"""Tiny GGUF (v2/v3) reader and writer for the numpy reference. numpy only.

Written from the GGUF specification (ggml docs/gguf.md):

  header   : magic "GGUF" (u32 0x46554747 little-endian), version u32 (2 or 3),
             tensor_count u64, metadata_kv_count u64
  kv       : key (string), value_type u32, value
  string   : u64 length + UTF-8 bytes (no terminator)
  array    : element_type u32, count u64, elements (arrays may nest)
  tensor   : name (string), n_dims u32, ne[n_dims] u64, ggml_type u32, offset u64
             (offset relative to the start of the data section)
  data     : starts at the first multiple of general.alignment (default 32) after the
             tensor infos.

ne[0] is the fastest-varying dimension, so the row-major numpy shape is ne reversed
(a linear layer weight with ne = [n_in, n_out] becomes [n_out, n_in], the PyTorch shape).

Block formats (ggml-common.h), 32 values per block, d / m stored as IEEE fp16:
  Q8_0: d, int8 qs[32]                    x[j] = d * qs[j]
  Q4_0: d, u8 qs[16]                      x[j] = d * ((qs[j] & 0xF) - 8),
                                          x[j+16] = d * ((qs[j] >> 4) - 8)
  Q4_1: d, m, u8 qs[16]                   x[j] = d * (qs[j] & 0xF) + m,
                                          x[j+16] = d * (qs[j] >> 4) + m
  Q5_0: d, u32 qh, u8 qs[16]              q[j] = (qs[j] & 0xF) | bit j of qh << 4,
                                          q[j+16] = (qs[j] >> 4) | bit j+16 of qh << 4;
                                          x = d * (q - 16)
  Q5_1: d, m, u32 qh, u8 qs[16]           as Q5_0, x = d * q + m
  BF16: the upper 16 bits of an IEEE fp32.

K-quants (ggml-common.h block_qN_K, ggml-quants.c dequantize_row_qN_K): super-blocks of 256
values in sub-blocks, fp16 super-block scales d (and dmin):
  Q2_K: u8 scales[16] (lo nibble scale, hi nibble min of each 16 values), u8 qs[64], d, dmin.
        Each half of 128 uses 32 bytes of qs as four 2-bit planes (shift 0, 2, 4, 6), each
        plane two sub-blocks of 16 (bytes 0-15, 16-31): x = d*scale*q - dmin*min.
  Q3_K: u8 hmask[32], u8 qs[64], u8 scales[12], d. The planes as Q2_K; sixteen 6-bit scales
        (low nibbles: bytes 0-7 lo then hi; top 2 bits: bytes 8-11, 2 bits per group of 4)
        minus 32; plane p (0..7 over both halves) clears 4 from q where bit p of hmask is 0:
        x = d*scale*q.
  Q4_K: d, dmin, u8 scales[12] (eight 6-bit scale/min pairs), u8 qs[128]. Each 64 values use
        32 bytes: low nibbles sub-block 2i, high nibbles 2i+1; x = d*scale*q - dmin*min.
        Pair j < 4: scale = s[j] & 63, min = s[j+4] & 63; j >= 4: scale = (s[j+4] & 0xF) |
        (s[j-4] >> 6) << 4, min = (s[j+4] >> 4) | (s[j] >> 6) << 4.
  Q5_K: d, dmin, scales[12], u8 qh[32], qs[128]: as Q4_K, plus 16 where bit j of qh[l] is set.
  Q6_K: u8 ql[128], u8 qh[64], i8 scales[16], d. Each half of 128 uses 64 bytes of ql and 32
        of qh: value l + 32k (k = 0..3) has the lo (k < 2) or hi nibble of ql[l + 32 (k % 2)]
        and bits 2k..2k+1 of qh[l] on top, scale index l // 16 + 2k; x = (d*scale)*(q - 32).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# ggml_type ids (ggml.h)
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q4_1, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 3, 8, 30
GGML_Q5_0, GGML_Q5_1 = 6, 7
GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K = 10, 11, 12, 13, 14
TYPE_NAMES = {GGML_F32: "F32", GGML_F16: "F16", GGML_Q4_0: "Q4_0", GGML_Q4_1: "Q4_1",
              GGML_Q8_0: "Q8_0", GGML_BF16: "BF16", GGML_Q5_0: "Q5_0", GGML_Q5_1: "Q5_1",
              GGML_Q2_K: "Q2_K", GGML_Q3_K: "Q3_K", GGML_Q4_K: "Q4_K", GGML_Q5_K: "Q5_K",
              GGML_Q6_K: "Q6_K"}
# (values per block, bytes per block)
TYPE_BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_BF16: (1, 2),
              GGML_Q8_0: (32, 34), GGML_Q4_0: (32, 18), GGML_Q4_1: (32, 20),
              GGML_Q5_0: (32, 22), GGML_Q5_1: (32, 24),
              GGML_Q2_K: (256, 84), GGML_Q3_K: (256, 110), GGML_Q4_K: (256, 144),
              GGML_Q5_K: (256, 176), GGML_Q6_K: (256, 210)}

# metadata value types (gguf.md)
(T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR,
 T_U64, T_I64, T_F64) = range(13)
_SCALAR = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i",
           T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}


class GGUFError(ValueError):
    pass


@dataclass
class TensorInfo:
    name: str
    ne: tuple            # GGUF order (ne[0] fastest)
    ggml_type: int
    offset: int          # relative to the data section

    @property
    def shape(self) -> tuple:  # row-major numpy shape
        return tuple(reversed(self.ne))

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.ne:
            n *= d
        return n

    @property
    def n_bytes(self) -> int:
        per, size = TYPE_BLOCK[self.ggml_type]
        return self.n_elements // per * size


class GGUFFile:
    """Parses a GGUF file. `metadata` maps key -> python value (arrays are lists, strings
    are str); `tensors` maps name -> TensorInfo in file order; `tensor(name)` returns the
    dequantized float32 array in row-major shape."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as f:
            try:
                self._buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # empty file
                raise GGUFError(f"{path}: empty file")
        self._pos = 0
        if self._read(4) != GGUF_MAGIC:
            raise GGUFError(f"{path}: not a GGUF file (bad magic)")
        self.version = self._u("<I")
        if self.version not in (2, 3):
            raise GGUFError(f"{path}: unsupported GGUF version {self.version}")
        n_tensors = self._u("<Q")
        n_kv = self._u("<Q")
        self.metadata: dict[str, Any] = {}
        self.metadata_types: dict[str, int] = {}
        for _ in range(n_kv):
            key = self._str()
            vt = self._u("<I")
            self.metadata[key] = self._value(vt)
            self.metadata_types[key] = vt
        self.tensors: dict[str, TensorInfo] = {}
        for _ in range(n_tensors):
            name = self._str()
            n_dims = self._u("<I")
            ne = tuple(self._u("<Q") for _ in range(n_dims))
            t = self._u("<I")
            off = self._u("<Q")
            if t not in TYPE_BLOCK:
                raise GGUFError(f"{path}: tensor {name}: unsupported ggml type {t}")
            self.tensors[name] = TensorInfo(name, ne, t, off)
        self.alignment = int(self.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        a = self.alignment
        self.data_offset = (self._pos + a - 1) // a * a
        for ti in self.tensors.values():
            end = self.data_offset + ti.offset + ti.n_bytes
            if end > len(self._buf):
                raise GGUFError(f"{path}: tensor {ti.name} extends past end of file")

    # --- low-level parsing -------------------------------------------------------
    def _read(self, n: int) -> bytes:
        if self._pos + n > len(self._buf):
            raise GGUFError(f"{self.path}: truncated file")
        b = self._buf[self._pos:self._pos + n]
        self._pos += n
        return b

    def _u(self, fmt: str):
        return struct.unpack(fmt, self._read(struct.calcsize(fmt)))[0]

    def _str(self) -> str:
        n = self._u("<Q")
        return self._read(n).decode("utf-8")

    def _value(self, vt: int):
        if vt in _SCALAR:
            return self._u(_SCALAR[vt])
        if vt == T_STR:
            return self._str()
        if vt == T_ARR:
            et = self._u("<I")
            n = self._u("<Q")
            if et in _SCALAR and et != T_BOOL:
                dt = np.dtype(_SCALAR[et])
                arr = np.frombuffer(self._read(n * dt.itemsize), dtype=dt)
                return arr.tolist()
            return [self._value(et) for _ in range(n)]
        raise GGUFError(f"{self.path}: unknown metadata value type {vt}")

    # --- tensors ------------------------------------------------------------------
    def raw(self, name: str) -> np.ndarray:
        ti = self.tensors[name]
        start = self.data_offset + ti.offset
        return np.frombuffer(self._buf, dtype=np.uint8, count=ti.n_bytes, offset=start)

    def tensor(self, name: str) -> np.ndarray:
        """Dequantized float32 array, row-major shape (ne reversed)."""
        ti = self.tensors[name]
        vals = dequantize(self.raw(name), ti.ggml_type, ti.n_elements)
        return vals.reshape(ti.shape)

    def get(self, key: str, default=None):
        return self.metadata.get(key, default)


def dequantize(raw: np.ndarray, ggml_type: int, n: int) -> np.ndarray:
    raw = np.asarray(raw, dtype=np.uint8)
    if ggml_type == GGML_F32:
        return raw.view("<f4").astype(np.float32)
    if ggml_type == GGML_F16:
        return raw.view("<f2").astype(np.float32)
    if ggml_type == GGML_BF16:
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
    if ggml_type in K_QUANTS:
        return _dequantize_k(raw, ggml_type, n)
    if n % 32:
        raise GGUFError(f"quantized tensor with {n} elements (not a multiple of 32)")
    nb = n // 32
    if ggml_type == GGML_Q8_0:
        b = raw.reshape(nb, 34)
        d = b[:, :2].copy().view("<f2").astype(np.float32)           # [nb, 1]
        q = b[:, 2:].copy().view(np.int8).astype(np.float32)         # [nb, 32]
        return (d * q).reshape(-1)
    if ggml_type == GGML_Q4_0:
        b = raw.reshape(nb, 18)
        d = b[:, :2].copy().view("<f2").astype(np.float32)
        qs = b[:, 2:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0
        return (d * q).reshape(-1)
    if ggml_type == GGML_Q4_1:
        b = raw.reshape(nb, 20)
        d = b[:, 0:2].copy().view("<f2").astype(np.float32)
        m = b[:, 2:4].copy().view("<f2").astype(np.float32)
        qs = b[:, 4:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32)
        return (d * q + m).reshape(-1)
    if ggml_type in (GGML_Q5_0, GGML_Q5_1):
        one = ggml_type == GGML_Q5_1
        b = raw.reshape(nb, 24 if one else 22)
        d = _f16(b[:, 0:2])
        qh = b[:, 4 if one else 2:][:, :4].copy().view("<u4").astype(np.uint32)  # [nb, 1]
        qs = b[:, 8 if one else 6:].astype(np.uint32)
        j = np.arange(16, dtype=np.uint32)
        lo = (qs & 0xF) | (((qh >> j) & 1) << 4)
        hi = (qs >> 4) | (((qh >> (j + 16)) & 1) << 4)
        q = np.concatenate([lo, hi], axis=1).astype(np.float32)
        if one:
            return (d * q + _f16(b[:, 2:4])).reshape(-1)
        return (d * (q - 16.0)).reshape(-1)
    raise GGUFError(f"unsupported ggml type {ggml_type}")


K_QUANTS = (GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K)


def _f16(b: np.ndarray) -> np.ndarray:
    """[nb, 2] bytes -> [nb, 1] float32 (the fp16 they hold)."""
    return b.copy().view("<f2").astype(np.float32)


def _dequantize_k(raw: np.ndarray, ggml_type: int, n: int) -> np.ndarray:
    """The K-quants (module docstring), one super-block of 256 values per row of `b`."""
    if n % 256:
        raise GGUFError(f"K-quantized tensor with {n} elements (not a multiple of 256)")
    nb = n // 256
    b = raw.reshape(nb, TYPE_BLOCK[ggml_type][1])
    planes = np.array([0, 2, 4, 6], dtype=np.uint8)[None, None, :, None]
    if ggml_type in (GGML_Q2_K, GGML_Q3_K):
        qs = b[:, 16:80] if ggml_type == GGML_Q2_K else b[:, 32:96]
        q = (qs.reshape(nb, 2, 1, 32) >> planes) & 3  # [block, half, plane, 32]
        q = q.astype(np.float32)
        if ggml_type == GGML_Q2_K:
            sc = b[:, :16]
            dl = _f16(b[:, 80:82]) * (sc & 0xF).astype(np.float32)   # [nb, 16]
            ml = _f16(b[:, 82:84]) * (sc >> 4).astype(np.float32)
            return (dl[:, :, None] * q.reshape(nb, 16, 16) - ml[:, :, None]).reshape(-1)
        s = b[:, 96:108]
        low = np.concatenate([s[:, :8] & 0xF, s[:, :8] >> 4], axis=1)
        i = np.arange(16)
        high = (s[:, 8 + i % 4] >> (2 * (i // 4)).astype(np.uint8)) & 3
        scale = (low | (high << 4)).astype(np.float32) - 32.0
        bit = np.arange(8, dtype=np.uint8).reshape(1, 2, 4, 1)     # plane p over both halves
        hm = (b[:, None, None, :32] >> bit) & 1
        q = q - np.where(hm != 0, 0.0, 4.0).astype(np.float32)
        dl = _f16(b[:, 108:110]) * scale
        return (dl[:, :, None] * q.reshape(nb, 16, 16)).reshape(-1)
    if ggml_type in (GGML_Q4_K, GGML_Q5_K):
        s = b[:, 4:16]
        sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)], axis=1)
        mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
        qs = b[:, 48:176] if ggml_type == GGML_Q5_K else b[:, 16:144]
        qs = qs.reshape(nb, 4, 32)
        q = np.stack([qs & 0xF, qs >> 4], axis=2).reshape(nb, 8, 32).astype(np.float32)
        if ggml_type == GGML_Q5_K:
            j = np.arange(8, dtype=np.uint8)[None, :, None]
            q = q + 16.0 * ((b[:, None, 16:48] >> j) & 1).astype(np.float32)
        dl = _f16(b[:, 0:2]) * sc.astype(np.float32)
        ml = _f16(b[:, 2:4]) * mn.astype(np.float32)
        return (dl[:, :, None] * q - ml[:, :, None]).reshape(-1)
    # Q6_K
    ql = b[:, :128].reshape(nb, 2, 2, 32)                           # [block, half, k % 2, l]
    low = np.concatenate([ql & 0xF, ql >> 4], axis=2)               # [block, half, k, l]
    qh = b[:, 128:192].reshape(nb, 2, 1, 32)
    high = (qh >> planes) & 3
    q = (low | (high << 4)).astype(np.float32) - 32.0
    sc = b[:, 192:208].copy().view(np.int8).astype(np.float32).reshape(nb, 2, 4, 2)
    ds = _f16(b[:, 208:210]).reshape(nb, 1, 1, 1) * sc             # [block, half, k, l // 16]
    return (ds[..., None] * q.reshape(nb, 2, 4, 2, 16)).reshape(-1)


# --------------------------------------------------------------------------------------
# Quantizers (used only to WRITE test checkpoints; the reference always dequantizes what
# is in the file, so these need not be bit-identical to llama.cpp's).
def quantize(x: np.ndarray, ggml_type: int) -> bytes:
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    if ggml_type == GGML_F32:
        return x.astype("<f4").tobytes()
    if ggml_type == GGML_F16:
        return x.astype("<f2").tobytes()
    if ggml_type == GGML_BF16:
        u = x.view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16            # round to nearest even
        return u.astype("<u2").tobytes()
    if x.size % 32:
        raise GGUFError("quantize: size not a multiple of 32")
    blk = x.reshape(-1, 32)
    if ggml_type == GGML_Q8_0:
        d = np.abs(blk).max(axis=1) / 127.0
        idv = np.where(d == 0, 0.0, 1.0 / np.where(d == 0, 1.0, d))
        q = np.clip(np.round(blk * idv[:, None]), -127, 127).astype(np.int8)
        out = np.empty((blk.shape[0], 34), np.uint8)
        out[:, :2] = d.astype("<f2").reshape(-1, 1).view(np.uint8)
        out[:, 2:] = q.view(np.uint8)
        return out.tobytes()
    if ggml_type == GGML_Q4_0:
        idx = np.abs(blk).argmax(axis=1)
        mx = blk[np.arange(blk.shape[0]), idx]
        d = mx / -8.0
        idv = np.where(d == 0, 0.0, 1.0 / np.where(d == 0, 1.0, d))
        q = np.clip(np.floor(blk * idv[:, None] + 8.5), 0, 15).astype(np.uint8)
        out = np.empty((blk.shape[0], 18), np.uint8)
        out[:, :2] = d.astype("<f2").reshape(-1, 1).view(np.uint8)
        out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
        return out.tobytes()
    if ggml_type == GGML_Q4_1:
        mn, mx = blk.min(axis=1), blk.max(axis=1)
        d = (mx - mn) / 15.0
        idv = np.where(d == 0, 0.0, 1.0 / np.where(d == 0, 1.0, d))
        q = np.clip(np.floor((blk - mn[:, None]) * idv[:, None] + 0.5), 0, 15).astype(np.uint8)
        out = np.empty((blk.shape[0], 20), np.uint8)
        out[:, 0:2] = d.astype("<f2").reshape(-1, 1).view(np.uint8)
        out[:, 2:4] = mn.astype("<f2").reshape(-1, 1).view(np.uint8)
        out[:, 4:] = q[:, :16] | (q[:, 16:] << 4)
        return out.tobytes()
    raise GGUFError(f"unsupported ggml type {ggml_type}")


def _pack_str(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _infer_type(v) -> int:
    if isinstance(v, bool):
        return T_BOOL
    if isinstance(v, int):
        return T_U32 if 0 <= v < 2**32 else T_I64
    if isinstance(v, float):
        return T_F32
    if isinstance(v, str):
        return T_STR
    if isinstance(v, (list, tuple)):
        return T_ARR
    raise TypeError(f"cannot store {type(v)} in GGUF metadata")


def _pack_value(v, vt: int) -> bytes:
    if vt in _SCALAR:
        return struct.pack(_SCALAR[vt], v)
    if vt == T_STR:
        return _pack_str(v)
    if vt == T_ARR:
        if len(v) == 0:
            return struct.pack("<IQ", T_I32, 0)
        et = _infer_type(v[0])
        if et == T_U32:  # integer arrays (e.g. tokenizer.ggml.token_type) are INT32
            et = T_I32 if all(-2**31 <= e < 2**31 for e in v) else T_I64
        return struct.pack("<IQ", et, len(v)) + b"".join(_pack_value(e, et) for e in v)
    raise TypeError(vt)


@dataclass
class Blocks:
    """A tensor already in its ggml type's bytes (row-major `shape`), for write_gguf."""
    shape: tuple
    data: bytes


def write_gguf(path: str, metadata: list, tensors: list, alignment: int = DEFAULT_ALIGNMENT):
    """metadata: list of (key, value) or (key, value, value_type); tensors: list of
    (name, float array in row-major shape or Blocks, ggml_type). Writes GGUF v3."""
    out = bytearray()
    out += GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for item in metadata:
        key, val = item[0], item[1]
        vt = item[2] if len(item) > 2 else _infer_type(val)
        out += _pack_str(key) + struct.pack("<I", vt) + _pack_value(val, vt)
    blobs, off = [], 0
    for name, arr, t in tensors:
        if isinstance(arr, Blocks):
            ne, data = tuple(reversed(arr.shape)), arr.data
        else:
            arr = np.asarray(arr, dtype=np.float32)
            ne = tuple(reversed(arr.shape))
            data = quantize(arr, t)
        out += _pack_str(name) + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", t, off)
        pad = (-len(data)) % alignment
        blobs.append(data + b"\0" * pad)
        off += len(data) + pad
    out += b"\0" * ((-len(out)) % alignment)
    with open(path, "wb") as f:
        f.write(out)
        for b in blobs:
            f.write(b)
