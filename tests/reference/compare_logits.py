#!/usr/bin/env python3
"""Compare cachebench's logits with the numpy reference.

  python3 compare_logits.py --cachebench BIN --model MODEL --tokens 1,2,3 [--tol 1e-4]
  python3 compare_logits.py --logits-json DUMP.json --model MODEL --tokens 1,2,3
  python3 compare_logits.py --self-test

Contract with the C++ side. This script runs

  BIN forward --model MODEL --tokens 1,2,3 --dump-logits OUT.json [--extra-arg ...]

which must exit 0 and write OUT.json:

  {"tokens": [1, 2, 3], "logits": [[v_0, ..., v_{vocab-1}], ...]}

with one row per input position (row t = logits after tokens[0..t], positions 0..T-1
from an empty cache), in token order, floats (NaN/Infinity are a failure). Extra keys
are ignored.

Metrics (a = cachebench, b = reference, float64):
  max_abs  = max over t, j of |a[t,j] - b[t,j]|
  max_rel  = max over rows t of ( max_j |a[t,j] - b[t,j]| / max_j |b[t,j]| )
             (error relative to the row's largest reference logit magnitude)
  top-1    = number of positions where argmax_j a[t] == argmax_j b[t]
Exit status 0 iff the dump is well-formed and max_rel < tol; otherwise one line
starting with "FAIL:" and exit 1 (2 for usage errors).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402


def parse_tokens(s: str) -> list[int]:
    try:
        toks = [int(x) for x in s.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise SystemExit(f"FAIL: --tokens must be comma-separated integers, got {s!r}")
    if not toks:
        raise SystemExit("FAIL: --tokens is empty")
    return toks


def compare(a: np.ndarray, b: np.ndarray) -> dict:
    """a: engine logits, b: reference logits, both [T, vocab]."""
    diff = np.abs(a - b)
    row_err = diff.max(axis=1)
    row_scale = np.maximum(np.abs(b).max(axis=1), 1e-30)
    rel = row_err / row_scale
    ta, tb = a.argmax(axis=1), b.argmax(axis=1)
    # positions whose reference top-2 gap is below the observed error are ties, not bugs
    srt = np.sort(b, axis=1)
    gap = srt[:, -1] - srt[:, -2] if b.shape[1] > 1 else np.full(b.shape[0], np.inf)
    mismatch = ta != tb
    return {
        "positions": int(a.shape[0]), "vocab": int(a.shape[1]),
        "max_abs": float(diff.max()), "max_rel": float(rel.max()),
        "worst_pos": int(rel.argmax()),
        "top1_agree": int((~mismatch).sum()),
        "top1_mismatch_not_near_tie": int((mismatch & (gap > 2 * row_err)).sum()),
        "ref_logit_scale": float(np.abs(b).max()),
    }


def load_dump(path: str, tokens: list[int]):
    """Returns (logits array, None) or (None, error message)."""
    try:
        with open(path) as f:
            d = json.load(f)
    except FileNotFoundError:
        return None, f"{path} was not written"
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return None, f"{path} is not valid JSON: {e}"
    if not isinstance(d, dict) or "logits" not in d or "tokens" not in d:
        return None, f'{path}: expected an object with "tokens" and "logits"'
    if [int(x) for x in d["tokens"]] != tokens:
        return None, f"{path}: tokens {d['tokens'][:16]} differ from the requested {tokens[:16]}"
    rows = d["logits"]
    if not isinstance(rows, list) or len(rows) != len(tokens):
        n = len(rows) if isinstance(rows, list) else "?"
        return None, f"{path}: {n} logit rows for {len(tokens)} tokens (need one per position)"
    try:
        a = np.array(rows, dtype=np.float64)
    except (ValueError, TypeError):
        return None, f"{path}: logit rows are ragged or not numbers"
    if a.ndim != 2:
        return None, f"{path}: logit rows are ragged or not numbers"
    if not np.all(np.isfinite(a)):
        bad = np.argwhere(~np.isfinite(a))[0]
        return None, f"{path}: non-finite logit at position {bad[0]}, token {bad[1]}"
    return a, None


def run_cachebench(bin_path, model, tokens, out_json, extra, timeout):
    cmd = [bin_path, "forward", "--model", model, "--tokens", ",".join(map(str, tokens)),
           "--dump-logits", out_json] + list(extra)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return f"cannot run {bin_path}"
    except subprocess.TimeoutExpired:
        return f"`{' '.join(cmd)}` timed out after {timeout}s"
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip() or "(no output)").splitlines()[-1]
        return f"`{' '.join(cmd)}` exited with {p.returncode}: {msg}"
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="cachebench logits vs the numpy reference")
    ap.add_argument("--cachebench", help="path to the cachebench binary")
    ap.add_argument("--model", help="GGUF file or Hugging Face directory")
    ap.add_argument("--tokens", help="comma-separated token ids, e.g. 1,2,3")
    ap.add_argument("--tol", type=float, default=1e-4, help="max relative error (default 1e-4)")
    ap.add_argument("--extra-arg", action="append", default=[],
                    help="extra argument appended to `cachebench forward` (repeatable)")
    ap.add_argument("--round-weights", choices=["bf16"],
                    help="round the reference's matrices to this type first (for an engine run "
                         "with --cpu-weights bf16, also pass --extra-arg=--cpu-weights "
                         "--extra-arg=bf16)")
    ap.add_argument("--logits-json", help="compare this existing dump instead of running BIN")
    ap.add_argument("--keep", help="copy the cachebench dump to this path")
    ap.add_argument("--reference-json", help="also write the reference logits here (same format)")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--quiet", action="store_true", help="only the PASS/FAIL line")
    ap.add_argument("--self-test", action="store_true",
                    help="check this script and the reference without the C++ binary")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.model or not a.tokens or not (a.cachebench or a.logits_json):
        ap.print_usage(sys.stderr)
        print("FAIL: need --model, --tokens and --cachebench (or --logits-json)", file=sys.stderr)
        return 2
    tokens = parse_tokens(a.tokens)

    try:
        model = reference.load_model(a.model)
        if a.round_weights == "bf16":
            model = model.with_bf16_matrices()
        ref = model.forward(tokens)
    except (reference.RefError, ValueError, OSError) as e:
        print(f"FAIL: reference could not run on {a.model}: {e}")
        return 1
    if a.reference_json:
        with open(a.reference_json, "w") as f:
            json.dump({"tokens": tokens, "logits": ref.tolist()}, f)

    tmpdir = None
    try:
        if a.logits_json:
            dump = a.logits_json
        else:
            tmpdir = tempfile.mkdtemp(prefix="cb_logits_")
            dump = os.path.join(tmpdir, "logits.json")
            err = run_cachebench(a.cachebench, a.model, tokens, dump, a.extra_arg, a.timeout)
            if err:
                print(f"FAIL: {err}")
                return 1
        got, err = load_dump(dump, tokens)
        if a.keep and os.path.exists(dump):
            shutil.copyfile(dump, a.keep)
    finally:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
    if err:
        print(f"FAIL: {err}")
        return 1
    if got.shape != ref.shape:
        print(f"FAIL: logits shape {got.shape}, reference {ref.shape} (vocab mismatch?)")
        return 1

    m = compare(got, ref)
    if not a.quiet:
        print(f"model     {a.model} ({model.hp.arch}, {m['positions']} positions, "
              f"vocab {m['vocab']})")
        print(f"max_abs   {m['max_abs']:.3e}   (reference |logit| up to {m['ref_logit_scale']:.3g})")
        print(f"max_rel   {m['max_rel']:.3e}   (worst position {m['worst_pos']}; "
              f"per row: max|a-b| / max|ref|)")
        print(f"top-1     {m['top1_agree']}/{m['positions']} agree "
              f"({m['top1_mismatch_not_near_tie']} mismatches not explained by near-ties)")
    ok = m["max_rel"] < a.tol
    if ok:
        print(f"PASS: max_rel {m['max_rel']:.3e} < tol {a.tol:g}")
        return 0
    print(f"FAIL: max_rel {m['max_rel']:.3e} >= tol {a.tol:g} (max_abs {m['max_abs']:.3e}, "
          f"worst position {m['worst_pos']}, top-1 {m['top1_agree']}/{m['positions']})")
    return 1


# --------------------------------------------------------------------------------------
FAKE_BIN = r'''#!{python}
# Stand-in for `cachebench forward`: the reference in float32 (an fp32 engine), optionally
# perturbed (CB_FAKE_NOISE) or broken (CB_FAKE_MODE = crash | badtokens | short | nan).
import json, os, sys
import numpy as np
sys.path.insert(0, {here!r})
import reference
args = sys.argv[1:]
assert args[0] == "forward", args
opt = dict(zip(args[1::2], args[2::2]))
toks = [int(t) for t in opt["--tokens"].split(",")]
mode = os.environ.get("CB_FAKE_MODE", "")
if mode == "crash":
    print("error: simulated failure", file=sys.stderr); sys.exit(3)
lg = reference.load_model(opt["--model"]).forward(toks, dtype=np.float32).astype(np.float64)
noise = float(os.environ.get("CB_FAKE_NOISE", "0"))
if noise:
    lg = lg + noise * np.abs(lg).max() * np.random.default_rng(0).standard_normal(lg.shape)
rows = [[float(v) for v in r] for r in lg]
if mode == "badtokens": toks = toks[::-1]
if mode == "short": rows = rows[:-1]
if mode == "nan": rows[0][0] = float("nan")
with open(opt["--dump-logits"], "w") as f:
    json.dump({{"tokens": toks, "logits": rows}}, f)
'''


def self_test() -> int:
    """No C++ needed: a fake `cachebench` (the reference in float32) must PASS on every tiny
    checkpoint (and stories260K if present); noise and malformed dumps must FAIL."""
    import contextlib
    import io
    import make_tiny_checkpoints as mk

    here = os.path.dirname(os.path.abspath(__file__))
    failures = []
    with tempfile.TemporaryDirectory(prefix="cb_selftest_") as tmp:
        names = mk.write_all(os.path.join(tmp, "models"))
        fake = os.path.join(tmp, "fake_cachebench")
        with open(fake, "w") as f:
            f.write(FAKE_BIN.format(python=sys.executable, here=here))
        os.chmod(fake, 0o755)
        models = [os.path.join(tmp, "models", n) for n in names]
        data = os.environ.get("CACHEBENCH_DATA") or os.path.join(here, "..", "..", "..", "shared")
        s260 = os.path.join(data, "models", "stories260K", "stories260K.gguf")
        if os.path.exists(s260):
            models.append(s260)
        toks = "1,5,17,33,2,90,44,61,7,8,9,10,11,12,13,14,15,16,3,20"

        def run(model, env=None, expect=0, tol="1e-4"):
            old = dict(os.environ)
            os.environ.update(env or {})
            buf = io.StringIO()
            try:
                with contextlib.redirect_stdout(buf):
                    rc = main(["--cachebench", fake, "--model", model, "--tokens", toks,
                               "--tol", tol, "--quiet"])
            finally:
                os.environ.clear()
                os.environ.update(old)
            line = buf.getvalue().strip().splitlines()[-1]
            status = "ok " if rc == expect else "BAD"
            print(f"  {status} rc={rc} (want {expect})  {os.path.basename(model)}"
                  f"{' ' + str(env) if env else ''}: {line}")
            if rc != expect:
                failures.append((model, env))

        print("fp32 fake engine vs float64 reference (expect PASS):")
        for m in models:
            run(m)
        print("broken engines (expect FAIL):")
        base = models[0]
        run(base, {"CB_FAKE_NOISE": "1e-3"}, expect=1)
        for mode in ("crash", "badtokens", "short", "nan"):
            run(base, {"CB_FAKE_MODE": mode}, expect=1)
    print("self-test:", "PASS" if not failures else f"FAIL ({len(failures)} cases)")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
