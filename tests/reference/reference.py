"""Independent numpy reference forward pass for LLaMA, Mistral and Falcon (the oracle for
cachebench's C++ engine).

Written from the published architecture definitions only: Hugging Face transformers'
modeling_llama.py / modeling_mistral.py / modeling_falcon.py, the GGUF specification and
llama.cpp's conventions (convert_hf_to_gguf.py, ggml_rope). Not derived from cachebench's
C++ code.

Precision: every weight is converted to float64 and the whole forward pass runs in
float64 (pass dtype=np.float32 to forward() to emulate an fp32 engine; the oracle uses
float64). Quantized GGUF weights are dequantized exactly as GGUF defines (gguf_read.py)
and then used in float64, i.e. the reference answers "what does this model compute with
these (dequantized) weights", not "what does llama.cpp's q8 dot product round to".

Conventions (see README.md):
  * LLaMA/Mistral layer: h = x + attn(rmsnorm(x)); out = h + down(silu(gate(n)) * up(n)),
    n = rmsnorm(h); RMSNorm(x) = x / sqrt(mean(x^2) + eps) * w.
  * attention: scores = q k^T / sqrt(head_dim), causal (key j visible to query i iff
    j <= i); Mistral sliding window W (HF): additionally i - W < j. GQA: query head h
    uses KV head h // (n_head / n_kv) (HF repeat_kv).
  * RoPE on the first rope_dims dims of each head, inv_freq[k] = theta^(-2k/rope_dims),
    angle = pos * inv_freq[k] (pos / factor with linear scaling). "neox" (rotate-half,
    HF checkpoints and Falcon): pairs (k, k + rope_dims/2). "interleaved" (GGUF llama):
    pairs (2k, 2k+1).
  * Falcon: LayerNorm with bias, fused QKV (layouts below), rotate-half RoPE over the
    whole head, exact (erf) GELU, parallel attention + MLP: x = x + attn + mlp.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np

try:  # works both as a package module and as a script next to its siblings
    from . import gguf_read, safetensors_io
except ImportError:  # pragma: no cover
    import gguf_read
    import safetensors_io


class RefError(ValueError):
    pass


# --------------------------------------------------------------------------------------
# Hyper-parameters and weights
@dataclass
class Hparams:
    arch: str                      # "llama" (LLaMA, Mistral) or "falcon"
    n_embd: int
    n_layer: int
    n_head: int
    n_kv: int
    head_dim: int
    n_ff: int
    vocab: int
    norm_eps: float
    rope_theta: float = 10000.0
    rope_dims: int = 0             # 0 -> head_dim
    rope_style: str = "neox"       # "neox" (rotate-half) or "interleaved" (GGUF llama)
    rope_linear_factor: float = 1.0
    sliding_window: int | None = None
    # Falcon only
    falcon_parallel_attn: bool = True
    falcon_two_ln: bool = False    # ln_attn + ln_mlp (40B) vs one input_layernorm (7B)
    source: str = ""

    def __post_init__(self):
        if self.rope_dims == 0:
            self.rope_dims = self.head_dim
        if self.n_head % self.n_kv:
            raise RefError(f"n_head {self.n_head} not a multiple of n_kv {self.n_kv}")
        if self.rope_dims % 2 or self.rope_dims > self.head_dim:
            raise RefError(f"bad rope_dims {self.rope_dims} (head_dim {self.head_dim})")


@dataclass
class Layer:
    # attention (q/k/v already split for Falcon); weights are [out, in]
    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    bq: np.ndarray | None = None
    bk: np.ndarray | None = None
    bv: np.ndarray | None = None
    bo: np.ndarray | None = None
    # norms: LLaMA uses attn_norm (input_layernorm) and ffn_norm (post_attention_layernorm);
    # Falcon 7B uses attn_norm(+bias) only (parallel) or also ffn_norm (non-parallel);
    # Falcon 40B uses attn_norm = ln_attn, ffn_norm = ln_mlp.
    attn_norm: np.ndarray | None = None
    attn_norm_b: np.ndarray | None = None
    ffn_norm: np.ndarray | None = None
    ffn_norm_b: np.ndarray | None = None
    # MLP
    w_gate: np.ndarray | None = None   # LLaMA only
    w_up: np.ndarray | None = None
    w_down: np.ndarray | None = None
    b_gate: np.ndarray | None = None
    b_up: np.ndarray | None = None
    b_down: np.ndarray | None = None


@dataclass
class Weights:
    tok_embd: np.ndarray               # [vocab, n_embd]
    layers: list
    out_norm: np.ndarray
    out_norm_b: np.ndarray | None
    output: np.ndarray                 # [vocab, n_embd] (may be tok_embd when tied)


def _f64(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


# --------------------------------------------------------------------------------------
# Primitive ops (float64 unless asked otherwise)
def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)      # biased, as torch
    y = (x - mu) / np.sqrt(var + eps) * w
    return y if b is None else y + b


def silu(x):
    with np.errstate(over="ignore"):
        return x / (1.0 + np.exp(-x))


_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu_exact(x):
    return (0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))).astype(x.dtype)


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def rope_angles(positions, hp: Hparams, dtype=np.float64):
    d = hp.rope_dims
    inv_freq = np.power(float(hp.rope_theta), -np.arange(0, d, 2, dtype=np.float64) / d)
    pos = np.asarray(positions, dtype=np.float64) / hp.rope_linear_factor
    ang = pos[:, None] * inv_freq[None, :]                     # [T, d/2]
    return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)


def apply_rope(x, cos, sin, hp: Hparams):
    """x: [T, heads, head_dim]; rotates the first rope_dims dims of every head."""
    d = hp.rope_dims
    c, s = cos[:, None, :], sin[:, None, :]
    xr, xp = x[..., :d], x[..., d:]
    if hp.rope_style == "neox":           # HF rotate_half: q*cos + rotate_half(q)*sin
        x1, x2 = xr[..., : d // 2], xr[..., d // 2:]
        out = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    elif hp.rope_style == "interleaved":  # ggml_rope mode 0: pairs (2k, 2k+1)
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        out = np.empty_like(xr)
        out[..., 0::2] = x1 * c - x2 * s
        out[..., 1::2] = x1 * s + x2 * c
    else:
        raise RefError(f"unknown rope style {hp.rope_style}")
    return np.concatenate([out, xp], axis=-1)


def attention_mask(T, sliding_window=None):
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    ok = j <= i
    if sliding_window is not None:
        ok &= j > i - sliding_window
    return ok


def attention(h, L: Layer, hp: Hparams, cos, sin, mask):
    T = h.shape[0]
    q = linear(h, L.wq, L.bq).reshape(T, hp.n_head, hp.head_dim)
    k = linear(h, L.wk, L.bk).reshape(T, hp.n_kv, hp.head_dim)
    v = linear(h, L.wv, L.bv).reshape(T, hp.n_kv, hp.head_dim)
    q = apply_rope(q, cos, sin, hp)
    k = apply_rope(k, cos, sin, hp)
    rep = hp.n_head // hp.n_kv
    k = np.repeat(k, rep, axis=1)          # head h -> kv head h // rep
    v = np.repeat(v, rep, axis=1)
    scores = np.einsum("thd,shd->hts", q, k) / math.sqrt(hp.head_dim)
    scores = np.where(mask[None], scores, -np.inf)
    p = softmax(scores, axis=-1)
    o = np.einsum("hts,shd->thd", p, v).reshape(T, hp.n_head * hp.head_dim)
    return linear(o, L.wo, L.bo)


def round_to_bf16(a):
    """a rounded to fp32, then to bfloat16 (the top 16 bits of an fp32) by round-to-nearest-
    even, returned as float64: the values an engine holding its weights in bf16 multiplies by."""
    if a is None:
        return None
    f = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    u = f.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    out = (r & 0xFFFFFFFF).astype(np.uint32).view(np.float32).astype(np.float64)
    return np.where(np.isnan(f), np.nan, out).reshape(np.shape(a))


# --------------------------------------------------------------------------------------
class Model:
    def __init__(self, hp: Hparams, w: Weights, vocab_pieces=None):
        self.hp = hp
        self.w = w
        self.vocab_pieces = vocab_pieces   # list[str] from GGUF, or None
        self._cast = {}

    def with_bf16_matrices(self):
        """This model with its matrices (embedding, attention and MLP weights, LM head) rounded
        to bfloat16 (round_to_bf16); norms and biases unchanged."""
        mats = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")
        layers = [Layer(**{k: (round_to_bf16(v) if k in mats else v) for k, v in vars(L).items()})
                  for L in self.w.layers]
        embd = round_to_bf16(self.w.tok_embd)
        out = embd if self.w.output is self.w.tok_embd else round_to_bf16(self.w.output)
        return Model(self.hp, Weights(embd, layers, self.w.out_norm, self.w.out_norm_b, out),
                     self.vocab_pieces)

    def _weights(self, dtype):
        if dtype == np.float64:
            return self.w
        if dtype not in self._cast:
            cast = lambda a: None if a is None else a.astype(dtype)   # noqa: E731
            layers = [Layer(**{k: cast(v) for k, v in vars(L).items()}) for L in self.w.layers]
            self._cast[dtype] = Weights(cast(self.w.tok_embd), layers, cast(self.w.out_norm),
                                        cast(self.w.out_norm_b), cast(self.w.output))
        return self._cast[dtype]

    def forward(self, tokens, dtype=np.float64, return_hidden=False):
        """Logits [T, vocab] for the sequence `tokens` at positions 0..T-1."""
        hp = self.hp
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.ndim != 1 or tokens.size == 0:
            raise RefError("tokens must be a non-empty 1-D sequence")
        if tokens.min() < 0 or tokens.max() >= hp.vocab:
            raise RefError(f"token id out of range [0, {hp.vocab})")
        W = self._weights(dtype)
        T = tokens.size
        cos, sin = rope_angles(np.arange(T), hp, dtype)
        x = W.tok_embd[tokens].astype(dtype)
        hidden = [x]
        if hp.arch == "llama":
            mask = attention_mask(T, hp.sliding_window)
            for L in W.layers:
                x = x + attention(rms_norm(x, L.attn_norm, hp.norm_eps), L, hp, cos, sin, mask)
                n = rms_norm(x, L.ffn_norm, hp.norm_eps)
                x = x + linear(silu(linear(n, L.w_gate, L.b_gate)) * linear(n, L.w_up, L.b_up),
                               L.w_down, L.b_down)
                hidden.append(x)
            x = rms_norm(x, W.out_norm, hp.norm_eps)
        elif hp.arch == "falcon":
            mask = attention_mask(T, None)
            for L in W.layers:
                a_in = layer_norm(x, L.attn_norm, L.attn_norm_b, hp.norm_eps)
                attn = attention(a_in, L, hp, cos, sin, mask)
                if hp.falcon_parallel_attn:
                    m_in = (layer_norm(x, L.ffn_norm, L.ffn_norm_b, hp.norm_eps)
                            if hp.falcon_two_ln else a_in)
                    mlp = linear(gelu_exact(linear(m_in, L.w_up, L.b_up)), L.w_down, L.b_down)
                    x = x + attn + mlp
                else:  # sequential (falcon-rw style, no alibi): post_attention_layernorm
                    x = x + attn
                    m_in = layer_norm(x, L.ffn_norm, L.ffn_norm_b, hp.norm_eps)
                    x = x + linear(gelu_exact(linear(m_in, L.w_up, L.b_up)), L.w_down, L.b_down)
                hidden.append(x)
            x = layer_norm(x, W.out_norm, W.out_norm_b, hp.norm_eps)
        else:
            raise RefError(f"unknown arch {hp.arch}")
        logits = x @ W.output.T
        return (logits, hidden) if return_hidden else logits

    def greedy(self, prompt, n_new, dtype=np.float64):
        toks = list(prompt)
        for _ in range(n_new):
            toks.append(int(np.argmax(self.forward(toks, dtype)[-1])))
        return toks

    def decode(self, ids):
        """SentencePiece-style decode with the GGUF vocabulary: U+2581 -> space, <0xXX>
        byte tokens -> that byte, control tokens (<s>, </s>, <unk>) dropped; a leading
        space is removed as SentencePiece does."""
        if self.vocab_pieces is None:
            raise RefError("model has no vocabulary")
        return decode_sentencepiece(self.vocab_pieces, ids)


def decode_sentencepiece(pieces, ids):
    out = bytearray()
    for i in ids:
        p = pieces[i]
        if p in ("<s>", "</s>", "<unk>"):
            continue
        if len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            out.append(int(p[3:5], 16))
        else:
            out += p.replace("\u2581", " ").encode("utf-8")
    s = out.decode("utf-8", errors="replace")
    return s[1:] if s.startswith(" ") else s


# --------------------------------------------------------------------------------------
# Falcon fused QKV layouts
def split_falcon_qkv(w, n_head, n_kv, head_dim, layout):
    """w: [rows, ...] (weight [rows, hidden] or bias [rows]). Returns (q, k, v).
    layout:
      "grouped" (HF new_decoder_architecture): view [n_kv, n_head/n_kv + 2, head_dim]:
                per group its query heads, then its key, then its value.
      "mqa"     (HF multi_query, 7B): [n_head + 2, head_dim]: all Q heads, K, V.
                (Same as "grouped" with n_kv = 1.)
      "per_head"(HF multi_query false, old arch): [n_head, 3, head_dim].
      "gguf"    (llama.cpp convert): all Q heads, then all K heads, then all V heads."""
    rest = w.shape[1:]
    if layout in ("grouped", "mqa"):
        g = w.reshape(n_kv, n_head // n_kv + 2, head_dim, *rest)
        q = g[:, :-2].reshape(n_head * head_dim, *rest)
        k = g[:, -2].reshape(n_kv * head_dim, *rest)
        v = g[:, -1].reshape(n_kv * head_dim, *rest)
    elif layout == "per_head":
        g = w.reshape(n_head, 3, head_dim, *rest)
        q, k, v = (g[:, i].reshape(n_head * head_dim, *rest) for i in range(3))
    elif layout == "gguf":
        nq, nk = n_head * head_dim, n_kv * head_dim
        q, k, v = w[:nq], w[nq:nq + nk], w[nq + nk:nq + 2 * nk]
    else:
        raise RefError(f"unknown qkv layout {layout}")
    return q, k, v


def falcon_qkv_hf_to_gguf(w, n_head, n_kv, head_dim):
    """llama.cpp convert_hf_to_gguf.py FalconModel: grouped -> [all Q, all K, all V]."""
    q, k, v = split_falcon_qkv(w, n_head, n_kv, head_dim, "grouped")
    return np.concatenate([q, k, v], axis=0)


def llama_permute_qk(w, n_head):
    """llama.cpp convert (LlamaModel.permute): rotate-half row order -> interleaved
    pairs, per head. w: [n_head * head_dim, ...]."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


