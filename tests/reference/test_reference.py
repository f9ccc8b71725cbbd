#!/usr/bin/env python3
"""Sanity tests of the numpy reference itself (no C++ involved).

Run: python3 tests/reference/test_reference.py        (or)
     python3 -m unittest discover -s tests/reference -v
stories260K is looked up in $CACHEBENCH_DATA or <repo>/../shared (skipped if absent).
gguf-py (pip `gguf`) is used only to cross-check the GGUF reader; those checks skip
without it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_logits  # noqa: E402
import gguf_read  # noqa: E402
import make_tiny_checkpoints as mk  # noqa: E402
import reference as R  # noqa: E402
import safetensors_io  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
DATA = os.environ.get("CACHEBENCH_DATA") or os.path.join(REPO, "..", "shared")
STORIES = os.path.join(DATA, "models", "stories260K", "stories260K.gguf")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "gguf")
TOKS = [1, 5, 17, 33, 2, 90, 44, 61, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 3, 20, 21, 22]

try:
    import gguf as gguf_py
except ImportError:  # pragma: no cover
    gguf_py = None

_TMP = None


def read_json(path):
    with open(path) as f:
        return json.load(f)


def tiny_dir():
    """Writes all tiny checkpoints once per process."""
    global _TMP
    if _TMP is None:
        _TMP = tempfile.TemporaryDirectory(prefix="cb_ref_test_")
        mk.write_all(_TMP.name)
    return _TMP.name


def tiny(name):
    return R.load_model(os.path.join(tiny_dir(), name))


# --------------------------------------------------------------------------------------
class TestGGUFReader(unittest.TestCase):
    def test_fixture_tensors_match_expected(self):
        """Fixtures whose expected values were dequantized by gguf-py (make_gguf_fixtures)."""
        for name in ("all_types", "align64", "kquants"):
            path = os.path.join(FIXTURES, name + ".gguf")
            if not os.path.exists(path):
                self.skipTest(f"{path} missing")
            g = gguf_read.GGUFFile(path)
            got = np.concatenate([g.tensor(n).reshape(-1) for n in g.tensors])
            exp = np.fromfile(os.path.join(FIXTURES, name + ".expected.f32"), dtype="<f4")
            np.testing.assert_array_equal(got.view(np.uint32), exp.view(np.uint32))
        g = gguf_read.GGUFFile(os.path.join(FIXTURES, "all_types.gguf"))
        self.assertEqual(g.get("t.str"), "héllo, wörld ✓ 🦙")
        self.assertEqual(g.get("t.nested3"), [[[7]], [[8, 9], [10]]])
        self.assertEqual(g.get("t.u64"), 18446744073709551615)
        self.assertEqual(g.get("t.arr_str"), ["a", "", "ünïcode", "▁the"])
        self.assertEqual(g.tensors["q8_0.4d"].shape, (2, 1, 3, 32))

    @unittest.skipIf(gguf_py is None, "gguf-py not installed")
    def test_matches_gguf_py(self):
        paths = [os.path.join(FIXTURES, "all_types.gguf"), os.path.join(FIXTURES, "kquants.gguf"),
                 os.path.join(tiny_dir(), "tiny-llama-q4_1.gguf"),
                 os.path.join(tiny_dir(), "tiny-llama-q8_0.gguf"),
                 os.path.join(tiny_dir(), "tiny-llama-q4_0.gguf"),
                 os.path.join(tiny_dir(), "tiny-llama-bf16.gguf")]
        if os.path.exists(STORIES):
            paths.append(STORIES)
        for path in paths:
            if not os.path.exists(path):
                continue
            mine = gguf_read.GGUFFile(path)
            theirs = gguf_py.GGUFReader(path)
            names = [t.name for t in theirs.tensors]
            self.assertEqual(names, list(mine.tensors), path)
            for t in theirs.tensors:
                raw = np.asarray(t.data)
                if t.tensor_type in (gguf_py.GGMLQuantizationType.F32,
                                     gguf_py.GGMLQuantizationType.F16):
                    exp = raw.astype(np.float32)
                else:
                    exp = gguf_py.quants.dequantize(raw.view(np.uint8), t.tensor_type)
                got = mine.tensor(t.name)
                self.assertEqual(tuple(int(d) for d in t.shape[::-1]), got.shape, t.name)
                np.testing.assert_array_equal(got.reshape(-1), np.asarray(exp).reshape(-1),
                                              err_msg=f"{path}:{t.name}")
            for key, field in theirs.fields.items():
                if key.startswith("GGUF."):
                    continue
                val = field.contents() if hasattr(field, "contents") else None
                if val is None:
                    continue
                mv = mine.get(key)
                if isinstance(mv, list) and any(isinstance(e, list) for e in mv):
                    continue  # gguf-py's contents() flattens nested arrays
                if isinstance(val, float):
                    self.assertAlmostEqual(mv, val, places=6, msg=key)
                elif isinstance(val, list) and val and isinstance(val[0], float):
                    np.testing.assert_allclose(mv, val, rtol=1e-6, err_msg=key)
                else:
                    self.assertEqual(mv, val, key)

    def test_quantize_roundtrip_error(self):
        rng = np.random.default_rng(0)
        x = rng.standard_normal((4, 64)).astype(np.float32)
        for t, tol in ((gguf_read.GGML_Q8_0, 0.01), (gguf_read.GGML_Q4_0, 0.25),
                       (gguf_read.GGML_Q4_1, 0.2), (gguf_read.GGML_F16, 1e-3),
                       (gguf_read.GGML_BF16, 1e-2)):
            raw = np.frombuffer(gguf_read.quantize(x, t), np.uint8)
            y = gguf_read.dequantize(raw, t, x.size).reshape(x.shape)
            self.assertLess(np.abs(x - y).max(), tol * np.abs(x).max(), t)

    def test_truncated_and_bad_magic(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(FIXTURES, "all_types.gguf")  # no trailing padding
            if not os.path.exists(src):
                self.skipTest("fixture missing")
            data = open(src, "rb").read()
            p = os.path.join(d, "x.gguf")
            for bad in (data[:-1], data[:40], b"GGUX" + data[4:]):
                open(p, "wb").write(bad)
                with self.assertRaises(gguf_read.GGUFError):
                    gguf_read.GGUFFile(p)


class TestSafetensors(unittest.TestCase):
    def test_roundtrip(self):
        rng = np.random.default_rng(1)
        t = {"a": rng.standard_normal((3, 5)).astype(np.float32),
             "b.c": rng.standard_normal(7).astype(np.float32),
             "z": np.array([[1.0, -0.0, 65504.0, 1e-8]], np.float32)}
        with tempfile.TemporaryDirectory() as d:
            for dt, tol in (("F32", 0), ("F16", 1e-3), ("BF16", 8e-3)):
                p = os.path.join(d, dt + ".safetensors")
                safetensors_io.save(p, t, dt, metadata={"format": "pt"})
                hdr, base = safetensors_io.read_header(p)
                self.assertEqual(base % 8, 0)
                self.assertEqual(hdr["__metadata__"], {"format": "pt"})
                back = safetensors_io.load(p)
                for k in t:
                    self.assertEqual(back[k].shape, t[k].shape)
                    np.testing.assert_allclose(back[k], t[k], rtol=tol, atol=1e-7 if tol else 0)
        # BF16 values exactly representable survive bit-exactly
        x = np.array([1.0, -2.5, 2.0 ** 127, 0.0078125, -0.0], np.float32)
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "x.safetensors")
            safetensors_io.save(p, {"x": x}, "BF16")
            np.testing.assert_array_equal(safetensors_io.load(p)["x"], x)

    def test_sharded_equals_single(self):
        a = tiny("tiny-llama").forward(TOKS)
        b = tiny("tiny-llama-sharded").forward(TOKS)
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------------------
class TestOps(unittest.TestCase):
    def test_primitives(self):
        x = np.array([[1.0, -2.0, 3.0, 0.5]])
        w = np.array([1.0, 2.0, 0.5, -1.0])
        ms = (1 + 4 + 9 + 0.25) / 4
        np.testing.assert_allclose(R.rms_norm(x, w, 1e-6), x / math.sqrt(ms + 1e-6) * w)
        mu, var = x.mean(), ((x - x.mean()) ** 2).mean()
        np.testing.assert_allclose(R.layer_norm(x, w, w, 1e-5),
                                   (x - mu) / math.sqrt(var + 1e-5) * w + w)
        self.assertAlmostEqual(float(R.gelu_exact(np.array([1.0]))[0]), 0.8413447460685429, 15)
        self.assertAlmostEqual(float(R.gelu_exact(np.array([-3.0]))[0]), -0.0040496940948903, 15)
        self.assertAlmostEqual(float(R.silu(np.array([2.0]))[0]), 2 / (1 + math.exp(-2)), 15)
        self.assertEqual(float(R.silu(np.array([-1000.0]))[0]), 0.0)

    def test_rope_relative_position(self):
        """Rotation preserves norms and q(m).k(n) depends only on m - n, for both styles
        and for partial rotary."""
        rng = np.random.default_rng(2)
        for style in ("neox", "interleaved"):
            for rd in (16, 8):
                hp = R.Hparams(arch="llama", n_embd=16, n_layer=1, n_head=1, n_kv=1,
                               head_dim=16, n_ff=1, vocab=1, norm_eps=1e-5, rope_dims=rd,
                               rope_style=style, rope_theta=100.0)
                q, k = rng.standard_normal((2, 16))
                cos, sin = R.rope_angles(np.arange(12), hp)
                Q = R.apply_rope(np.tile(q, (12, 1, 1)), cos, sin, hp)[:, 0]
                K = R.apply_rope(np.tile(k, (12, 1, 1)), cos, sin, hp)[:, 0]
                np.testing.assert_allclose(np.linalg.norm(Q, axis=1), np.linalg.norm(q))
                np.testing.assert_allclose(Q[0], q)       # position 0: identity
                np.testing.assert_allclose(Q[:, rd:], np.tile(q[rd:], (12, 1)))  # pass-through
                d = Q @ K.T
                for off in (0, 1, 3):
                    diag = np.diagonal(d, offset=off)
                    np.testing.assert_allclose(diag, diag[0], atol=1e-12)

    def test_rope_hand_computed(self):
        """HF rotate-half vs a literal transcription: x*cos(cat(f,f)) + rotate_half(x)*sin."""
        hp = R.Hparams(arch="llama", n_embd=8, n_layer=1, n_head=1, n_kv=1, head_dim=8,
                       n_ff=1, vocab=1, norm_eps=1e-5, rope_theta=10000.0)
        x = np.arange(1.0, 9.0)
        pos = 5
        inv = 1.0 / (10000.0 ** (np.arange(0, 8, 2) / 8))
        emb = np.concatenate([pos * inv, pos * inv])
        rot_half = np.concatenate([-x[4:], x[:4]])
        exp = x * np.cos(emb) + rot_half * np.sin(emb)
        cos, sin = R.rope_angles([pos], hp)
        np.testing.assert_allclose(R.apply_rope(x[None, None], cos, sin, hp)[0, 0], exp)
        # ggml interleaved: pair (2i, 2i+1) rotated by pos * theta^(-2i/d)
        hp.rope_style = "interleaved"
        exp2 = x.copy()
        for i in range(4):
            a, b, th = x[2 * i], x[2 * i + 1], pos * 10000.0 ** (-2 * i / 8)
            exp2[2 * i], exp2[2 * i + 1] = a * math.cos(th) - b * math.sin(th), \
                a * math.sin(th) + b * math.cos(th)
        np.testing.assert_allclose(R.apply_rope(x[None, None], cos, sin, hp)[0, 0], exp2)

    def test_llama_layer_against_loops(self):
        """First decoder layer of tiny-llama (GQA 4/2) vs explicit per-head, per-query loops."""
        m = tiny("tiny-llama")
        hp, L = m.hp, m.w.layers[0]
        toks = TOKS[:9]
        _, hidden = m.forward(toks, return_hidden=True)
        x = m.w.tok_embd[toks]
        T, hd = len(toks), hp.head_dim
        h = np.array([r / math.sqrt(np.mean(r * r) + hp.norm_eps) * L.attn_norm for r in x])
        inv = [hp.rope_theta ** (-2 * i / hd) for i in range(hd // 2)]

        def rope(v, p):  # rotate-half, element by element
            out = np.empty(hd)
            for i in range(hd // 2):
                c, s = math.cos(p * inv[i]), math.sin(p * inv[i])
                out[i] = v[i] * c - v[i + hd // 2] * s
                out[i + hd // 2] = v[i + hd // 2] * c + v[i] * s
            return out

        attn = np.zeros((T, hp.n_head * hd))
        for head in range(hp.n_head):
            kvh = head // (hp.n_head // hp.n_kv)
            Wq = L.wq[head * hd:(head + 1) * hd]
            Wk, Wv = L.wk[kvh * hd:(kvh + 1) * hd], L.wv[kvh * hd:(kvh + 1) * hd]
            for i in range(T):
                q = rope(Wq @ h[i], i)
                sc = [q @ rope(Wk @ h[j], j) / math.sqrt(hd) for j in range(i + 1)]
                p = np.exp(np.array(sc) - max(sc))
                p /= p.sum()
                attn[i, head * hd:(head + 1) * hd] = sum(p[j] * (Wv @ h[j]) for j in range(i + 1))
        x1 = x + attn @ L.wo.T
        n = np.array([r / math.sqrt(np.mean(r * r) + hp.norm_eps) * L.ffn_norm for r in x1])
        g = n @ L.w_gate.T
        x2 = x1 + ((g / (1 + np.exp(-g))) * (n @ L.w_up.T)) @ L.w_down.T
        np.testing.assert_allclose(hidden[1], x2, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------
class TestStories260K(unittest.TestCase):
    def test_greedy_generation(self):
        if not os.path.exists(STORIES):
            self.skipTest(f"{STORIES} not found (set CACHEBENCH_DATA)")
        m = R.load_model(STORIES)
        self.assertEqual((m.hp.n_layer, m.hp.n_head, m.hp.n_kv, m.hp.vocab), (5, 8, 4, 512))
        toks = m.greedy([1], 40)
        text = m.decode(toks)
        print(f"\n  stories260K greedy from BOS: {text!r}", file=sys.stderr)
        self.assertTrue(text.startswith("Once upon a time, there was a little girl named Lily."),
                        text)
        # the wrong RoPE convention for a GGUF file must not give the same story
        m.hp.rope_style = "neox"
        self.assertNotEqual(m.decode(m.greedy([1], 40)), text)


class TestBf16Rounding(unittest.TestCase):
    """round_to_bf16 by the definition of round-to-nearest-even on the top 16 bits."""

    def test_known_values(self):
        e = 2.0 ** -8  # half a bf16 ulp at 1.0
        cases = [
            (1.0, 1.0), (-2.0, -2.0),
            (1 + e, 1.0),                   # tie: to the even mantissa (1.0)
            (1 + 3 * e, 1 + 4 * e),         # tie: to the even mantissa (1 + 2^-6)
            (1 + e + 2.0 ** -20, 1 + 2 * e),  # just above the tie: up
            (1 + e - 2.0 ** -20, 1.0),      # just below: down
            (3.4e38, math.inf),             # past the largest finite bf16: overflows
            (float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).tiny)),
            (math.inf, math.inf), (-math.inf, -math.inf),
        ]
        for x, want in cases:
            self.assertEqual(R.round_to_bf16(np.array([x]))[0], want, msg=repr(x))
        self.assertTrue(np.isnan(R.round_to_bf16(np.array([math.nan]))[0]))

    def test_matrices_rounded_norms_kept(self):
        m = tiny("tiny-llama")
        b = m.with_bf16_matrices()
        L, Lb = m.w.layers[0], b.w.layers[0]
        for name in ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"):
            got = getattr(Lb, name)
            np.testing.assert_array_equal(got, R.round_to_bf16(getattr(L, name)))
            # every value is a bf16: its fp32 bits end in 16 zeros
            self.assertTrue(np.all(got.astype(np.float32).view(np.uint32) & 0xFFFF == 0))
        np.testing.assert_array_equal(Lb.attn_norm, L.attn_norm)
        np.testing.assert_array_equal(b.w.out_norm, m.w.out_norm)
        ref, got = m.forward(TOKS[:8]), b.forward(TOKS[:8])
        self.assertGreater(np.abs(ref - got).max(), 0)  # rounding changed the logits...
        self.assertLess(np.abs(ref - got).max(), 0.05 * np.abs(ref).max())  # ...a little


class TestRopeConventions(unittest.TestCase):
    def _hf(self, name):
        d = os.path.join(tiny_dir(), name)
        cfg = read_json(os.path.join(d, "config.json"))
        return cfg, safetensors_io.load_dir(d)

    def test_gguf_interleaved_equals_hf_rotate_half(self):
        for name in ("tiny-llama", "tiny-llama-tied", "tiny-mistral"):
            cfg, t = self._hf(name)
            hf = R.model_from_hf(cfg, t)
            H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
            perm = dict(t)
            for i in range(cfg["num_hidden_layers"]):
                p = f"model.layers.{i}.self_attn."
                perm[p + "q_proj.weight"] = R.llama_permute_qk(t[p + "q_proj.weight"], H)
                perm[p + "k_proj.weight"] = R.llama_permute_qk(t[p + "k_proj.weight"], KV)
            inter = R.model_from_hf(cfg, perm)
            inter.hp.rope_style = "interleaved"
            a, b = hf.forward(TOKS), inter.forward(TOKS)
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-12, err_msg=name)
            # and the convention matters: interleaved RoPE on unpermuted weights differs
            raw = R.model_from_hf(cfg, t)
            raw.hp.rope_style = "interleaved"
            self.assertGreater(np.abs(raw.forward(TOKS) - a).max(), 1e-2, name)

    def test_gguf_files_equal_hf_dirs(self):
        # eps is stored as float32 in GGUF, hence ~1e-11 instead of exact equality
        for hf, gg in (("tiny-llama", "tiny-llama.gguf"), ("tiny-llama-tied", "tiny-llama-tied.gguf"),
                       ("tiny-falcon-7b", "tiny-falcon-7b.gguf"),
                       ("tiny-falcon-40b", "tiny-falcon-40b.gguf")):
            a, b = tiny(hf).forward(TOKS), tiny(gg).forward(TOKS)
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-8, err_msg=gg)
        self.assertEqual(tiny("tiny-llama.gguf").hp.rope_style, "interleaved")
        self.assertEqual(tiny("tiny-falcon-7b.gguf").hp.rope_style, "neox")

    def test_partial_rotary_styles_agree(self):
        """rope_dims = head_dim/2: interleaved on weights permuted within the rotated dims ==
        rotate-half on the original weights."""
        cfg, t = self._hf("tiny-llama")
        cfg = dict(cfg, partial_rotary_factor=0.5)
        H, KV, hd = 4, 2, 16
        rd = hd // 2

        def permute_partial(w, n):
            w = w.reshape(n, hd, -1).copy()
            w[:, :rd] = R.llama_permute_qk(w[:, :rd].reshape(n * rd, -1), n).reshape(n, rd, -1)
            return w.reshape(n * hd, -1)

        perm = dict(t)
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}.self_attn."
            perm[p + "q_proj.weight"] = permute_partial(t[p + "q_proj.weight"], H)
            perm[p + "k_proj.weight"] = permute_partial(t[p + "k_proj.weight"], KV)
        a = R.model_from_hf(cfg, t)
        self.assertEqual(a.hp.rope_dims, rd)
        b = R.model_from_hf(cfg, perm)
        b.hp.rope_style = "interleaved"
        np.testing.assert_allclose(b.forward(TOKS), a.forward(TOKS), rtol=0, atol=1e-12)
        full = R.model_from_hf(dict(cfg, partial_rotary_factor=1.0), t).forward(TOKS)
        self.assertGreater(np.abs(full - a.forward(TOKS)).max(), 1e-2)
        # the GGUF file with llama.rope.dimension_count = head_dim/2 is read as partial
        self.assertEqual(tiny("tiny-llama-rope-half.gguf").hp.rope_dims, rd)

    def test_rope_theta_is_used(self):
        m = tiny("tiny-mistral")
        self.assertEqual(m.hp.rope_theta, 1e6)
        a = m.forward(TOKS)
        m.hp.rope_theta = 1e4
        self.assertGreater(np.abs(m.forward(TOKS) - a).max(), 1e-3)


class TestSlidingWindow(unittest.TestCase):
    def test_window_changes_only_late_positions(self):
        m = tiny("tiny-mistral")
        W = m.hp.sliding_window
        self.assertEqual(W, 8)
        self.assertGreater(len(TOKS), 2 * W)
        a = m.forward(TOKS)
        m.hp.sliding_window = None
        b = m.forward(TOKS)
        m.hp.sliding_window = W
        # query i sees keys j with i - W < j <= i: identical to full causal for i < W
        np.testing.assert_array_equal(a[:W], b[:W])
        for i in range(W, len(TOKS)):
            self.assertGreater(np.abs(a[i] - b[i]).max(), 1e-4, f"position {i}")

    def test_receptive_field(self):
        """With window W and L layers, token 0 reaches exactly positions i <= L*(W-1)."""
        m = tiny("tiny-mistral")
        W, L = m.hp.sliding_window, m.hp.n_layer
        t2 = list(TOKS)
        t2[0] = 77
        d = np.abs(m.forward(TOKS) - m.forward(t2)).max(axis=1)
        edge = L * (W - 1)
        self.assertTrue(np.all(d[:edge + 1] > 1e-9), d)
        np.testing.assert_array_equal(d[edge + 1:], 0.0)

    def test_mask_definition(self):
        ok = R.attention_mask(12, 4)
        for i in range(12):
            self.assertEqual([j for j in range(12) if ok[i, j]], list(range(max(0, i - 3), i + 1)))

    def test_llama_ignores_window(self):
        cfg = dict(read_json(os.path.join(tiny_dir(), "tiny-llama", "config.json")),
                   sliding_window=4)
        m = R.model_from_hf(cfg, safetensors_io.load_dir(os.path.join(tiny_dir(), "tiny-llama")))
        self.assertIsNone(m.hp.sliding_window)


class TestFalcon(unittest.TestCase):
    def _hf(self, name):
        d = os.path.join(tiny_dir(), name)
        return read_json(os.path.join(d, "config.json")), safetensors_io.load_dir(d)

    def test_qkv_layouts(self):
        H, KV, hd, E = 4, 2, 3, 5
        rows = np.arange((H + 2 * KV) * hd)
        w = np.repeat(rows[:, None], E, axis=1).astype(float)
        q, k, v = R.split_falcon_qkv(w, H, KV, hd, "grouped")
        # HF: view [KV, H/KV + 2, hd]: group g = [q_{2g}, q_{2g+1}, k_g, v_g]
        self.assertEqual(list(q[:, 0]), [0, 1, 2, 3, 4, 5, 12, 13, 14, 15, 16, 17])
        self.assertEqual(list(k[:, 0]), [6, 7, 8, 18, 19, 20])
        self.assertEqual(list(v[:, 0]), [9, 10, 11, 21, 22, 23])
        g = R.falcon_qkv_hf_to_gguf(w, H, KV, hd)
        q2, k2, v2 = R.split_falcon_qkv(g, H, KV, hd, "gguf")
        np.testing.assert_array_equal(q, q2)
        np.testing.assert_array_equal(k, k2)
        np.testing.assert_array_equal(v, v2)
        q, k, v = R.split_falcon_qkv(w[:(H + 2) * hd], H, 1, hd, "mqa")
        self.assertEqual(list(k[:, 0]), [12, 13, 14])
        self.assertEqual(list(v[:, 0]), [15, 16, 17])

    def test_40b_with_one_group_and_shared_ln_equals_7b(self):
        """new_decoder_architecture with num_kv_heads 1 and ln_attn == ln_mlp ==
        input_layernorm is exactly the 7B computation; a different ln_mlp is not."""
        c7, t7 = self._hf("tiny-falcon-7b")
        c40 = dict(c7, new_decoder_architecture=True, num_kv_heads=1)
        t40 = {}
        for k, v in t7.items():
            if ".input_layernorm." in k:
                t40[k.replace("input_layernorm", "ln_attn")] = v
                t40[k.replace("input_layernorm", "ln_mlp")] = v
            else:
                t40[k] = v
        a = R.model_from_hf(c7, t7).forward(TOKS)
        m40 = R.model_from_hf(c40, t40)
        self.assertTrue(m40.hp.falcon_two_ln)
        np.testing.assert_array_equal(m40.forward(TOKS), a)
        t40b = dict(t40)
        t40b["transformer.h.0.ln_mlp.bias"] = t40["transformer.h.0.ln_mlp.bias"] + 0.3
        self.assertGreater(np.abs(R.model_from_hf(c40, t40b).forward(TOKS) - a).max(), 1e-3)

    def test_7b_and_40b_configs(self):
        m7, m40 = tiny("tiny-falcon-7b"), tiny("tiny-falcon-40b")
        self.assertEqual((m7.hp.n_kv, m7.hp.falcon_two_ln), (1, False))
        self.assertEqual((m40.hp.n_kv, m40.hp.falcon_two_ln), (2, True))
        self.assertEqual(m7.hp.n_ff, 4 * m7.hp.n_embd)
        self.assertIs(m7.w.output, m7.w.tok_embd)  # tied
        self.assertGreater(np.abs(m7.forward(TOKS) - m40.forward(TOKS)).max(), 1e-2)

    def test_biases_matter(self):
        c, t = self._hf("tiny-falcon-40b")
        a = R.model_from_hf(c, t).forward(TOKS)
        t2 = dict(t)
        for k in t2:
            if k.endswith(".bias"):
                t2[k] = np.zeros_like(t2[k])
        self.assertGreater(np.abs(R.model_from_hf(c, t2).forward(TOKS) - a).max(), 1e-2)


class TestAllArchitectures(unittest.TestCase):
    NAMES = ["tiny-llama", "tiny-llama-tied", "tiny-mistral", "tiny-falcon-7b",
             "tiny-falcon-40b", "tiny-llama.gguf", "tiny-llama-q4_0.gguf",
             "tiny-llama-rope-half.gguf", "tiny-falcon-40b.gguf"]

    def test_causal(self):
        """Logits at position t depend only on tokens[0..t] (prefixes and suffix edits)."""
        rng = np.random.default_rng(3)
        for name in self.NAMES:
            m = tiny(name)
            full = m.forward(TOKS)
            for t in (0, 1, 7, 8, 9, 15):
                np.testing.assert_allclose(m.forward(TOKS[:t + 1]), full[:t + 1], rtol=0,
                                           atol=1e-12, err_msg=f"{name} prefix {t}")
                alt = TOKS[:t + 1] + list(rng.integers(0, 96, len(TOKS) - t - 1))
                got = m.forward(alt)
                np.testing.assert_array_equal(got[:t + 1], full[:t + 1], f"{name} suffix {t}")
                if t + 1 < len(TOKS) and alt[t + 1] != TOKS[t + 1]:
                    self.assertGreater(np.abs(got[t + 1] - full[t + 1]).max(), 1e-6, name)

    def test_not_degenerate(self):
        for name in self.NAMES:
            lg = tiny(name).forward(TOKS)
            self.assertTrue(0.3 < lg.std() < 5.0, (name, lg.std()))
            top = lg.argmax(axis=1)
            self.assertGreater(len(set(top.tolist())), 4, name)
            row_std = lg.std(axis=1)
            self.assertTrue(np.all(row_std > 0.1), name)

    def test_float32_close_to_float64(self):
        for name in self.NAMES:
            m = tiny(name)
            a, b = m.forward(TOKS), m.forward(TOKS, dtype=np.float32)
            self.assertLess(compare_logits.compare(b, a)["max_rel"], 1e-5, name)


class TestCheckpoints(unittest.TestCase):
    def test_deterministic(self):
        def digest(d):
            h = hashlib.sha256()
            for root, _, files in sorted(os.walk(d)):
                for f in sorted(files):
                    h.update(f.encode())
                    h.update(open(os.path.join(root, f), "rb").read())
            return h.hexdigest()
        with tempfile.TemporaryDirectory() as d:
            mk.write_all(d)
            self.assertEqual(digest(d), digest(tiny_dir()))

    def test_configs(self):
        c = read_json(os.path.join(tiny_dir(), "tiny-mistral", "config.json"))
        self.assertEqual(c["architectures"], ["MistralForCausalLM"])
        self.assertEqual(c["sliding_window"], 8)
        for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "rms_norm_eps", "rope_theta", "max_position_embeddings",
                  "vocab_size", "tie_word_embeddings", "torch_dtype"):
            self.assertIn(k, c)
        c = read_json(os.path.join(tiny_dir(), "tiny-falcon-40b", "config.json"))
        self.assertEqual((c["num_kv_heads"], c["new_decoder_architecture"], c["bias"], c["alibi"]),
                         (2, True, False, False))
        self.assertNotIn("ffn_hidden_size", c)
        c7 = read_json(os.path.join(tiny_dir(), "tiny-falcon-7b", "config.json"))
        self.assertEqual((c7["multi_query"], c7["parallel_attn"], c7["new_decoder_architecture"]),
                         (True, True, False))
        hdr, _ = safetensors_io.read_header(os.path.join(tiny_dir(), "tiny-falcon-7b",
                                                         "model.safetensors"))
        self.assertNotIn("lm_head.weight", hdr)
        self.assertEqual(hdr["transformer.h.0.self_attention.query_key_value.weight"]["shape"],
                         [(4 + 2) * 16, 64])


def tearDownModule():
    global _TMP
    if _TMP is not None:
        _TMP.cleanup()
        _TMP = None


if __name__ == "__main__":
    unittest.main(verbosity=2)
