#!/usr/bin/env python3
"""Writes a LLaMA GGUF of a given shape with random weights, for timing one engine against
another on the same file (tools/llamacpp_peer.py): both read the same tensors, so their speeds
compare, whatever the weights say.

Usage: python3 shape_gguf.py OUT.gguf --vocab-from VOCAB.gguf [--hidden 4096] [--heads 32]
           [--kv-heads 32] [--ffn 11008] [--layers 2] [--ctx 4096] [--type f32|f16|bf16] [--seed 0]

The tokenizer (every tokenizer.ggml.* key) is copied from VOCAB.gguf, e.g. llama.cpp's
ggml-vocab-llama-spm.gguf for LLaMA-2's 32,000 tokens; the vocabulary size is its token count.
The default shape is LLaMA-2-7B's with 2 of its 32 layers. Matrices ~ N(0, 1/fan_in), norms 1.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "reference"))
import gguf_read  # noqa: E402

TYPES = {"f32": (gguf_read.GGML_F32, 0), "f16": (gguf_read.GGML_F16, 1),
         "bf16": (gguf_read.GGML_BF16, 32)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--vocab-from", required=True)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=32)
    ap.add_argument("--ffn", type=int, default=11008)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--type", choices=sorted(TYPES), default="f32")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.hidden % a.heads or a.heads % a.kv_heads:
        ap.error("--hidden must be a multiple of --heads, and --heads of --kv-heads")

    src = gguf_read.GGUFFile(a.vocab_from)
    vocab = [(k, v, src.metadata_types[k]) for k, v in src.metadata.items()
             if k.startswith("tokenizer.ggml.")]
    n_vocab = len(src.get("tokenizer.ggml.tokens") or [])
    if n_vocab == 0:
        ap.error(f"--vocab-from {a.vocab_from}: no tokenizer.ggml.tokens")
    qtype, file_type = TYPES[a.type]
    E, hd = a.hidden, a.hidden // a.heads
    md = [("general.architecture", "llama"), ("general.name", "shape-llama"),
          ("general.file_type", file_type), ("llama.context_length", a.ctx),
          ("llama.embedding_length", E), ("llama.block_count", a.layers),
          ("llama.feed_forward_length", a.ffn), ("llama.rope.dimension_count", hd),
          ("llama.attention.head_count", a.heads), ("llama.attention.head_count_kv", a.kv_heads),
          ("llama.attention.layer_norm_rms_epsilon", 1e-5), ("llama.rope.freq_base", 10000.0),
          ("llama.vocab_size", n_vocab)] + vocab

    rng = np.random.default_rng(a.seed)

    def mat(rows, cols):
        m = rng.standard_normal((rows, cols), dtype=np.float32)
        m *= np.float32(1.0 / np.sqrt(cols))
        return m

    ones = np.ones(E, dtype=np.float32)
    tensors = [("token_embd.weight", mat(n_vocab, E), qtype)]
    for i in range(a.layers):
        q = f"blk.{i}."
        tensors += [(q + "attn_norm.weight", ones, gguf_read.GGML_F32),
                    (q + "attn_q.weight", mat(E, E), qtype),
                    (q + "attn_k.weight", mat(a.kv_heads * hd, E), qtype),
                    (q + "attn_v.weight", mat(a.kv_heads * hd, E), qtype),
                    (q + "attn_output.weight", mat(E, E), qtype),
                    (q + "ffn_norm.weight", ones, gguf_read.GGML_F32),
                    (q + "ffn_gate.weight", mat(a.ffn, E), qtype),
                    (q + "ffn_up.weight", mat(a.ffn, E), qtype),
                    (q + "ffn_down.weight", mat(E, a.ffn), qtype)]
    tensors += [("output_norm.weight", ones, gguf_read.GGML_F32),
                ("output.weight", mat(n_vocab, E), qtype)]
    gguf_read.write_gguf(a.out, md, tensors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
