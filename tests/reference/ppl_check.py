#!/usr/bin/env python3
"""Checks `cachebench perplexity` against the numpy reference on the same tokens.

The tokens come from `cachebench tokenize` (the tokenizer is checked separately against
llama.cpp's test vectors); the reference scores them with the llama.cpp convention written
out here: chunks of n_ctx tokens, the first token of each replaced by BOS, and the tokens at
positions n_ctx/2 + 1 .. n_ctx - 1 scored from the logits before them.
Exit 0 iff |PPL_cachebench - PPL_reference| / PPL_reference < --tol."""
import argparse, json, math, os, subprocess, sys, tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachebench", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--bos", type=int, default=1)
    ap.add_argument("--tol", type=float, default=0.01)
    a = ap.parse_args()
    for p in (a.model, a.file):
        if not os.path.exists(p):
            print(f"SKIP: {p} not found (set CACHEBENCH_DATA)")
            return 77
    with open(a.file, "rb") as f:
        tok_out = subprocess.run([a.cachebench, "tokenize", "--model", a.model, "-"], input=f.read(),
                                 capture_output=True, check=True)
    tokens = [int(t) for t in tok_out.stdout.split()]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "ppl.json")
        subprocess.run([a.cachebench, "perplexity", "--model", a.model, "--file", a.file, "--ctx", str(a.ctx),
                        "--chunks", str(a.chunks), "--out", out], capture_output=True, check=True)
        got = json.load(open(out))
    model = reference.load_model(a.model)
    nll, count = 0.0, 0
    first = a.ctx // 2
    for c in range(a.chunks):
        chunk = list(tokens[c * a.ctx:(c + 1) * a.ctx])
        if len(chunk) < a.ctx:
            break
        chunk[0] = a.bos
        logits = model.forward(chunk)
        for j in range(first, a.ctx - 1):
            row = logits[j].astype(np.float64)
            m = row.max()
            nll += math.log(np.exp(row - m).sum()) + m - row[tokens[c * a.ctx + j + 1]]
            count += 1
    ref_ppl = math.exp(nll / count)
    rel = abs(got["ppl"] - ref_ppl) / ref_ppl
    ok = rel < a.tol and got["scored_tokens"] == count
    print(f"{'PASS' if ok else 'FAIL'}: cachebench PPL {got['ppl']:.6f} ({got['scored_tokens']} tokens) vs reference "
          f"{ref_ppl:.6f} ({count} tokens): relative difference {rel:.2e} (tolerance {a.tol})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
