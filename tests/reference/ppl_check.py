#!/usr/bin/env python3
"""Checks `cachebench perplexity` against the numpy reference on the same tokens.

The tokens come from `cachebench tokenize` (the tokenizer is checked separately against
llama.cpp's test vectors); the reference scores them with the convention written out here,
independently of the C++ code:
  llama.cpp: chunks of n_ctx tokens, the first token of each replaced by BOS, and the tokens at
             positions n_ctx/2 + 1 .. n_ctx - 1 scored from the logits before them.
  lm-eval:   lm-evaluation-harness loglikelihood_rolling: the text's tokens, BOS first unless
             --lmeval-bos no (lm-eval's add_bos_token=False),
             get_rolling_token_windows(tokens, prefix=BOS, max_seq_len=ctx, context_len=1),
             make_disjoint_window, model input (context + continuation)[-(ctx+1):][:-1], the last
             len(continuation) logits scored; word/byte perplexity from the total NLL.
  gptq:      the tokens with the tokenizer's default BOS, nsamples = len // ctx windows,
             logits[:-1] scored against window[1:], ppl = exp(sum(loss_i * ctx) / (nsamples * ctx)).
             On WikiText (--dataset wikitext2-raw) the text is GPTQ's get_wikitext2's: the Hugging
             Face dataset's rows (each line of the file as Python reads it, "" when only
             whitespace) joined with "\n\n".
  lm-eval on WikiText (--dataset wikitext2 or wikitext2-raw): lm-eval's `wikitext` task: the file
             split into articles as the HF dataset EleutherAI/wikitext_document_level does, each
             article detokenized by the harness's wikitext_detokenizer, tokenized on its own and
             rolled as above; word/byte perplexity and bits per byte from the NLL, words and bytes
             summed over articles, words and bytes of the articles before detokenization. The
             split and the detokenizer are written out here independently of the C++ code.
             Without a WikiText --dataset, the lm-eval check also runs this document convention
             on a small WikiText-style file it writes (unless --no-synthetic-wikitext).
--max-tokens keeps the stream's first N tokens (lm-eval, gptq), as cachebench does; on WikiText
documents, the first whole articles that fit in N tokens.
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


def wikitext_articles(text):
    """EleutherAI/wikitext_document_level's pages: a new page at each line that, with "= = ="
    and then "= =" collapsed and stripped, reads "= ... ="; whitespace-only pages dropped,
    except the last one."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    pages, lines = [], []
    for line in text.split("\n"):
        head = line.replace("= = =", "===").replace("= =", "==").strip()
        if head.startswith("= ") and head.endswith(" ="):
            if "\n".join(lines).strip():
                pages.append("\n".join(lines))
            lines = []
        lines.append(line)
    pages.append("\n".join(lines))
    return pages


def wikitext_detokenize(s):
    """lm-eval's wikitext_detokenizer, step by step (lm_eval/tasks/wikitext/preprocess_wikitext.py)."""
    s = s.replace("s '", "s'")
    s = re.sub(r"/' [0-9]/", lambda m: "/'[0-9]/", s)
    for old, new in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" : ", ": "), (" ; ", "; "),
                     (" . ", ". "), (" ! ", "! "), (" ? ", "? "), (" , ", ", ")):
        s = s.replace(old, new)
    for op, cl in ("()", "[]", "{}", '""', "''"):
        pattern = re.escape(op) + r"\s*([^" + re.escape(cl) + r"]*?)\s*" + re.escape(cl)
        s = re.sub(pattern, lambda m: op + m.group(1) + cl, s)
    for old, new in (("= = = =", "===="), ("= = =", "==="), ("= =", "=="), (" \u00b0 ", "\u00b0"),
                     (" \n", "\n"), ("\n ", "\n"), (" N ", " 1 "), (" 's", "'s")):
        s = s.replace(old, new)
    return s


SYNTHETIC_WIKITEXT = (
    " \n = The Little Red Ball = \n \n"
    " Once upon a time , there was a little girl named Lily . She had a red ball @-@ shaped toy . "
    "\" Look , Mom ! \" she said . Her mom smiled : \" It 's very pretty . \" \n \n"
    " = = The park = = \n \n"
    " Lily went to the park ( with her dog ) . They played for 2 @,@ 000 seconds ; it was fun ! "
    "Was the ball lost ? No , it was under a tree . \n \n"
    " = Tom and the Boat = \n \n"
    " Tom had a small boat . He put it in the water and it went fast . The boat was 1 @.@ 5 feet "
    "long . Tom 's friend Sam said , \" Can I play too ? \" Tom said yes . \n \n"
    " = = = The storm = = = \n \n"
    " Then it began to rain [ a lot ] . They ran home and drank warm milk . \n \n"
    " = Spot the Dog = \n \n"
    " Spot was a happy dog . He liked to dig in the garden . One day he found a big bone ! \n \n")


