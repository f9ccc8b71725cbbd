#!/usr/bin/env python3
"""Writes deterministic (seeded) tiny random checkpoints for checking cachebench against
the numpy reference.

Usage: python3 make_tiny_checkpoints.py OUT_DIR [--only NAME[,NAME...]]

Hugging Face directories (config.json + model.safetensors, like save_pretrained):
  tiny-llama          LlamaForCausalLM, hidden 64, 4 heads / 2 KV heads (GQA), 3 layers,
                      ffn 160, vocab 96, rope_theta 1e4, untied lm_head, F32
  tiny-llama-tied     LlamaForCausalLM, 4 heads / 4 KV heads (MHA), 2 layers, rope_theta
                      5e5, rms_norm_eps 1e-6, tie_word_embeddings true (no lm_head.weight)
  tiny-llama-bf16     tiny-llama's weights stored as BF16 (torch_dtype bfloat16)
  tiny-llama-sharded  tiny-llama split over two shards + model.safetensors.index.json
  tiny-mistral        MistralForCausalLM, 8 heads / 2 KV heads (head_dim 8), 2 layers,
                      sliding_window 8, rope_theta 1e6
  tiny-falcon-7b      FalconForCausalLM, 7B style: multi_query, one input_layernorm,
                      parallel attention, 4 heads, 2 layers, tied lm_head
  tiny-falcon-7b-f16  tiny-falcon-7b's weights stored as F16
  tiny-falcon-40b     FalconForCausalLM, new_decoder_architecture: 4 heads in 2 KV groups,
                      ln_attn + ln_mlp, 2 layers, tied lm_head
  tiny-falcon-mha     tiny-falcon-7b's config with multi_query false: each head its own K and
                      V, the fused QKV per head [q, k, v]
  tiny-falcon2        tiny-falcon-40b's config with num_ln_in_parallel_attn 1 (Falcon2-11B):
                      one input_layernorm
  tiny-falcon-40b-rw  the original falcon-40b config style: RWForCausalLM, model_type
                      RefinedWeb, n_head / n_head_kv / n_layer, no new_decoder_architecture
GGUF files (as llama.cpp's convert_hf_to_gguf.py would write them from the HF ones):
  tiny-llama.gguf, tiny-llama-{f16,bf16,q8_0,q4_0,q4_1}.gguf   (Q/K rows permuted for
                      interleaved RoPE; quantized files quantize every 2-D tensor, norms F32)
  tiny-llama-tied.gguf (no output.weight: tied)
  tiny-llama-rope-half.gguf  tiny-llama.gguf with llama.rope.dimension_count = head_dim/2
                      (partial rotary; NOT a conversion of an HF model, only a GGUF test)
  tiny-llama-rope-linear.gguf  tiny-llama.gguf with llama.rope.scaling.type linear, factor 4
                      (NOT a conversion: a file cachebench must refuse)
  tiny-llama-rope-factor.gguf  the same with only llama.rope.scaling.factor 2 (no type key,
                      which llama.cpp reads as linear)
  tiny-falcon-7b.gguf, tiny-falcon-40b.gguf   (fused QKV rearranged to [all Q, all K, all V])
  tiny-llama-kquants.gguf  NOT a conversion: a LLaMA of hidden 256 (K-quant rows are whole
                      super-blocks of 256), 4 heads / 2 KV heads, 2 layers, ffn 512, whose
                      matrices are random blocks of Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q5_0 and
                      Q5_1 (a mix, as llama.cpp's Q4_K_M mixes Q4_K and Q6_K), each scaled to
                      the std below; norms F32
The GGUF files carry a small made-up vocabulary (96 tokens) so loaders that expect one
find it. The HF directories have no tokenizer files.

Scaling: matrices ~ N(0, s^2 / fan_in) with s = 1 (q, k, v, gate, up, h_to_4h, lm_head) or
0.5 (o_proj/dense, down/4h_to_h); embeddings N(0, 0.25^2) (keeps tied logits O(1));
RMSNorm/LayerNorm weights 1 + N(0, 0.1^2); LayerNorm biases N(0, 0.1^2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

try:
    from . import gguf_read, safetensors_io
    from .reference import falcon_qkv_hf_to_gguf, llama_permute_qk
except ImportError:  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gguf_read
    import safetensors_io
    from reference import falcon_qkv_hf_to_gguf, llama_permute_qk


# --------------------------------------------------------------------------------------
# Configs (fields and order as in the published HF config.json files)
def llama_config(hidden=64, inter=160, layers=3, heads=4, kv=2, vocab=96, theta=10000.0,
                 eps=1e-5, tied=False, max_pos=256, dtype="float32"):
    return {
        "architectures": ["LlamaForCausalLM"],
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": inter,
        "max_position_embeddings": max_pos,
        "model_type": "llama",
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv,
        "pretraining_tp": 1,
        "rms_norm_eps": eps,
        "rope_scaling": None,
        "rope_theta": theta,
        "tie_word_embeddings": tied,
        "torch_dtype": dtype,
        "transformers_version": "4.40.0",
        "use_cache": True,
        "vocab_size": vocab,
    }


def mistral_config(hidden=64, inter=192, layers=2, heads=8, kv=2, vocab=96, theta=1e6,
                   eps=1e-5, window=8, max_pos=256):
    return {
        "architectures": ["MistralForCausalLM"],
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": inter,
        "max_position_embeddings": max_pos,
        "model_type": "mistral",
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv,
        "rms_norm_eps": eps,
        "rope_theta": theta,
        "sliding_window": window,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "transformers_version": "4.40.0",
        "use_cache": True,
        "vocab_size": vocab,
    }


def falcon_config(new_arch: bool, hidden=64, heads=4, kv=2, layers=2, vocab=96, eps=1e-5,
                  dtype="float32"):
    c = {
        "alibi": False,
        "apply_residual_connection_post_layernorm": False,
        "architectures": ["FalconForCausalLM"],
        "attention_dropout": 0.0,
        "bias": False,
        "bos_token_id": 11,
        "eos_token_id": 11,
        "hidden_dropout": 0.0,
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "layer_norm_epsilon": eps,
        "model_type": "falcon",
        "multi_query": True,
        "new_decoder_architecture": new_arch,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "parallel_attn": True,
        "torch_dtype": dtype,
        "transformers_version": "4.40.0",
        "use_cache": True,
        "vocab_size": vocab,
    }
    if new_arch:  # falcon-40b has num_kv_heads; falcon-7b's config does not (multi_query)
        c["num_kv_heads"] = kv
        c = dict(sorted(c.items()))
    return c


# --------------------------------------------------------------------------------------
# Weights
def _mat(rng, out, inp, s=1.0):
    return (rng.standard_normal((out, inp)) * (s / np.sqrt(inp))).astype(np.float32)


def _norm_w(rng, n):
    return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)


def _bias(rng, n):
    return (0.1 * rng.standard_normal(n)).astype(np.float32)


def llama_weights(cfg, seed):
    rng = np.random.default_rng(seed)
    E, V = cfg["hidden_size"], cfg["vocab_size"]
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, F = E // H, cfg["intermediate_size"]
    t = {"model.embed_tokens.weight": (0.25 * rng.standard_normal((V, E))).astype(np.float32)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = _norm_w(rng, E)
        t[p + "self_attn.q_proj.weight"] = _mat(rng, H * hd, E)
        t[p + "self_attn.k_proj.weight"] = _mat(rng, KV * hd, E)
        t[p + "self_attn.v_proj.weight"] = _mat(rng, KV * hd, E)
        t[p + "self_attn.o_proj.weight"] = _mat(rng, E, H * hd, 0.5)
        t[p + "post_attention_layernorm.weight"] = _norm_w(rng, E)
        t[p + "mlp.gate_proj.weight"] = _mat(rng, F, E)
        t[p + "mlp.up_proj.weight"] = _mat(rng, F, E)
        t[p + "mlp.down_proj.weight"] = _mat(rng, E, F, 0.5)
    t["model.norm.weight"] = _norm_w(rng, E)
    if not cfg.get("tie_word_embeddings", False):
        t["lm_head.weight"] = _mat(rng, V, E)
    return t


def falcon_weights(cfg, seed):
    rng = np.random.default_rng(seed)
    E, V = cfg["hidden_size"], cfg["vocab_size"]
    H = cfg.get("num_attention_heads", cfg.get("n_head"))
    layers = cfg.get("num_hidden_layers", cfg.get("n_layer"))
    hd = E // H
    # transformers' reading: RefinedWeb (the original falcon-40b config) is the new
    # architecture; without multi_query every head has its own K and V; the new architecture
    # has ln_attn + ln_mlp unless num_ln_in_parallel_attn is 1 (Falcon2-11B).
    new = cfg.get("new_decoder_architecture", cfg.get("model_type") == "RefinedWeb")
    if new:
        KV = cfg.get("num_kv_heads", cfg.get("n_head_kv", H))
    else:
        KV = 1 if cfg.get("multi_query", True) else H
    two_ln = new and (cfg.get("num_ln_in_parallel_attn") or 2) == 2
    t = {"transformer.word_embeddings.weight":
         (0.25 * rng.standard_normal((V, E))).astype(np.float32)}
    for i in range(layers):
        p = f"transformer.h.{i}."
        if two_ln:
            t[p + "ln_attn.weight"], t[p + "ln_attn.bias"] = _norm_w(rng, E), _bias(rng, E)
            t[p + "ln_mlp.weight"], t[p + "ln_mlp.bias"] = _norm_w(rng, E), _bias(rng, E)
        else:
            t[p + "input_layernorm.weight"] = _norm_w(rng, E)
            t[p + "input_layernorm.bias"] = _bias(rng, E)
        t[p + "self_attention.query_key_value.weight"] = _mat(rng, (H + 2 * KV) * hd, E)
        t[p + "self_attention.dense.weight"] = _mat(rng, E, E, 0.5)
        t[p + "mlp.dense_h_to_4h.weight"] = _mat(rng, 4 * E, E)
        t[p + "mlp.dense_4h_to_h.weight"] = _mat(rng, E, 4 * E, 0.5)
    t["transformer.ln_f.weight"] = _norm_w(rng, E)
    t["transformer.ln_f.bias"] = _bias(rng, E)
    return t


# --------------------------------------------------------------------------------------
# Writers
def write_hf(dirpath, cfg, tensors, dtype="F32", shards=1):
    os.makedirs(dirpath, exist_ok=True)
    with open(os.path.join(dirpath, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    for old in ("model.safetensors", "model.safetensors.index.json"):
        if os.path.exists(os.path.join(dirpath, old)):
            os.remove(os.path.join(dirpath, old))
    if shards == 1:
        safetensors_io.save(os.path.join(dirpath, "model.safetensors"), tensors, dtype,
                            metadata={"format": "pt"})
        return
    names = sorted(tensors)
    parts = np.array_split(np.arange(len(names)), shards)
    weight_map, total = {}, 0
    for si, idx in enumerate(parts):
        fn = f"model-{si + 1:05d}-of-{shards:05d}.safetensors"
        sub = {names[i]: tensors[names[i]] for i in idx}
        safetensors_io.save(os.path.join(dirpath, fn), sub, dtype, metadata={"format": "pt"})
        for n in sub:
            weight_map[n] = fn
            total += sub[n].size * (4 if dtype == "F32" else 2)
    with open(os.path.join(dirpath, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        f.write("\n")


FILE_TYPE = {gguf_read.GGML_F32: 0, gguf_read.GGML_F16: 1, gguf_read.GGML_Q4_0: 2,
             gguf_read.GGML_Q4_1: 3, gguf_read.GGML_Q8_0: 7, gguf_read.GGML_BF16: 32}


def _spm_vocab(n):
    pieces = ["<unk>", "<s>", "</s>", "<0x0A>"]
    pieces += ["\u2581" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    pieces += list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?")
    pieces += ["\u2581"]
    pieces = pieces[:n] + [f"\u2581w{i}" for i in range(max(0, n - len(pieces)))]
    types = [2, 3, 3, 6] + [1] * (n - 4)
    return [("tokenizer.ggml.model", "llama"),
            ("tokenizer.ggml.tokens", pieces),
            ("tokenizer.ggml.scores", [float(-i) for i in range(n)]),
            ("tokenizer.ggml.token_type", types),
            ("tokenizer.ggml.bos_token_id", 1), ("tokenizer.ggml.eos_token_id", 2),
            ("tokenizer.ggml.unknown_token_id", 0)]


def _bpe_vocab(n):
    # byte-level pieces: <|endoftext|>, "Ġ" (space), "!".."}", then the one merge's result "Ġt"
    pieces = ["<|endoftext|>", "\u0120"] + [chr(c) for c in range(0x21, 0x7E)]
    pieces = pieces[:n - 1] + [f"w{i}" for i in range(max(0, n - 1 - len(pieces)))] + ["\u0120t"]
    return [("tokenizer.ggml.model", "gpt2"), ("tokenizer.ggml.tokens", pieces),
            ("tokenizer.ggml.token_type", [3] + [1] * (n - 1)),
            ("tokenizer.ggml.merges", ["\u0120 t"]),
            ("tokenizer.ggml.bos_token_id", 0), ("tokenizer.ggml.eos_token_id", 0)]


def _gguf_t(qtype, arr):
    return qtype if arr.ndim == 2 else gguf_read.GGML_F32


def write_llama_gguf(path, cfg, t, qtype=gguf_read.GGML_F32, name="tiny-llama", rope_dims=None,
                     extra_md=()):
    """LLaMA/Mistral HF tensors -> GGUF the way convert_hf_to_gguf.py does it."""
    E, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hd = E // H
    md = [("general.architecture", "llama"), ("general.name", name),
          ("llama.context_length", cfg["max_position_embeddings"]),
          ("llama.embedding_length", E), ("llama.block_count", cfg["num_hidden_layers"]),
          ("llama.feed_forward_length", cfg["intermediate_size"]),
          ("llama.rope.dimension_count", rope_dims or hd),
          ("llama.attention.head_count", H), ("llama.attention.head_count_kv", KV),
          ("llama.attention.layer_norm_rms_epsilon", float(cfg["rms_norm_eps"])),
          ("llama.rope.freq_base", float(cfg.get("rope_theta", 10000.0))),
          ("llama.vocab_size", cfg["vocab_size"]),
          ("general.file_type", FILE_TYPE[qtype])] + list(extra_md) + _spm_vocab(cfg["vocab_size"])
    tensors = [("token_embd.weight", t["model.embed_tokens.weight"])]
    for i in range(cfg["num_hidden_layers"]):
        p, q = f"model.layers.{i}.", f"blk.{i}."
        tensors += [
            (q + "attn_norm.weight", t[p + "input_layernorm.weight"]),
            (q + "attn_q.weight", llama_permute_qk(t[p + "self_attn.q_proj.weight"], H)),
            (q + "attn_k.weight", llama_permute_qk(t[p + "self_attn.k_proj.weight"], KV)),
            (q + "attn_v.weight", t[p + "self_attn.v_proj.weight"]),
            (q + "attn_output.weight", t[p + "self_attn.o_proj.weight"]),
            (q + "ffn_norm.weight", t[p + "post_attention_layernorm.weight"]),
            (q + "ffn_gate.weight", t[p + "mlp.gate_proj.weight"]),
            (q + "ffn_up.weight", t[p + "mlp.up_proj.weight"]),
            (q + "ffn_down.weight", t[p + "mlp.down_proj.weight"])]
    tensors.append(("output_norm.weight", t["model.norm.weight"]))
    if "lm_head.weight" in t and not cfg.get("tie_word_embeddings", False):
        tensors.append(("output.weight", t["lm_head.weight"]))
    gguf_read.write_gguf(path, md, [(n, a, _gguf_t(qtype, a)) for n, a in tensors])


# ggml-common.h: byte offsets of each block's fp16 scales, as (d, dmin or m, dmin per d): a
# block's values are d * A - dmin * B, so d = s and dmin = s * c scale them together; c puts
# the mean of random blocks near 0.
_K_SCALES = {gguf_read.GGML_Q2_K: (80, 82, 1.5), gguf_read.GGML_Q3_K: (108, None, 0),
             gguf_read.GGML_Q4_K: (0, 2, 7.5), gguf_read.GGML_Q5_K: (0, 2, 15.5),
             gguf_read.GGML_Q6_K: (208, None, 0), gguf_read.GGML_Q5_0: (0, None, 0),
             gguf_read.GGML_Q5_1: (0, 2, -15.5)}


def random_blocks(rng, qtype, shape, std):
    """A `shape` tensor of random `qtype` blocks whose values have about this std."""
    vb, bb = gguf_read.TYPE_BLOCK[qtype]
    n = int(np.prod(shape))
    raw = rng.integers(0, 256, size=(n // vb, bb), dtype=np.uint8)
    d_off, m_off, c = _K_SCALES[qtype]

    def scale(s):
        raw[:, d_off:d_off + 2] = np.array([s], dtype="<f2").view(np.uint8)
        if m_off is not None:  # Q5_1's m is added, the K-quants' dmin subtracted
            raw[:, m_off:m_off + 2] = np.array([s * c], dtype="<f2").view(np.uint8)

    scale(1.0)
    s0 = float(gguf_read.dequantize(raw.reshape(-1), qtype, n).std())
    scale(std / s0)
    return gguf_read.Blocks(tuple(shape), raw.tobytes())


def write_kquant_llama_gguf(path, seed=20261125):
    G = gguf_read
    rng = np.random.default_rng(seed)
    E, H, KV, F, L, V = 256, 4, 2, 512, 2, 96
    hd = E // H
    md = [("general.architecture", "llama"), ("general.name", "tiny-llama-kquants"),
          ("llama.context_length", 256), ("llama.embedding_length", E),
          ("llama.block_count", L), ("llama.feed_forward_length", F),
          ("llama.rope.dimension_count", hd), ("llama.attention.head_count", H),
          ("llama.attention.head_count_kv", KV),
          ("llama.attention.layer_norm_rms_epsilon", 1e-5), ("llama.rope.freq_base", 10000.0),
          ("llama.vocab_size", V), ("general.file_type", 15)] + _spm_vocab(V)  # 15: Q4_K_M

    def norm(n):
        return (n, (1.0 + 0.1 * rng.standard_normal(E)).astype(np.float32), G.GGML_F32)

    def mat(n, qtype, rows, cols, s):
        return (n, random_blocks(rng, qtype, (rows, cols), s / np.sqrt(cols)), qtype)

    # Every type in both layers, in different places.
    kinds = [[G.GGML_Q4_K, G.GGML_Q5_K, G.GGML_Q6_K, G.GGML_Q3_K, G.GGML_Q2_K, G.GGML_Q5_0,
              G.GGML_Q5_1],
             [G.GGML_Q6_K, G.GGML_Q4_K, G.GGML_Q5_1, G.GGML_Q5_K, G.GGML_Q3_K, G.GGML_Q2_K,
              G.GGML_Q5_0]]
    tensors = [("token_embd.weight", random_blocks(rng, G.GGML_Q4_K, (V, E), 0.25), G.GGML_Q4_K)]
    for i in range(L):
        q, k = f"blk.{i}.", kinds[i]
        tensors += [norm(q + "attn_norm.weight"),
                    mat(q + "attn_q.weight", k[0], H * hd, E, 1.0),
                    mat(q + "attn_k.weight", k[1], KV * hd, E, 1.0),
                    mat(q + "attn_v.weight", k[2], KV * hd, E, 1.0),
                    mat(q + "attn_output.weight", k[3], E, H * hd, 0.5),
                    norm(q + "ffn_norm.weight"),
                    mat(q + "ffn_gate.weight", k[4], F, E, 1.0),
                    mat(q + "ffn_up.weight", k[5], F, E, 1.0),
                    mat(q + "ffn_down.weight", k[6], E, F, 0.5)]
    tensors += [norm("output_norm.weight"), mat("output.weight", G.GGML_Q6_K, V, E, 1.0)]
    G.write_gguf(path, md, tensors)


def write_falcon_gguf(path, cfg, t, qtype=gguf_read.GGML_F32, name="tiny-falcon"):
    E, H = cfg["hidden_size"], cfg["num_attention_heads"]
    new = cfg["new_decoder_architecture"]
    KV = (cfg.get("num_kv_heads") or H) if new else 1
    hd = E // H
    md = [("general.architecture", "falcon"), ("general.name", name),
          ("falcon.context_length", 2048), ("falcon.tensor_data_layout", "jploski"),
          ("falcon.embedding_length", E), ("falcon.feed_forward_length", 4 * E),
          ("falcon.block_count", cfg["num_hidden_layers"]),
          ("falcon.attention.head_count", H), ("falcon.attention.head_count_kv", KV),
          ("falcon.attention.layer_norm_epsilon", float(cfg["layer_norm_epsilon"])),
          ("general.file_type", FILE_TYPE[qtype])] + _bpe_vocab(cfg["vocab_size"])
    tensors = [("token_embd.weight", t["transformer.word_embeddings.weight"])]
    for i in range(cfg["num_hidden_layers"]):
        p, q = f"transformer.h.{i}.", f"blk.{i}."
        if new:
            tensors += [(q + "attn_norm.weight", t[p + "ln_attn.weight"]),
                        (q + "attn_norm.bias", t[p + "ln_attn.bias"]),
                        (q + "attn_norm_2.weight", t[p + "ln_mlp.weight"]),
                        (q + "attn_norm_2.bias", t[p + "ln_mlp.bias"])]
        else:
            tensors += [(q + "attn_norm.weight", t[p + "input_layernorm.weight"]),
                        (q + "attn_norm.bias", t[p + "input_layernorm.bias"])]
        tensors += [
            (q + "attn_qkv.weight",
             falcon_qkv_hf_to_gguf(t[p + "self_attention.query_key_value.weight"], H, KV, hd)),
            (q + "attn_output.weight", t[p + "self_attention.dense.weight"]),
            (q + "ffn_up.weight", t[p + "mlp.dense_h_to_4h.weight"]),
            (q + "ffn_down.weight", t[p + "mlp.dense_4h_to_h.weight"])]
    tensors += [("output_norm.weight", t["transformer.ln_f.weight"]),
                ("output_norm.bias", t["transformer.ln_f.bias"])]
    gguf_read.write_gguf(path, md, [(n, a, _gguf_t(qtype, a)) for n, a in tensors])


# --------------------------------------------------------------------------------------
def checkpoints():
    """name -> (config, tensors); deterministic."""
    cl = llama_config()
    ct = llama_config(inter=128, layers=2, heads=4, kv=4, theta=500000.0, eps=1e-6, tied=True)
    cm = mistral_config()
    c7 = falcon_config(False)
    c40 = falcon_config(True, kv=2)
    cmha = dict(c7, multi_query=False)
    c2 = dict(c40, num_ln_in_parallel_attn=1)
    crw = {"alibi": False, "apply_residual_connection_post_layernorm": False,
           "architectures": ["RWForCausalLM"], "bias": False, "bos_token_id": 11,
           "eos_token_id": 11, "hidden_size": 64, "layer_norm_epsilon": 1e-5,
           "model_type": "RefinedWeb", "n_head": 4, "n_head_kv": 2, "n_layer": 2,
           "parallel_attn": True, "torch_dtype": "float32", "vocab_size": 96}
    return {
        "tiny-llama": (cl, llama_weights(cl, 1)),
        "tiny-llama-tied": (ct, llama_weights(ct, 2)),
        "tiny-mistral": (cm, llama_weights(cm, 3)),
        "tiny-falcon-7b": (c7, falcon_weights(c7, 4)),
        "tiny-falcon-40b": (c40, falcon_weights(c40, 5)),
        "tiny-falcon-mha": (cmha, falcon_weights(cmha, 6)),
        "tiny-falcon2": (c2, falcon_weights(c2, 7)),
        "tiny-falcon-40b-rw": (crw, falcon_weights(crw, 8)),
    }


def write_all(out_dir, only=None):
    os.makedirs(out_dir, exist_ok=True)
    ck = checkpoints()
    written = []

    def want(n):
        return only is None or n in only

    def hf(name, cfg, t, **kw):
        if want(name):
            write_hf(os.path.join(out_dir, name), cfg, t, **kw)
            written.append(name)

    def gg(fname, fn, *args, **kw):
        if want(fname):
            fn(os.path.join(out_dir, fname), *args, **kw)
            written.append(fname)

    for name, (cfg, t) in ck.items():
        hf(name, cfg, t)
    cl, tl = ck["tiny-llama"]
    hf("tiny-llama-bf16", dict(cl, torch_dtype="bfloat16"), tl, dtype="BF16")
    hf("tiny-llama-sharded", cl, tl, shards=2)
    c7, t7 = ck["tiny-falcon-7b"]
    hf("tiny-falcon-7b-f16", dict(c7, torch_dtype="float16"), t7, dtype="F16")

    G = gguf_read
    gg("tiny-llama.gguf", write_llama_gguf, cl, tl, G.GGML_F32)
    for suf, q in (("f16", G.GGML_F16), ("bf16", G.GGML_BF16), ("q8_0", G.GGML_Q8_0),
                   ("q4_0", G.GGML_Q4_0), ("q4_1", G.GGML_Q4_1)):
        gg(f"tiny-llama-{suf}.gguf", write_llama_gguf, cl, tl, q)
    ct, tt = ck["tiny-llama-tied"]
    gg("tiny-llama-tied.gguf", write_llama_gguf, ct, tt, G.GGML_F32, name="tiny-llama-tied")
    hd = cl["hidden_size"] // cl["num_attention_heads"]
    gg("tiny-llama-rope-half.gguf", write_llama_gguf, cl, tl, G.GGML_F32,
       name="tiny-llama-rope-half", rope_dims=hd // 2)
    # Linear RoPE scaling in the metadata, which cachebench refuses rather than ignores.
    gg("tiny-llama-rope-linear.gguf", write_llama_gguf, cl, tl, G.GGML_F32,
       name="tiny-llama-rope-linear",
       extra_md=[("llama.rope.scaling.type", "linear"), ("llama.rope.scaling.factor", 4.0)])
    # Only the factor: llama.cpp takes the missing type as linear.
    gg("tiny-llama-rope-factor.gguf", write_llama_gguf, cl, tl, G.GGML_F32,
       name="tiny-llama-rope-factor", extra_md=[("llama.rope.scaling.factor", 2.0)])
    gg("tiny-falcon-7b.gguf", write_falcon_gguf, c7, t7, name="tiny-falcon-7b")
    c40, t40 = ck["tiny-falcon-40b"]
    gg("tiny-falcon-40b.gguf", write_falcon_gguf, c40, t40, name="tiny-falcon-40b")
    gg("tiny-llama-kquants.gguf", write_kquant_llama_gguf)
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--only", help="comma-separated names (e.g. tiny-llama,tiny-mistral)")
    a = ap.parse_args(argv)
    only = set(a.only.split(",")) if a.only else None
    for n in write_all(a.out_dir, only):
        print(os.path.join(a.out_dir, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