# --------------------------------------------------------------------------------------
# Loading: Hugging Face directories
def _need(t, name, where):
    if name not in t:
        raise RefError(f"{where}: missing tensor {name}")
    return t[name]


def _rope_theta(cfg):
    """rope_theta, or transformers 5's rope_parameters (non-default types are scaling)."""
    rp = cfg.get("rope_parameters")
    theta = float(cfg.get("rope_theta", 10000.0))
    if not rp:
        return theta
    if rp.get("rope_type", "default") != "default":
        raise RefError(f"rope_parameters {rp} not supported by the reference")
    return float(rp.get("rope_theta", theta))


def _mistral_window(cfg):
    """transformers' MistralConfig: an absent key is its default of 4096, null is none."""
    if "sliding_window" not in cfg:
        return 4096
    return int(cfg["sliding_window"]) if cfg["sliding_window"] else None


def _rope_scaling(cfg):
    rs = cfg.get("rope_scaling")
    if not rs:
        return 1.0
    kind = rs.get("rope_type", rs.get("type"))
    if kind in ("linear",):
        return float(rs["factor"])
    if kind == "default":
        return 1.0
    raise RefError(f"rope_scaling {rs} not supported by the reference")


def model_from_hf(cfg: dict, t: dict, where: str = "<memory>") -> Model:
    arch = (cfg.get("architectures") or [""])[0]
    mt = cfg.get("model_type", "")
    if arch in ("LlamaForCausalLM", "MistralForCausalLM") or mt in ("llama", "mistral"):
        return _llama_from_hf(cfg, t, where)
    if arch in ("FalconForCausalLM", "RWForCausalLM") or mt in ("falcon", "RefinedWeb",
                                                               "RefinedWebModel"):
        return _falcon_from_hf(cfg, t, where)
    raise RefError(f"{where}: unsupported architecture {arch or mt}")


