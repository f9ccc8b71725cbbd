#!/usr/bin/env python3
"""Checks `cachebench perplexity` against the numpy reference on the same tokens.

The tokens come from `cachebench tokenize` (the tokenizer is checked separately against
llama.cpp's test vectors); the reference scores them with the convention written out here,
independently of the C++ code:
  llama.cpp: chunks of n_ctx tokens, the first token of each replaced by BOS, and the tokens at
             positions n_ctx/2 + 1 .. n_ctx - 1 scored from the logits before them.
  lm-eval:   lm-evaluation-harness loglikelihood_rolling: the text's tokens without BOS,
             get_rolling_token_windows(tokens, prefix=BOS, max_seq_len=ctx, context_len=1),
             make_disjoint_window, model input (context + continuation)[-(ctx+1):][:-1], the last
             len(continuation) logits scored; word/byte perplexity from the total NLL.
  gptq:      the tokens with the tokenizer's default BOS, nsamples = len // ctx windows,
             logits[:-1] scored against window[1:], ppl = exp(sum(loss_i * ctx) / (nsamples * ctx)).
--max-tokens keeps the stream's first N tokens (lm-eval, gptq), as cachebench does.
Exit 0 iff |PPL_cachebench - PPL_reference| / PPL_reference < --tol (and the scored token counts,
and for lm-eval the word and byte counts, agree)."""
import argparse, json, math, os, re, subprocess, sys, tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402


def nll_of(row, target):
    row = row.astype(np.float64)
    m = row.max()
    return math.log(np.exp(row - m).sum()) + m - row[target]


def ref_llamacpp(model, tokens, ctx, chunks, bos):
    nll, count = 0.0, 0
    first = ctx // 2
    for c in range(chunks):
        chunk = list(tokens[c * ctx:(c + 1) * ctx])
        if len(chunk) < ctx:
            break
        chunk[0] = bos
        logits = model.forward(chunk)
        for j in range(first, ctx - 1):
            nll += nll_of(logits[j], tokens[c * ctx + j + 1])
            count += 1
    return math.exp(nll / count), count, nll


def rolling_windows(token_list, prefix_token, max_seq_len, context_len):
    # lm_eval.utils.get_rolling_token_windows
    assert 1 <= context_len <= max_seq_len
    if not token_list:
        return
    pred_len = max_seq_len - context_len + 1
    predicted = 0
    first_seq_len = min(max_seq_len, len(token_list))
    yield [prefix_token] + token_list[:first_seq_len - 1], token_list[:first_seq_len]
    predicted += first_seq_len
    while predicted < len(token_list):
        window_pred_len = min(len(token_list) - predicted, pred_len)
        window_end = predicted + window_pred_len
        yield (token_list[window_end - max_seq_len - 1:window_end - 1],
               token_list[window_end - window_pred_len:window_end])
        predicted += window_pred_len


def make_disjoint_window(pair):
    a, b = pair
    return a[:len(a) - (len(b) - 1)], b


def ref_lmeval(model, tokens, ctx, prefix):
    nll, count = 0.0, 0
    for context, cont in map(make_disjoint_window, rolling_windows(list(tokens), prefix, ctx, 1)):
        inp = (context + cont)[-(ctx + 1):][:-1]
        logits = model.forward(inp)[-len(cont):]
        for row, t in zip(logits, cont):
            nll += nll_of(row, t)
            count += 1
    return math.exp(nll / count), count, nll