def tokenize(cachebench, model, text, bos):
    cmd = [cachebench, "tokenize", "--model", model] + ([] if bos else ["--no-bos"]) + ["-"]
    out = subprocess.run(cmd, input=text.encode("utf-8"), capture_output=True, check=True)
    return [int(t) for t in out.stdout.split()]


def ref_lmeval_documents(model, docs, ctx, prefix):
    nll, count = 0.0, 0
    for tokens in docs:
        if tokens:
            _, c, n = ref_lmeval(model, tokens, ctx, prefix)
            nll, count = nll + n, count + c
    return math.exp(nll / count), count, nll


def check_wikitext_documents(a, model, path, label):
    """cachebench --convention lm-eval --dataset wikitext2-raw on `path` against the reference."""
    with open(path, "rb") as f:
        pages = wikitext_articles(f.read().decode("utf-8"))
    docs, kept = [], 0
    for page in pages:
        toks = tokenize(a.cachebench, a.model, wikitext_detokenize(page), a.lmeval_bos == "auto")
        if a.max_tokens > 0 and kept + len(toks) > a.max_tokens:
            break
        kept += len(toks)
        docs.append((page, toks))
    cmd = [a.cachebench, "perplexity", "--model", a.model, "--file", path, "--ctx", str(a.ctx),
           "--convention", "lm-eval", "--dataset", "wikitext2-raw", "--bos", a.lmeval_bos]
    if a.max_tokens > 0:
        cmd += ["--max-tokens", str(a.max_tokens)]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "ppl.json")
        subprocess.run(cmd + ["--out", out], capture_output=True, check=True)
        got = json.load(open(out))
    ref_ppl, count, nll = ref_lmeval_documents(model, [t for _, t in docs], a.ctx, a.bos)
    # lm-eval's process_results: words and bytes of doc["page"], before detokenization.
    words = sum(len(re.split(r"\s+", p)) for p, _ in docs)
    nbytes = sum(len(p.encode("utf-8")) for p, _ in docs)
    ref_word, ref_bpb = math.exp(nll / words), nll / nbytes / math.log(2)
    rel = abs(got["ppl"] - ref_ppl) / ref_ppl
    word_rel = abs(got["word_perplexity"] - ref_word) / ref_word
    bpb_rel = abs(got["bits_per_byte"] - ref_bpb) / ref_bpb
    ok = (rel < a.tol and word_rel < a.tol and bpb_rel < a.tol and got["scored_tokens"] == count and
          got["documents"] == len(docs) and got["words"] == words and got["bytes"] == nbytes and
          got.get("detokenizer") == "wikitext_detokenizer")
    print(f"{'PASS' if ok else 'FAIL'}: lm-eval wikitext documents ({label}): {got['documents']} vs {len(docs)} "
          f"documents of {len(pages)}, PPL {got['ppl']:.6f} vs {ref_ppl:.6f} ({got['scored_tokens']} vs {count} tokens), "
          f"words {got['words']} vs {words}, bytes {got['bytes']} vs {nbytes}, word PPL "
          f"{got['word_perplexity']:.6f} vs {ref_word:.6f}, bits/byte {got['bits_per_byte']:.6f} vs {ref_bpb:.6f}")
    return ok


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
    ap.add_argument("--lmeval-bos", choices=["auto", "no"], default="auto",
                    help="lm-eval: BOS first in each document (auto: the tokenizer's default, lm-eval "
                         "since its PR #3347) or not (its earlier add_bos_token=False); passed on "
                         "to cachebench as --bos")
    ap.add_argument("--tol", type=float, default=0.01)
    ap.add_argument("--dataset", choices=["text", "wikitext2", "wikitext2-raw"], default="text",
                    help="lm-eval: wikitext2/wikitext2-raw check the per-article convention on --file; "
                         "gptq: GPTQ's joined rows")
    ap.add_argument("--no-synthetic-wikitext", action="store_true",
                    help="lm-eval: skip the document check on a written WikiText-style file")
    a = ap.parse_args()
    for p in (a.model, a.file):
        if not os.path.exists(p):
            print(f"SKIP: {p} not found (set CACHEBENCH_DATA)")
            return 77
    if a.convention == "lm-eval" and a.dataset != "text":
        return 0 if check_wikitext_documents(a, reference.load_model(a.model), a.file, a.file) else 1
    with open(a.file, "rb") as f:
        raw = f.read()
    if a.convention == "gptq" and a.dataset != "text":
        with open(a.file, encoding="utf-8") as f:  # the HF wikitext script's rows
            raw = "\n\n".join(line if line.strip() else "" for line in f).encode("utf-8")
    tok_cmd = [a.cachebench, "tokenize", "--model", a.model]
    if a.convention == "lm-eval" and a.lmeval_bos == "no":
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
    else:
        cmd += ["--bos", a.lmeval_bos]
    if a.dataset != "text":
        cmd += ["--dataset", a.dataset]
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
        if not a.no_synthetic_wikitext:
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "wiki.synthetic.raw")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(SYNTHETIC_WIKITEXT)
                ok = check_wikitext_documents(a, model, path, "synthetic WikiText-style file") and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