def _llama_from_hf(cfg, t, where):
    mistral = cfg.get("model_type") == "mistral" or \
        (cfg.get("architectures") or [""])[0] == "MistralForCausalLM"
    if cfg.get("hidden_act", "silu") != "silu":
        raise RefError(f"{where}: hidden_act {cfg.get('hidden_act')} not supported")
    E = int(cfg["hidden_size"])
    H = int(cfg["num_attention_heads"])
    KV = int(cfg.get("num_key_value_heads") or H)
    hd = int(cfg.get("head_dim") or E // H)
    rope_dims = int(hd * float(cfg.get("partial_rotary_factor", 1.0)))
    hp = Hparams(
        arch="llama", n_embd=E, n_layer=int(cfg["num_hidden_layers"]), n_head=H, n_kv=KV,
        head_dim=hd, n_ff=int(cfg["intermediate_size"]), vocab=int(cfg["vocab_size"]),
        norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope_theta=_rope_theta(cfg), rope_dims=rope_dims,
        rope_style="neox", rope_linear_factor=_rope_scaling(cfg),
        sliding_window=_mistral_window(cfg) if mistral else None,
        source=where)
    layers = []
    for i in range(hp.n_layer):
        p = f"model.layers.{i}."
        g = lambda n: _f64(_need(t, p + n, where))   # noqa: E731
        o = lambda n: _f64(t.get(p + n))             # noqa: E731
        layers.append(Layer(
            wq=g("self_attn.q_proj.weight"), wk=g("self_attn.k_proj.weight"),
            wv=g("self_attn.v_proj.weight"), wo=g("self_attn.o_proj.weight"),
            bq=o("self_attn.q_proj.bias"), bk=o("self_attn.k_proj.bias"),
            bv=o("self_attn.v_proj.bias"), bo=o("self_attn.o_proj.bias"),
            attn_norm=g("input_layernorm.weight"), ffn_norm=g("post_attention_layernorm.weight"),
            w_gate=g("mlp.gate_proj.weight"), w_up=g("mlp.up_proj.weight"),
            w_down=g("mlp.down_proj.weight"), b_gate=o("mlp.gate_proj.bias"),
            b_up=o("mlp.up_proj.bias"), b_down=o("mlp.down_proj.bias")))
    emb = _f64(_need(t, "model.embed_tokens.weight", where))
    tied = bool(cfg.get("tie_word_embeddings", False))
    out = emb if tied else _f64(_need(t, "lm_head.weight", where))
    w = Weights(emb, layers, _f64(_need(t, "model.norm.weight", where)), None, out)
    _check_shapes(hp, w, where)
    return Model(hp, w)


def _falcon_hparams_from_cfg(cfg, where):
    c = {k: v for k, v in cfg.items() if v is not None}  # null reads as absent (as in C++)
    # legacy RW config keys (RWForCausalLM / RefinedWeb*)
    for old, new in (("n_embed", "hidden_size"), ("n_head", "num_attention_heads"),
                     ("n_layer", "num_hidden_layers"), ("n_head_kv", "num_kv_heads")):
        if old in c and new not in c:
            c[new] = c[old]
    if c.get("model_type") == "RefinedWeb" and "new_decoder_architecture" not in c:
        c["new_decoder_architecture"] = True
    if c.get("alibi", False):
        raise RefError(f"{where}: alibi Falcon is not supported by the reference")
    if c.get("activation", "gelu") != "gelu":
        raise RefError(f"{where}: activation {c.get('activation')} not supported")
    E = int(c.get("hidden_size", 4544))
    H = int(c.get("num_attention_heads", 71))
    new_arch = bool(c.get("new_decoder_architecture", False))
    multi_query = bool(c.get("multi_query", True))
    parallel = bool(c.get("parallel_attn", True))
    if new_arch:
        KV = int(c.get("num_kv_heads") or H)
        layout = "grouped"
        n_ln = c.get("num_ln_in_parallel_attn") or 2
        if not parallel:
            raise RefError(f"{where}: new_decoder_architecture without parallel_attn")
    elif multi_query:
        KV, layout, n_ln = 1, "mqa", 1
    else:
        KV, layout, n_ln = H, "per_head", 1
    hd = E // H
    hp = Hparams(
        arch="falcon", n_embd=E, n_layer=int(c.get("num_hidden_layers", 32)), n_head=H,
        n_kv=KV, head_dim=hd, n_ff=int(c.get("ffn_hidden_size") or 4 * E),
        vocab=int(c.get("vocab_size", 65024)), norm_eps=float(c.get("layer_norm_epsilon", 1e-5)),
        rope_theta=_rope_theta(c), rope_style="neox",
        rope_linear_factor=_rope_scaling(c), falcon_parallel_attn=parallel,
        falcon_two_ln=(parallel and n_ln == 2), source=where)
    return hp, layout, bool(c.get("tie_word_embeddings", True))


def _falcon_from_hf(cfg, t, where):
    hp, layout, tied = _falcon_hparams_from_cfg(cfg, where)
    layers = []
    for i in range(hp.n_layer):
        p = f"transformer.h.{i}."
        g = lambda n: _f64(_need(t, p + n, where))   # noqa: E731
        o = lambda n: _f64(t.get(p + n))             # noqa: E731
        wq, wk, wv = split_falcon_qkv(g("self_attention.query_key_value.weight"),
                                      hp.n_head, hp.n_kv, hp.head_dim, layout)
        bqkv = o("self_attention.query_key_value.bias")
        bq = bk = bv = None
        if bqkv is not None:
            bq, bk, bv = split_falcon_qkv(bqkv, hp.n_head, hp.n_kv, hp.head_dim, layout)
        if hp.falcon_two_ln:
            an, anb, fn, fnb = g("ln_attn.weight"), g("ln_attn.bias"), g("ln_mlp.weight"), \
                g("ln_mlp.bias")
        elif hp.falcon_parallel_attn:
            an, anb, fn, fnb = g("input_layernorm.weight"), g("input_layernorm.bias"), None, None
        else:
            an, anb = g("input_layernorm.weight"), g("input_layernorm.bias")
            fn, fnb = g("post_attention_layernorm.weight"), g("post_attention_layernorm.bias")
        layers.append(Layer(
            wq=wq, wk=wk, wv=wv, wo=g("self_attention.dense.weight"), bq=bq, bk=bk, bv=bv,
            bo=o("self_attention.dense.bias"), attn_norm=an, attn_norm_b=anb, ffn_norm=fn,
            ffn_norm_b=fnb, w_up=g("mlp.dense_h_to_4h.weight"), b_up=o("mlp.dense_h_to_4h.bias"),
            w_down=g("mlp.dense_4h_to_h.weight"), b_down=o("mlp.dense_4h_to_h.bias")))
    emb = _f64(_need(t, "transformer.word_embeddings.weight", where))
    out = emb if tied else _f64(_need(t, "lm_head.weight", where))
    w = Weights(emb, layers, _f64(_need(t, "transformer.ln_f.weight", where)),
                _f64(_need(t, "transformer.ln_f.bias", where)), out)
    _check_shapes(hp, w, where)
    return Model(hp, w)


def load_hf_dir(path: str) -> Model:
    cfg_path = os.path.join(path, "config.json")
    if not os.path.exists(cfg_path):
        raise RefError(f"{path}: no config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    return model_from_hf(cfg, safetensors_io.load_dir(path), where=path)


# --------------------------------------------------------------------------------------
# Loading: GGUF
def model_from_gguf(g: gguf_read.GGUFFile) -> Model:
    where = g.path
    arch = g.get("general.architecture")
    if arch not in ("llama", "falcon"):
        raise RefError(f"{where}: GGUF architecture {arch!r} not supported")
    k = lambda name, default=None: g.get(f"{arch}.{name}", default)   # noqa: E731
    t = lambda name: _f64(g.tensor(name)) if name in g.tensors else None   # noqa: E731

    def need(name):
        if name not in g.tensors:
            raise RefError(f"{where}: missing tensor {name}")
        return _f64(g.tensor(name))

    E = int(k("embedding_length"))
    H = int(k("attention.head_count"))
    KV = int(k("attention.head_count_kv", H))
    hd = int(k("attention.key_length", E // H))
    emb = need("token_embd.weight")
    lin = 1.0
    if k("rope.scaling.type") == "linear":
        lin = float(k("rope.scaling.factor", 1.0))
    common = dict(n_embd=E, n_layer=int(k("block_count")), n_head=H, n_kv=KV, head_dim=hd,
                  n_ff=int(k("feed_forward_length", 4 * E)), vocab=emb.shape[0],
                  rope_theta=float(k("rope.freq_base", 10000.0)),
                  rope_dims=int(k("rope.dimension_count", hd)), rope_linear_factor=lin,
                  source=where)
    layers = []
    if arch == "llama":
        sw = k("attention.sliding_window")
        hp = Hparams(arch="llama", norm_eps=float(k("attention.layer_norm_rms_epsilon", 1e-5)),
                     rope_style="interleaved", sliding_window=int(sw) if sw else None, **common)
        for i in range(hp.n_layer):
            p = f"blk.{i}."
            layers.append(Layer(
                wq=need(p + "attn_q.weight"), wk=need(p + "attn_k.weight"),
                wv=need(p + "attn_v.weight"), wo=need(p + "attn_output.weight"),
                bq=t(p + "attn_q.bias"), bk=t(p + "attn_k.bias"), bv=t(p + "attn_v.bias"),
                bo=t(p + "attn_output.bias"), attn_norm=need(p + "attn_norm.weight"),
                ffn_norm=need(p + "ffn_norm.weight"), w_gate=need(p + "ffn_gate.weight"),
                w_up=need(p + "ffn_up.weight"), w_down=need(p + "ffn_down.weight")))
        out_norm_b = None
    else:  # falcon: llama.cpp stores QKV as [all Q, all K, all V]; NEOX (rotate-half) RoPE
        two_ln = "blk.0.attn_norm_2.weight" in g.tensors
        hp = Hparams(arch="falcon", norm_eps=float(k("attention.layer_norm_epsilon", 1e-5)),
                     rope_style="neox", falcon_parallel_attn=True, falcon_two_ln=two_ln,
                     **common)
        for i in range(hp.n_layer):
            p = f"blk.{i}."
            wq, wk, wv = split_falcon_qkv(need(p + "attn_qkv.weight"), H, KV, hd, "gguf")
            b = t(p + "attn_qkv.bias")
            bq, bk, bv = split_falcon_qkv(b, H, KV, hd, "gguf") if b is not None else (None,) * 3
            layers.append(Layer(
                wq=wq, wk=wk, wv=wv, wo=need(p + "attn_output.weight"), bq=bq, bk=bk, bv=bv,
                bo=t(p + "attn_output.bias"), attn_norm=need(p + "attn_norm.weight"),
                attn_norm_b=need(p + "attn_norm.bias"),
                ffn_norm=need(p + "attn_norm_2.weight") if two_ln else None,
                ffn_norm_b=need(p + "attn_norm_2.bias") if two_ln else None,
                w_up=need(p + "ffn_up.weight"), b_up=t(p + "ffn_up.bias"),
                w_down=need(p + "ffn_down.weight"), b_down=t(p + "ffn_down.bias")))
        out_norm_b = need("output_norm.bias")
    out = t("output.weight")
    w = Weights(emb, layers, need("output_norm.weight"), out_norm_b,
                out if out is not None else emb)
    _check_shapes(hp, w, where)
    pieces = g.get("tokenizer.ggml.tokens")
    return Model(hp, w, vocab_pieces=pieces)


def _check_shapes(hp: Hparams, w: Weights, where):
    E, hd = hp.n_embd, hp.head_dim
    exp = {"wq": (hp.n_head * hd, E), "wk": (hp.n_kv * hd, E), "wv": (hp.n_kv * hd, E),
           "wo": (E, hp.n_head * hd), "w_up": (hp.n_ff, E), "w_down": (E, hp.n_ff)}
    if hp.arch == "llama":
        exp["w_gate"] = (hp.n_ff, E)
    for i, L in enumerate(w.layers):
        for name, shape in exp.items():
            got = getattr(L, name).shape
            if got != shape:
                raise RefError(f"{where}: layer {i} {name}: shape {got}, expected {shape}")
    if w.tok_embd.shape != (hp.vocab, E) or w.output.shape != (hp.vocab, E):
        raise RefError(f"{where}: embedding/output shape mismatch "
                              f"{w.tok_embd.shape} {w.output.shape} vs ({hp.vocab}, {E})")


def load_model(path: str) -> Model:
    """A GGUF file or a Hugging Face checkpoint directory."""
    if os.path.isdir(path):
        return load_hf_dir(path)
    if os.path.isfile(path):
        return model_from_gguf(gguf_read.GGUFFile(path))
    if path.startswith("preset:"):
        raise RefError(f"{path}: presets use cachebench's own random weights; the "
                              "reference needs a GGUF file or a HF directory")
    raise RefError(f"{path}: no such file or directory")


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="numpy reference forward pass")
    ap.add_argument("model", help="GGUF file or Hugging Face directory")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--generate", type=int, default=0, help="greedy-generate N more tokens")
    ap.add_argument("--dump-logits", help="write {tokens, logits} JSON (cachebench's format)")
    a = ap.parse_args(argv)
    m = load_model(a.model)
    toks = [int(x) for x in a.tokens.split(",") if x.strip()]
    lg = m.forward(toks)
    print(f"{m.hp}")
    for t, row in enumerate(lg):
        top = np.argsort(-row)[:5]
        print(f"pos {t:4d} token {toks[t]:6d} -> top5 " +
              " ".join(f"{i}:{row[i]:.4f}" for i in top))
    if a.dump_logits:
        with open(a.dump_logits, "w") as f:
            json.dump({"tokens": toks, "logits": lg.tolist()}, f)
    if a.generate:
        out = m.greedy(toks, a.generate)
        print("generated:", ",".join(map(str, out[len(toks):])))
        if m.vocab_pieces is not None:
            print("text:", repr(m.decode(out)))
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
