"""Read and write safetensors files (F32 / F16 / BF16) with numpy only.

Format (huggingface/safetensors README): u64 little-endian N, then N bytes of JSON
header {name: {"dtype", "shape", "data_offsets": [begin, end]}, optional "__metadata__":
{str: str}}, then the byte buffer; offsets are relative to the start of the buffer,
tensors are row-major little-endian. The writer pads the header with spaces to a multiple
of 8 bytes, as the reference implementation does.
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np

_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}


class SafetensorsError(ValueError):
    pass


def _bf16_to_f32(u16: np.ndarray) -> np.ndarray:
    return (u16.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")  # round to nearest even


def read_header(path: str) -> tuple[dict, int]:
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise SafetensorsError(f"{path}: truncated (no header length)")
        (n,) = struct.unpack("<Q", head)
        raw = f.read(n)
        if len(raw) < n:
            raise SafetensorsError(f"{path}: truncated header")
    return json.loads(raw.decode("utf-8")), 8 + n


def load(path: str, names=None) -> dict[str, np.ndarray]:
    """Returns {name: float32 array} (F64 stays float64). `names` limits what is read."""
    header, base = read_header(path)
    size = os.path.getsize(path)
    out = {}
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    for name, info in header.items():
        if name == "__metadata__" or (names is not None and name not in names):
            continue
        dt = info["dtype"]
        if dt not in _DTYPES:
            raise SafetensorsError(f"{path}: tensor {name}: unsupported dtype {dt}")
        b, e = info["data_offsets"]
        if base + e > size:
            raise SafetensorsError(f"{path}: tensor {name} extends past end of file")
        shape = tuple(info["shape"])
        arr = np.frombuffer(mm[base + b:base + e].tobytes(), dtype=_DTYPES[dt])
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise SafetensorsError(f"{path}: tensor {name}: size does not match shape")
        if dt == "BF16":
            arr = _bf16_to_f32(arr)
        elif dt != "F64":
            arr = arr.astype(np.float32)
        out[name] = arr.reshape(shape)
    return out


def load_dir(model_dir: str) -> dict[str, np.ndarray]:
    """model.safetensors, or the shards listed in model.safetensors.index.json."""
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(single):
        return load(single)
    if os.path.exists(index):
        with open(index) as f:
            wm = json.load(f)["weight_map"]
        out = {}
        for shard in sorted(set(wm.values())):
            out.update(load(os.path.join(model_dir, shard),
                            names={k for k, v in wm.items() if v == shard}))
        return out
    raise SafetensorsError(f"{model_dir}: no model.safetensors or model.safetensors.index.json")


def save(path: str, tensors: dict, dtype: str = "F32", metadata: dict | None = None):
    """tensors: {name: array}; every tensor is stored as `dtype` (F32, F16 or BF16), or
    pass {name: (array, dtype)} for per-tensor dtypes. Tensors are written in name order."""
    header = {}
    blobs = []
    off = 0
    for name in sorted(tensors):
        v = tensors[name]
        arr, dt = (v if isinstance(v, tuple) else (v, dtype))
        arr = np.asarray(arr)
        if dt == "BF16":
            data = _f32_to_bf16(arr).tobytes()
        elif dt in _DTYPES:
            data = np.ascontiguousarray(arr, dtype=_DTYPES[dt]).tobytes()
        else:
            raise SafetensorsError(f"unsupported dtype {dt}")
        header[name] = {"dtype": dt, "shape": list(arr.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((-len(hb)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)
