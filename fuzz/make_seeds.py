#!/usr/bin/env python3
"""Seed corpora for the fuzz targets: small hand-made inputs written under OUT/<target>/,
and symbolic links to the shared real files (models, tokenizers, traces, MMLU CSVs) under
DATA, which are never copied.

usage: make_seeds.py OUT DATA
"""
import gzip
import json
import os
import struct
import sys


def put(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def link(out, target, data_dir, rel):
    src = os.path.join(data_dir, rel)
    if not os.path.isfile(src):
        print(f"make_seeds: {src} not found, skipped")
        return
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    dst = os.path.join(d, "shared-" + rel.replace("/", "-"))
    if os.path.lexists(dst):
        os.remove(dst)
    os.symlink(os.path.abspath(src), dst)


# ---- GGUF -------------------------------------------------------------------------------
U8, U32, I32, F32, BOOL, STR, ARR, U64 = 0, 4, 5, 6, 7, 8, 9, 10


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    if t == U8:
        return struct.pack("<B", v)
    if t == U32:
        return struct.pack("<I", v)
    if t == I32:
        return struct.pack("<i", v)
    if t == F32:
        return struct.pack("<f", v)
    if t == BOOL:
        return struct.pack("<B", 1 if v else 0)
    if t == STR:
        return gstr(v)
    if t == U64:
        return struct.pack("<Q", v)
    raise ValueError(t)


def gkv(key, t, v, elem=None):
    if t == ARR:
        body = struct.pack("<IQ", elem, len(v)) + b"".join(gval(elem, x) for x in v)
    else:
        body = gval(t, v)
    return gstr(key) + struct.pack("<I", t) + body


def gguf(kvs, tensors=(), align=32):
    """tensors: (name, ne list, ggml type, data bytes)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    offset, infos, blobs = 0, b"", b""
    for name, ne, typ, blob in tensors:
        infos += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", typ, offset)
        pad = (-len(blob)) % align
        blobs += blob + b"\0" * pad
        offset += len(blob) + pad
    out += infos
    out += b"\0" * ((-len(out)) % align)
    return out + blobs


def gguf_seeds(out):
    sp = "\u2581"
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    words = [sp, sp + "H", "ello", sp + "world", "or", "ld", sp + "w", "e", "l", "o", "<user>"]
    pieces += words
    types += [1] * (len(words) - 1) + [4]
    scores = [0.0] * (len(pieces) - len(words)) + [-float(i) for i in range(len(words))]
    spm = [
        gkv("general.architecture", STR, "llama"),
        gkv("tokenizer.ggml.model", STR, "llama"),
        gkv("tokenizer.ggml.tokens", ARR, pieces, STR),
        gkv("tokenizer.ggml.scores", ARR, scores, F32),
        gkv("tokenizer.ggml.token_type", ARR, types, I32),
        gkv("tokenizer.ggml.bos_token_id", U32, 1),
        gkv("tokenizer.ggml.eos_token_id", U32, 2),
        gkv("tokenizer.ggml.add_space_prefix", BOOL, True),
    ]
    put(out, "fuzz_gguf", "spm_vocab.gguf", gguf(spm))

    def byte_char(b):  # GPT-2's byte-to-unicode map
        if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255:
            return chr(b)
        n = sum(1 for x in range(b) if not (33 <= x <= 126 or 161 <= x <= 172 or 174 <= x <= 255))
        return chr(256 + n)

    bpe_pieces = [byte_char(b) for b in range(256)]
    merges = ["H e", "He l", "Hel l", "Hell o", "\u0120 w", "\u0120w o", "r l", "rl d"]
    for m in merges:
        bpe_pieces.append(m.replace(" ", ""))
    bpe_pieces += ["<|endoftext|>", ">>INTRODUCTION<<"]
    bpe_types = [1] * (len(bpe_pieces) - 2) + [3, 4]
    bpe = [
        gkv("general.architecture", STR, "falcon"),
        gkv("tokenizer.ggml.model", STR, "gpt2"),
        gkv("tokenizer.ggml.pre", STR, "falcon"),
        gkv("tokenizer.ggml.tokens", ARR, bpe_pieces, STR),
        gkv("tokenizer.ggml.token_type", ARR, bpe_types, I32),
        gkv("tokenizer.ggml.merges", ARR, merges, STR),
        gkv("tokenizer.ggml.eos_token_id", U32, len(bpe_pieces) - 2),
    ]
    put(out, "fuzz_gguf", "bpe_vocab.gguf", gguf(bpe))

    f32 = struct.pack("<8f", *[float(i) for i in range(8)])
    q8 = struct.pack("<e", 0.5) + bytes(range(32))
    q4 = struct.pack("<e", 0.25) + bytes(range(16))
    q41 = struct.pack("<ee", 0.25, -1.0) + bytes(range(16))
    f16 = struct.pack("<4e", 1.0, -2.0, 0.5, 65504.0)
    tensors = [
        ("token_embd.weight", [4, 2], 0, f32),
        ("blk.0.q8", [32], 8, q8),
        ("blk.0.q4_0", [32], 2, q4),
        ("blk.0.q4_1", [32], 3, q41),
        ("blk.0.f16", [2, 2], 1, f16),
    ]
    meta = [
        gkv("general.architecture", STR, "llama"),
        gkv("general.alignment", U32, 32),
        gkv("llama.block_count", U32, 1),
        gkv("t.nested", ARR, [], U8),
        gkv("t.u64", U64, 2**63),
        gkv("t.flags", ARR, [True, False], BOOL),
    ]
    put(out, "fuzz_gguf", "tensors.gguf", gguf(meta, tensors))


# ---- tokenizer.model (a SentencePiece ModelProto, protobuf wire format by hand) ------------
def pb_varint(v):
    out = b""
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_field(num, wire, payload):
    key = pb_varint((num << 3) | wire)
    if wire == 0:
        return key + pb_varint(payload)
    if wire == 5:
        return key + struct.pack("<f", payload)
    return key + pb_varint(len(payload)) + payload  # wire 2


def spm_model(model_type, byte_fallback):
    sp = "\u2581"
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    if byte_fallback:
        pieces += [(f"<0x{b:02X}>", 0.0, 6) for b in range(256)]
    words = [sp, sp + "H", "ello", sp + "world", "or", "ld", sp + "w", "e", "l", "o", "H", "w", "r", "d"]
    pieces += [(w, -float(i), 1) for i, w in enumerate(words)] + [("<user>", 0.0, 4)]
    out = b""
    for text, score, typ in pieces:
        out += pb_field(1, 2, pb_field(1, 2, text.encode()) + pb_field(2, 5, score) + pb_field(3, 0, typ))
    trainer = (pb_field(3, 0, model_type) + pb_field(4, 0, len(pieces)) + pb_field(35, 0, int(byte_fallback))
               + pb_field(40, 0, 0) + pb_field(41, 0, 1) + pb_field(42, 0, 2) + pb_field(43, 0, -1))
    normalizer = (pb_field(1, 2, b"identity") + pb_field(3, 0, 1) + pb_field(4, 0, 0) + pb_field(5, 0, 1))
    return out + pb_field(2, 2, trainer) + pb_field(3, 2, normalizer)


def sentencepiece_seeds(out):
    put(out, "fuzz_sentencepiece", "bpe_bytes.model", spm_model(2, True))
    put(out, "fuzz_sentencepiece", "unigram.model", spm_model(1, False))


# ---- safetensors -------------------------------------------------------------------------
def safetensors(entries, meta=None):
    header, blob = {}, b""
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if meta is not None:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + blob


def safetensors_seeds(out):
    put(out, "fuzz_safetensors", "small.safetensors", safetensors(
        [("w", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
         ("h", "F16", [3], struct.pack("<3e", 1, 2, 3)),
         ("b", "BF16", [1], b"\x80\x3f"),
         ("i", "I32", [2], struct.pack("<2i", 7, -7)),
         ("empty", "F32", [0, 4], b"")],
        {"format": "pt"}))
    put(out, "fuzz_safetensors", "scalar.safetensors", safetensors([("s", "F32", [], struct.pack("<f", 3.5))]))


# ---- tokenizer.json ----------------------------------------------------------------------
def tokenizer_json_seeds(out):
    vocab = {chr(c): i for i, c in enumerate(range(33, 127))}
    for extra in ["\u0120", "\u0120w", "or", "ld", "He", "ll"]:
        vocab[extra] = len(vocab)
    merges = ["\u0120 w", "o r", "l d", "H e", "l l"]
    plain = {
        "model": {"type": "BPE", "vocab": vocab, "merges": merges},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "added_tokens": [{"id": len(vocab), "content": "<|endoftext|>", "special": True}],
    }
    put(out, "fuzz_tokenizer_json", "bytelevel.json", json.dumps(plain))
    falcon = dict(plain)
    falcon["model"] = {"type": "BPE", "vocab": vocab, "merges": [m.split(" ") for m in merges],
                       "ignore_merges": True}
    falcon["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Punctuation", "behavior": "Contiguous"},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        {"type": "Digits", "individual_digits": False},
        {"type": "Split", "pattern": {"Regex": "[0-9][0-9][0-9]"}, "behavior": "Isolated",
         "invert": False}]}
    put(out, "fuzz_tokenizer_json", "falcon.json", json.dumps(falcon))


# ---- traces ------------------------------------------------------------------------------
def trace_seeds(out):
    length = {"format": "cachebench-trace", "version": 1, "kind": "lengths", "generator": {},
              "sessions": [{"id": 0, "turns": [[12, 3], [40, 7]]}, {"id": 1, "name": "b", "turns": [[1, 1]]}]}
    put(out, "fuzz_trace", "lengths.json", json.dumps(length))
    share = [{"id": "a_0", "conversations": [{"from": "human", "value": "hi there"},
                                              {"from": "gpt", "value": "hello"}]},
             {"id": "a_2", "conversations": [{"from": "human", "value": "more"},
                                              {"from": "gpt", "value": "sure"}]},
             {"id": 7, "items": [{"from": "user", "value": "q"}, {"from": "system", "value": None},
                                  {"from": "assistant", "value": "a"}]}]
    put(out, "fuzz_trace", "sharegpt.json", json.dumps(share))
    put(out, "fuzz_trace", "sharegpt.json.gz", gzip.compress(json.dumps(share).encode(), mtime=0))


def csv_seeds(out):
    put(out, "fuzz_csv", "original.csv", 'What is 2+2?,1,2,3,4,D\n"A ""quoted"", multi\r\nline",a,b,c,d,A\r\n')
    put(out, "fuzz_csv", "converted.csv", "\ufeffquestion,choice0,choice1,choice2,choice3,answer\nq,a,b,c,d,3\r")


def json_lines_seeds(out, data_dir):
    rows = ['{"goal": "g", "sol1": "a", "sol2": "b"}', '{"goal": "x\\ny", "sol1": "", "sol2": "c", "id": 3}']
    put(out, "fuzz_json_lines", "piqa.txt", "\n".join(rows) + "\n===\n0\n1\n")
    src = os.path.join(data_dir, "data/piqa/valid.jsonl")
    lab = os.path.join(data_dir, "data/piqa/valid-labels.lst")
    if os.path.isfile(src) and os.path.isfile(lab):
        with open(src, encoding="utf-8") as f:
            q = [next(f) for _ in range(20)]
        with open(lab, encoding="utf-8") as f:
            a = [next(f) for _ in range(20)]
        put(out, "fuzz_json_lines", "piqa-valid-head.txt", "".join(q) + "===\n" + "".join(a))


# ---- store -------------------------------------------------------------------------------
def entry_payload(session, gen, tokens, tpc, layers, token_bytes):
    desc = b"preset:tiny/2x8/f32"
    n_tc = (len(tokens) + tpc - 1) // tpc
    n_chunks = 2 * layers * n_tc
    p = struct.pack("<QQQ", session, gen, 0x1234) + struct.pack("<I", len(desc)) + desc
    p += struct.pack("<BiII", 0, layers, token_bytes, tpc) + struct.pack("<ddd", 1.0, 2.0, 0.0)
    p += struct.pack("<Q", len(tokens)) + struct.pack(f"<{len(tokens)}i", *tokens)
    p += struct.pack("<Q", n_chunks) + struct.pack(f"<{n_chunks}Q", *range(n_chunks))
    p += struct.pack("<Q", n_chunks) + struct.pack(f"<{n_chunks}Q", *[7] * n_chunks)
    return p


def journal_seeds(out):
    def rec(t, payload):
        return struct.pack("<BH", t, len(payload)) + payload
    commit = entry_payload(3, 1, list(range(10)), 4, 2, 64)
    later = entry_payload(4, 2, [5, 6, 7], 2, 1, 16)
    erase = struct.pack("<QQ", 3, 5)
    put(out, "fuzz_journal", "records.bin", b"\x01" + rec(1, commit) + rec(1, later) + rec(2, erase) + b"\x43\x42")
    # A rewritten journal: start record, its commits, the end record counting them (marker
    # version 3), then an appended commit.
    start = rec(3, b"cachebench store journal")
    put(out, "fuzz_journal", "rewrite.bin",
        b"\x01" + start + rec(1, commit) + rec(4, struct.pack("<Q", 1)) + rec(1, later))


def marker_seeds(out):
    gib = 1 << 30
    for name, ssd, chunk in [("small", 64 << 20, 1 << 20), ("big", 100 * gib, 4 << 20)]:
        slots = ssd // chunk
        spf = max(1, gib // chunk, (slots + 63) // 64)
        info = {"format": "cachebench-store", "version": 1, "chunk_bytes": chunk,
                "ssd_bytes": slots * chunk, "slots_per_file": spf, "n_files": (slots + spf - 1) // spf}
        put(out, "fuzz_store_marker", name + ".json", json.dumps(info, indent=2) + "\n")


def profile_seeds(out):
    # The built-in a100-80gb profile as `cachebench calibrate --print-profile` writes it (its
    # sources dropped to keep the seed small), and a calibrated-style one with a fit.
    a100 = {'attn_tflops': 156.0, 'd2d_gbps': 866.5749999999999, 'd2h_gbps': 25.0, 'decode_attn_tflops': 156.0, 'description': "NVIDIA A100-SXM4-80GB, PCIe Gen4 host link, 128 GB DRAM, 10 TB NVMe (the CachedAttention evaluation's servers)", 'dram_bytes': 128000000000.0, 'gemm_tflops': 218.39999999999998, 'gpu_usd_per_hour': 5.0, 'gpus': 1, 'h2d_gbps': 25.0, 'hbm_bytes': 85899345920.0, 'hbm_gbps': 1733.1499999999999, 'kv_bytes_per_element': 2, 'layer_overhead_s': 2e-05, 'name': 'a100-80gb', 'nvlink_gbps': 300.0, 'pcie_latency_s': 1e-05, 'seq_overhead_s': 0.0, 'ssd_bytes': 10000000000000.0, 'ssd_latency_s': 0.0001, 'ssd_read_gbps': 6.8, 'ssd_write_gbps': 4.0, 'step_overhead_s': 0.002}
    put(out, "fuzz_profile", "a100.json", json.dumps(a100, indent=2) + "\n")
    cpu = dict(a100, name="cpu-calibrated", gemm_tflops=0.05, attn_tflops=0.01, hbm_gbps=0)
    put(out, "fuzz_profile", "cpu.json", json.dumps(cpu) + "\n")


def hf_config_seeds(out):
    llama = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 172,
             "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
             "vocab_size": 128, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
             "rope_theta": 10000.0, "tie_word_embeddings": False}
    put(out, "fuzz_hf_config", "llama.json", json.dumps(llama, indent=2))
    put(out, "fuzz_hf_config", "mistral.json",
        json.dumps(dict(llama, architectures=["MistralForCausalLM"], sliding_window=128)))
    falcon = {"architectures": ["FalconForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
              "num_hidden_layers": 2, "vocab_size": 128, "multi_query": True, "parallel_attn": True,
              "new_decoder_architecture": False, "layer_norm_epsilon": 1e-5, "bias": False}
    put(out, "fuzz_hf_config", "falcon7b.json", json.dumps(falcon))
    put(out, "fuzz_hf_config", "falcon40b.json",
        json.dumps(dict(falcon, new_decoder_architecture=True, num_kv_heads=2, multi_query=False)))


# ---- text corpora and checkpoint directories -----------------------------------------------
def corpus_seeds(out):
    wiki = " \n = Title = \n \n The cat @-@ like ( animal ) sat . \n = = Sub = = \n It 's 3 @.@ 5 ' 1 \n"
    put(out, "fuzz_corpus", "wiki.txt", wiki)
    put(out, "fuzz_corpus", "wiki.txt.gz", gzip.compress(wiki.encode()))
    put(out, "fuzz_corpus", "ptb.txt", " a b <unk> \r\n\tN c\u00a0\n\n")
    put(out, "fuzz_corpus", "c4.jsonl", '{"text": "one"}\n{"prompt": "two ", "response": "three"}\n')


CKPT_SEP = b"\n#cb-file#\n"


def tiny_llama_tensors(cfg, layers):
    E, V, F = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    hd = E // cfg["num_attention_heads"]
    KV = cfg["num_key_value_heads"] * hd
    shapes = {"model.embed_tokens.weight": [V, E], "model.norm.weight": [E], "lm_head.weight": [V, E]}
    for i in layers:
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": [E], p + "post_attention_layernorm.weight": [E],
                       p + "self_attn.q_proj.weight": [E, E], p + "self_attn.k_proj.weight": [KV, E],
                       p + "self_attn.v_proj.weight": [KV, E], p + "self_attn.o_proj.weight": [E, E],
                       p + "mlp.gate_proj.weight": [F, E], p + "mlp.up_proj.weight": [F, E],
                       p + "mlp.down_proj.weight": [E, F]})
    return shapes


def checkpoint_seeds(out):
    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
           "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 2,
           "vocab_size": 16, "max_position_embeddings": 32, "rms_norm_eps": 1e-5,
           "rope_theta": 10000.0, "tie_word_embeddings": False}

    def st(shapes, dtype):
        size = 2 if dtype in ("F16", "BF16") else 4
        entries = []
        for name, shape in shapes.items():
            n = 1
            for d in shape:
                n *= d
            entries.append((name, dtype, shape, bytes(size * n)))
        return safetensors(entries)

    conf = json.dumps(cfg).encode()
    put(out, "fuzz_checkpoint", "single-f32", conf + CKPT_SEP + CKPT_SEP + st(tiny_llama_tensors(cfg, [0, 1]), "F32"))
    first, second = tiny_llama_tensors(cfg, [0]), tiny_llama_tensors(cfg, [1])
    for k in ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]:
        second.pop(k)
    weight_map = {k: "model-00001-of-00002.safetensors" for k in first}
    weight_map.update({k: "model-00002-of-00002.safetensors" for k in second})
    index = json.dumps({"metadata": {}, "weight_map": weight_map}).encode()
    put(out, "fuzz_checkpoint", "sharded-f16",
        conf + CKPT_SEP + index + CKPT_SEP + st(first, "F16") + CKPT_SEP + st(second, "BF16"))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out, data = sys.argv[1], sys.argv[2]
    gguf_seeds(out)
    safetensors_seeds(out)
    sentencepiece_seeds(out)
    tokenizer_json_seeds(out)
    trace_seeds(out)
    csv_seeds(out)
    json_lines_seeds(out, data)
    journal_seeds(out)
    marker_seeds(out)
    profile_seeds(out)
    hf_config_seeds(out)
    corpus_seeds(out)
    checkpoint_seeds(out)
    put(out, "fuzz_tokenize", "text.txt", "Once upon a time, 123456 \u2581 caf\u00e9 \U0001F642 it's\n\t  end")
    for rel in ["models/stories260K/stories260K.gguf", "models/llamacpp-vocab/ggml-vocab-falcon.gguf",
                "models/llamacpp-vocab/ggml-vocab-llama-spm.gguf"]:
        link(out, "fuzz_gguf", data, rel)
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")
    for rel in ["gguf/all_types.gguf", "gguf/kquants.gguf"]:  # every tensor type read
        link(out, "fuzz_gguf", fixtures, rel)
    link(out, "fuzz_sentencepiece", data, "models/tokenizers/llama2-tokenizer.model")
    for rel in ["models/llamacpp-vocab/ggml-vocab-falcon.gguf.inp",
                "models/llamacpp-vocab/ggml-vocab-llama-spm.gguf.inp"]:
        link(out, "fuzz_tokenize", data, rel)
    for rel in ["data/sharegpt/sharegpt_v3_multiturn_8conv.json",
                "data/sharegpt/sharegpt_v3_sample_50conv_2turn.json"]:
        link(out, "fuzz_trace", data, rel)
    for rel in ["data/mmlu/dev/abstract_algebra_dev.csv", "data/mmlu/test/abstract_algebra_test.csv"]:
        link(out, "fuzz_csv", data, rel)
    link(out, "fuzz_json_lines", data, "data/c4/c4_realnewslike_prompt_response_200.jsonl")
    for rel in ["data/wikitext-2-raw/wiki.test.raw", "data/ptb/ptb.test.txt",
                "data/c4/c4_realnewslike_prompt_response_200.jsonl"]:
        link(out, "fuzz_corpus", data, rel)


if __name__ == "__main__":
    main()
