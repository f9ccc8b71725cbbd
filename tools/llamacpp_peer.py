#!/usr/bin/env python3
"""cachebench's CPU backend against llama.cpp, its peer, on the same files and this machine.

Builds llama.cpp's llama-tokenize, llama-perplexity and llama-bench (CPU, Release) from the
source that the PyPI sdist of llama-cpp-python 0.3.36 vendors (downloaded with `pip download`,
which reads the sdist's metadata through its build backend in an isolated environment; checked
by SHA-256; the package itself is neither built nor installed), then, each tool beside
cachebench's own subcommand:

  tokens      stories260K's vocabulary on a text file: the two id lists must be equal (the
              script exits 1 when the ids, the windows or the PPL, within 1e-4, disagree);
  perplexity  stories260K on the text file, llama.cpp's convention (--ctx 256): PPL and its
              error, and windows per second over the first --chunks windows (wall clock of
              the whole command, loading included);
  speed       LLaMA-2-7B-shaped GGUFs of random weights, 2 of 32 layers (tools/shape_gguf.py),
              one f32 and one bf16: llama-bench's pp512, and its tg16 at a depth of 512,
              against `cachebench bench cpu --cpu-weights f32|bf16 --prompt 512 --decode 16`:
              prefill and decode tokens/s.

Timed runs alternate between the two engines (--reps rounds); each round's ratio (cachebench's
rate over llama.cpp's) is taken, and the median of those ratios is reported with the medians
of the rates. llama.cpp runs --threads threads, cachebench as many (OPENBLAS_NUM_THREADS, which
its own GEMVs follow too).

Usage: tools/llamacpp_peer.py --cachebench BIN [--work DIR] [--data DIR] [--threads N]
           [--reps 3] [--chunks 400] [--out RESULT.json]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

SDIST = "llama_cpp_python-0.3.36.tar.gz"
SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
TOOLS = ("llama-tokenize", "llama-perplexity", "llama-bench")
HERE = pathlib.Path(__file__).resolve().parent


def run(cmd, **kw):
    """Runs cmd, returns (wall seconds, stdout, stderr); a failure prints both and exits."""
    t0 = time.monotonic()
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"llamacpp_peer: {' '.join(map(str, cmd))} exited {p.returncode}\n"
                 f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return wall, p.stdout, p.stderr


def build_llamacpp(work: pathlib.Path, jobs: int) -> pathlib.Path:
    bin_dir = work / "build" / "bin"
    if all((bin_dir / t).exists() for t in TOOLS):
        return bin_dir
    sdist = work / SDIST
    if not sdist.exists():
        run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
             "llama-cpp-python", "llama-cpp-python==0.3.36", "-d", work])
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SHA256:
        sys.exit(f"llamacpp_peer: {sdist} has SHA-256 {digest}, expected {SHA256}; delete it "
                 "and run again")
    top = work / "llama_cpp_python-0.3.36"
    src = top / "vendor" / "llama.cpp"
    if not top.exists():  # extracted aside, then renamed: an interrupted run leaves no half tree
        tmp = work / "extract.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        with tarfile.open(sdist) as tf:
            # The "data" filter (where this Python has it) refuses links and paths that leave
            # the directory; the checksum above already pins what the archive holds.
            if hasattr(tarfile, "data_filter"):
                tf.extractall(tmp, filter="data")
            else:
                tf.extractall(tmp)
        (tmp / top.name).rename(top)
        shutil.rmtree(tmp)
    print("llamacpp_peer: building llama.cpp (CPU, Release)...", file=sys.stderr)
    run(["cmake", "-S", src, "-B", work / "build", "-DCMAKE_BUILD_TYPE=Release",
         "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
         "-DLLAMA_BUILD_SERVER=OFF", "-DGGML_CCACHE=OFF"])
    run(["cmake", "--build", work / "build", "-j", str(jobs), "--target", *TOOLS])
    return bin_dir


def ids_of(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


def compare_tokens(cb, lc, model, text_file):
    with open(text_file) as f:
        _, ours, _ = run([cb, "tokenize", "--model", model, "-"], stdin=f)
    _, theirs, _ = run([lc / "llama-tokenize", "-m", model, "-f", text_file, "--ids",
                        "--log-disable"])
    a, b = ids_of(ours), ids_of(theirs)
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    return {"tokens_cachebench": len(a), "tokens_llamacpp": len(b), "equal": a == b,
            "first_difference": first}


def ppl_llamacpp(lc, model, text_file, ctx, threads, chunks=0):
    cmd = [lc / "llama-perplexity", "-m", model, "-f", text_file, "-c", ctx, "-t", threads]
    if chunks:
        cmd += ["--chunks", chunks]
    # Its log goes through a thread of its own, whose last line ("Final estimate") the exiting
    # process can lose (seen once in five runs here): such a run is run again, up to twice.
    for _ in range(3):
        wall, out, err = run(cmd)
        m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out + err)
        if m:
            break
    if not m:
        sys.exit(f"llamacpp_peer: no 'Final estimate' in llama-perplexity's output, 3 runs:\n"
                 f"{err[-2000:]}")
    n = re.search(r"calculating perplexity over (\d+) chunks", out + err)
    return wall, {"ppl": float(m.group(1)), "ppl_err": float(m.group(2)),
                  "chunks": int(n.group(1)) if n else None}


def ppl_cachebench(cb, model, text_file, ctx, threads, work, chunks=0):
    out = work / "cb-ppl.json"
    cmd = [cb, "perplexity", "--model", model, "--dataset", "text", "--file", text_file,
           "--ctx", ctx, "--out", out]
    if chunks:
        cmd += ["--chunks", chunks]
    wall, _, _ = run(cmd, env=dict(os.environ, OPENBLAS_NUM_THREADS=str(threads)))
    return wall, json.loads(out.read_text())


def llama_bench(lc, model, threads, *args):
    _, out, _ = run([lc / "llama-bench", "-m", model, "-t", threads, "-r", 3, "-o", "json", *args])
    tests = json.loads(out)
    if len(tests) != 1:
        sys.exit(f"llamacpp_peer: llama-bench {' '.join(map(str, args))} gave {len(tests)} tests")
    return tests[0]["avg_ts"]


def bench_pair(cb, lc, model, weights, threads, work, prompt, decode):
    """Prefill and decode tokens/s of both engines on `model`, whose matrices are `weights`
    (f32 or bf16: cachebench's --cpu-weights, llama.cpp's file type)."""
    # Decode after the prompt, as bench cpu decodes: llama-bench's tg at a depth of `prompt`.
    lc_pp = llama_bench(lc, model, threads, "-p", prompt, "-n", 0)
    lc_tg = llama_bench(lc, model, threads, "-p", 0, "-n", decode, "-d", prompt)
    res = work / "cb-bench.json"
    run([cb, "bench", "cpu", "--model", model, "--cpu-weights", weights, "--prompt", prompt,
         "--decode", decode, "--reps", 3, "--out", res],
        env=dict(os.environ, OPENBLAS_NUM_THREADS=str(threads)))
    r = json.loads(res.read_text())
    return {f"prefill_{weights}_tok_s": (r["prefill_tok_s"], lc_pp),
            f"decode_{weights}_tok_s": (r["decode_tok_s"], lc_tg)}


def positive(v: str) -> int:
    if not v.isdigit() or int(v) < 1:
        raise argparse.ArgumentTypeError(f"{v!r} is not a whole number of 1 or more")
    return int(v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cachebench", required=True, help="the cachebench binary")
    ap.add_argument("--work", default="/tmp/llamacpp-peer", help="download and build directory")
    ap.add_argument("--data", default=os.environ.get("CACHEBENCH_DATA", str(HERE.parent.parent /
                                                                            "shared")))
    ap.add_argument("--threads", type=positive, default=os.cpu_count())
    ap.add_argument("--reps", type=positive, default=3)
    ap.add_argument("--chunks", type=positive, default=400)
    ap.add_argument("--out")
    a = ap.parse_args()
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    cb = pathlib.Path(a.cachebench).resolve()
    if not (cb.is_file() and os.access(cb, os.X_OK)):
        sys.exit(f"llamacpp_peer: --cachebench {a.cachebench}: not an executable file; give the "
                 "built binary, e.g. build/apps/cachebench/cachebench")
    data = pathlib.Path(a.data)
    model = data / "models" / "stories260K" / "stories260K.gguf"
    text = data / "data" / "wikitext-2-raw" / "wiki.test.raw"
    vocab = data / "models" / "llamacpp-vocab" / "ggml-vocab-llama-spm.gguf"
    for f in (model, text, vocab):
        if not f.exists():
            sys.exit(f"llamacpp_peer: {f} not found; give --data the directory that holds "
                     "models/ and data/ (../shared)")
    lc = build_llamacpp(work, a.threads)
    result = {"llamacpp": "llama-cpp-python 0.3.36's vendored llama.cpp", "threads": a.threads,
              "reps": a.reps}

    result["tokens"] = compare_tokens(cb, lc, model, text)
    print(f"tokens: {result['tokens']}", file=sys.stderr)

    _, lc_full = ppl_llamacpp(lc, model, text, 256, a.threads)
    _, cb_full = ppl_cachebench(cb, model, text, 256, a.threads, work)
    result["perplexity"] = {"llamacpp": lc_full, "cachebench": cb_full}
    print(f"perplexity: llama.cpp {lc_full}, cachebench {cb_full.get('ppl')}", file=sys.stderr)
    # The two must agree: the same ids, the same windows, PPL within 1e-4 (llama.cpp's printed
    # digits and its fp16 KV cache); a disagreement is reported and the script exits 1.
    ppl_gap = abs(cb_full["ppl"] - lc_full["ppl"]) / lc_full["ppl"]
    result["agree"] = {"tokens": result["tokens"]["equal"],
                       "windows": cb_full.get("chunks") == lc_full["chunks"],
                       "ppl": ppl_gap <= 1e-4, "ppl_relative_gap": ppl_gap}

    shapes = {}
    for weights in ("f32", "bf16"):
        shapes[weights] = work / f"shape-7b-2l-{weights}.gguf"
        if not shapes[weights].exists():
            run([sys.executable, HERE / "shape_gguf.py", shapes[weights], "--type", weights,
                 "--vocab-from", vocab])
    rounds = []
    for i in range(a.reps):
        t_lc, _ = ppl_llamacpp(lc, model, text, 256, a.threads, a.chunks)
        t_cb, _ = ppl_cachebench(cb, model, text, 256, a.threads, work, a.chunks)
        b = {}
        for weights, shape in shapes.items():
            b.update(bench_pair(cb, lc, shape, weights, a.threads, work, 512, 16))
        rounds.append({"ppl_windows_s": (a.chunks / t_cb, a.chunks / t_lc), **b})
        print(f"round {i + 1}: {rounds[-1]}", file=sys.stderr)
    result["rounds"] = rounds
    summary = {}
    for key in rounds[0]:
        ours = [r[key][0] for r in rounds]
        theirs = [r[key][1] for r in rounds]
        summary[key] = {"cachebench": statistics.median(ours), "llamacpp": statistics.median(theirs),
                        "ratio": statistics.median(o / t for o, t in zip(ours, theirs))}
    result["summary"] = summary
    text_out = json.dumps(result, indent=2)
    if a.out:
        pathlib.Path(a.out).write_text(text_out + "\n")
    print(text_out)
    disagree = [k for k, v in result["agree"].items() if v is False]
    if disagree:
        print(f"llamacpp_peer: the engines disagree on {', '.join(disagree)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