def ref_gptq(model, tokens, ctx, chunks):
    nsamples = len(tokens) // ctx
    if chunks > 0:
        nsamples = min(nsamples, chunks)
    nlls = []
    for i in range(nsamples):
        window = tokens[i * ctx:(i + 1) * ctx]
        logits = model.forward(list(window))[:-1]
        loss = np.mean([nll_of(row, t) for row, t in zip(logits, window[1:])])
        nlls.append(loss * ctx)
    return math.exp(sum(nlls) / (nsamples * ctx)), nsamples * (ctx - 1), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachebench", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--convention", choices=["llama.cpp", "lm-eval", "gptq"], default="llama.cpp")
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--chunks", type=int, default=8, help="llama.cpp and gptq: chunks/windows")
    ap.add_argument("--max-tokens", type=int, default=0, help="lm-eval and gptq: keep the first N")
    ap.add_argument("--bos", type=int, default=1)
    ap.add_argument("--tol", type=float, default=0.01)
    a = ap.parse_args()
    for p in (a.model, a.file):
        if not os.path.exists(p):
            print(f"SKIP: {p} not found (set CACHEBENCH_DATA)")
            return 77
    with open(a.file, "rb") as f:
        raw = f.read()
    tok_cmd = [a.cachebench, "tokenize", "--model", a.model]
    if a.convention == "lm-eval":
        tok_cmd.append("--no-bos")
    tok_out = subprocess.run(tok_cmd + ["-"], input=raw, capture_output=True, check=True)
    tokens = [int(t) for t in tok_out.stdout.split()]
    truncated = a.convention != "llama.cpp" and 0 < a.max_tokens < len(tokens)
    if truncated:
        tokens = tokens[:a.max_tokens]
    cmd = [a.cachebench, "perplexity", "--model", a.model, "--file", a.file, "--ctx", str(a.ctx),
           "--convention", a.convention]
    if a.convention != "lm-eval":
        cmd += ["--chunks", str(a.chunks)]
    if a.convention != "llama.cpp" and a.max_tokens > 0:
        cmd += ["--max-tokens", str(a.max_tokens)]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "ppl.json")
        subprocess.run(cmd + ["--out", out], capture_output=True, check=True)
        got = json.load(open(out))
    model = reference.load_model(a.model)
    if a.convention == "llama.cpp":
        ref_ppl, count, nll = ref_llamacpp(model, tokens, a.ctx, a.chunks, a.bos)
    elif a.convention == "lm-eval":
        ref_ppl, count, nll = ref_lmeval(model, tokens, a.ctx, a.bos)
    else:
        ref_ppl, count, nll = ref_gptq(model, tokens, a.ctx, a.chunks)
    rel = abs(got["ppl"] - ref_ppl) / ref_ppl
    ok = rel < a.tol and got["scored_tokens"] == count and got.get("convention") == a.convention
    print(f"{'PASS' if ok else 'FAIL'}: {a.convention}: cachebench PPL {got['ppl']:.6f} ({got['scored_tokens']} "
          f"tokens) vs reference {ref_ppl:.6f} ({count} tokens): relative difference {rel:.2e} (tolerance {a.tol})")
    if a.convention == "lm-eval":
        if truncated:  # cachebench counts words and bytes on the kept tokens' decoded text
            dec = subprocess.run([a.cachebench, "tokenize", "--model", a.model, "--decode"] +
                                 [str(t) for t in tokens], capture_output=True, check=True)
            text = dec.stdout.decode("utf-8")
            text = text[:-1] if text.endswith("\n") else text
        else:
            text = raw.decode("utf-8")
        words, nbytes = len(re.split(r"\s+", text)), len(text.encode("utf-8"))
        ref_bpb = nll / nbytes / math.log(2)
        ref_word = math.exp(nll / words)
        bpb_rel = abs(got["bits_per_byte"] - ref_bpb) / ref_bpb
        word_rel = abs(got["word_perplexity"] - ref_word) / ref_word
        wb_ok = (got["words"] == words and got["bytes"] == nbytes and bpb_rel < a.tol and word_rel < a.tol and
                 abs(got["bits_per_byte"] - math.log2(got["byte_perplexity"])) < 1e-9)
        print(f"{'PASS' if wb_ok else 'FAIL'}: words {got['words']} vs {words}, bytes {got['bytes']} vs {nbytes}, "
              f"word PPL {got['word_perplexity']:.6f} vs {ref_word:.6f}, bits/byte {got['bits_per_byte']:.6f} vs "
              f"{ref_bpb:.6f}")
        ok = ok and wb_ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
