#!/usr/bin/env python3
"""Writes malformed model files for the CLI test: each is a distinct way a GGUF or
safetensors file (or a Hugging Face directory) can be broken. Prints one line per case:
<name>\t<path>\t<substring the error message must contain>."""
import json, os, struct, sys

out, good_gguf = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
good = open(good_gguf, "rb").read()

def put(name, data):
    p = os.path.join(out, name)
    with open(p, "wb") as f:
        f.write(data)
    return p

def gguf_header(version=3, n_tensors=0, n_kv=0):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)

def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b

cases = []
def case(name, data, needle):
    cases.append((name, put(name, data), needle))

case("empty.gguf", b"", "")
case("wrong_magic.gguf", b"GGML" + good[4:4096], "magic")
case("version1.gguf", gguf_header(1) , "version")
case("truncated_header.gguf", good[:20], "")
case("truncated_tensors.gguf", good[: len(good) // 2], "")
case("absurd_kv_count.gguf", gguf_header(3, 0, 1 << 60), "")
case("absurd_tensor_count.gguf", gguf_header(3, 1 << 60, 0), "")
case("string_past_end.gguf", gguf_header(3, 0, 1) + gstr("general.name")[:8] + struct.pack("<Q", 1 << 40), "")
# one KV whose value type is 99
case("unknown_value_type.gguf", gguf_header(3, 0, 1) + gstr("general.name") + struct.pack("<I", 99), "type")
# one tensor with an unknown ggml type id 77
t = gstr("t") + struct.pack("<I", 1) + struct.pack("<Q", 32) + struct.pack("<I", 77) + struct.pack("<Q", 0)
case("unknown_tensor_type.gguf", gguf_header(3, 1, 0) + t + b"\0" * 64, "77")
# tensor offset past the end of the file
t = gstr("t") + struct.pack("<I", 1) + struct.pack("<Q", 32) + struct.pack("<I", 0) + struct.pack("<Q", 1 << 20)
case("offset_past_end.gguf", gguf_header(3, 1, 0) + t + b"\0" * 64, "")

# a tensor name whose bytes are not text: the error shows them escaped (\xFF), one UTF-8 line
i = good.index(b"blk.1.attn_q.weight")
case("binary_tensor_name.gguf", good[:i + 6] + b"\xff" * 6 + good[i + 12:], "blk.1.\\xFF\\xFF")

def st(header_obj, data=b"", raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header_obj).encode()
    return struct.pack("<Q", len(h)) + h + data

case("header_too_long.safetensors", struct.pack("<Q", 1 << 40) + b"{}", "")
case("bad_json.safetensors", st(None, raw_header=b'{"a": {"dtype": "F32",'), "JSON")
case("unknown_dtype.safetensors", st({"w": {"dtype": "Q9", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8), "Q9")
case("size_mismatch.safetensors", st({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, b"\0" * 8), "")
case("overlap.safetensors", st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12), "overlap")

# Hugging Face directories: config/weights that disagree.
def hf_dir(name, cfg, tensors):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(cfg if isinstance(cfg, str) else json.dumps(cfg))
    hdr, data = {}, b""
    for tname, shape in tensors:
        n = 1
        for s in shape:
            n *= s
        hdr[tname] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + 4 * n]}
        data += b"\0" * (4 * n)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(st(hdr, data))
    return d

cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
       "num_attention_heads": 2, "vocab_size": 10}
cases.append(("hf_missing_tensor", hf_dir("hf_missing_tensor", cfg, [("model.embed_tokens.weight", [10, 8])]), "missing tensor"))
cases.append(("hf_bad_config", hf_dir("hf_bad_config", "{not json", []), "config.json"))
cases.append(("hf_wrong_shape", hf_dir("hf_wrong_shape", cfg, [("model.embed_tokens.weight", [10, 9])]), "expected [10, 8]"))

for name, path, needle in cases:
    print(f"{name}\t{path}\t{needle}")
