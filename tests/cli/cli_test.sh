#!/usr/bin/env bash
# End-to-end checks of the cachebench binary as a user runs it: help, version, inspect
# and tokenize on the shared models, and malformed inputs (each must exit non-zero with
# one line on stderr naming the file, and never crash or trip a sanitizer).
# Usage: cli_test.sh CACHEBENCH_BINARY SCRATCH_DIR
set -uo pipefail
CB="$1"
TMP="$2"
DATA="${CACHEBENCH_DATA:-$(dirname "$0")/../../../shared}"
mkdir -p "$TMP"
source "$(dirname "$0")/common.sh"

expect_out help "inspect" "$CB" --help
expect_out version "git revision" "$CB" --version
# OpenBLAS's kernels: a user's OPENBLAS_CORETYPE is kept; otherwise, on a CPU with AVX2 and
# FMA (/proc/cpuinfo), never one of the library's pre-AVX2 fallbacks (kernels/cpu/blas_core.h).
expect_out blas_core_user "core Haswell (OPENBLAS_CORETYPE=Haswell)" \
  env OPENBLAS_CORETYPE=Haswell "$CB" --version
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  blas_core=$(env -u OPENBLAS_CORETYPE "$CB" --version | sed -n 's/.*, core \([A-Za-z0-9_]*\).*/\1/p')
  case "$blas_core" in
    Haswell | Zen | SkylakeX | Cooperlake | SapphireRapids | Excavator) ok ;;
    *) bad "blas_core_cpu: the CPU has AVX2 and FMA, and the BLAS runs core '$blas_core'" ;;
  esac
else
  skip=$((skip + 1))
  echo "SKIP blas_core_cpu: the CPU lacks AVX2 or FMA"
fi
expect_out inspect_help "--tensors" "$CB" inspect --help
expect_out preset_7b "6738415616" "$CB" inspect preset:llama-2-7b
expect_out preset_7b_kv "512 KiB per token" "$CB" inspect preset:llama-2-7b
expect_out preset_70b_kv "320 KiB per token" "$CB" inspect preset:llama-2-70b
expect_out preset_falcon_mqa "MQA" "$CB" inspect preset:falcon-7b
expect_out preset_json '"kv_bytes_per_token_fp16": 524288' "$CB" inspect --json preset:llama-2-7b
expect_out preset_tensors "blk.31.ffn_down.weight" "$CB" inspect --tensors preset:llama-2-7b
expect_error unknown_preset "preset:gpt-5" "available presets" "$CB" inspect preset:gpt-5
expect_error missing_file "/no/such.gguf" "no such file" "$CB" inspect /no/such.gguf
expect_error preset_tokenizer "preset:tiny-llama" "no vocabulary" "$CB" tokenize --model preset:tiny-llama hi
# bench cpu on a random preset: prefill, decode and decode attention by both kernels, with its
# same-run baselines, in the table and the JSON.
expect_out bench_cpu "decode attention" "$CB" bench cpu --model preset:tiny-llama --prompt 48 \
  --decode 4 --reps 1 --out "$TMP/bench_cpu.json"
if python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
a = j["decode_attention"]
assert a["ctx"] == 52, a
assert a["threads"] >= 1, a
assert a["kv_bytes"] > 0 and a["sgemm_ms"] > 0 and a["direct_ms"] > 0 and a["read_gbs"] > 0, a
assert j["prefill_to_sgemm"] > 0 and j["decode_ms_per_token"] > 0, j
' "$TMP/bench_cpu.json" 2>"$TMP/err"; then ok; else bad "bench_cpu json: $(tail -c 400 "$TMP/err")"; fi
# With a sliding window (tiny-mistral: 2 layers, KV rows of 2 x 16, window 32) decode attention
# reads the window's 32 slots of K and V per layer: 2 * 32 * 32 * 4 bytes * 2 layers.
expect_ok bench_cpu_window "$CB" bench cpu --model preset:tiny-mistral --prompt 48 --decode 4 \
  --reps 1 --out "$TMP/bench_cpu_window.json"
if python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))["decode_attention"]
assert a["ctx"] == 52 and a["kv_bytes"] == 2 * 32 * 32 * 4 * 2, a
' "$TMP/bench_cpu_window.json" 2>"$TMP/err"; then ok; else bad "bench_cpu window: $(tail -c 400 "$TMP/err")"; fi
# --cpu-weights bf16: the model's matrices in bfloat16; bench cpu names the storage, counts two
# bytes per decode weight, and times one layer's linear layers both ways in the same run.
expect_out bench_cpu_bf16 "bf16 weights" "$CB" bench cpu --model preset:tiny-llama --prompt 48 \
  --decode 4 --reps 1 --cpu-weights bf16 --out "$TMP/bench_cpu_bf16.json"
if python3 -c '
import json, sys
b, f = (json.load(open(p)) for p in sys.argv[1:3])
assert b["weights"] == "bf16" and f["weights"] == "f32", (b["weights"], f["weights"])
assert b["decode_weight_bytes"] * 2 == f["decode_weight_bytes"] > 0, (b["decode_weight_bytes"], f["decode_weight_bytes"])
l = b["linear_f32_vs_bf16"]
assert all(l[k] > 0 for k in ("decode_f32_ms", "decode_bf16_ms", "read_gbs", "prefill_bf16_ms")), l
assert l["prefill_rows"] == 48, l
' "$TMP/bench_cpu_bf16.json" "$TMP/bench_cpu.json" 2>"$TMP/err"; then ok; else bad "bench_cpu bf16 json: $(tail -c 400 "$TMP/err")"; fi
# --decode 0 measures no decode: its rates are absent from the JSON, not 0 tokens/s.
expect_ok bench_cpu_no_decode "$CB" bench cpu --model preset:tiny-llama --prompt 8 --decode 0 \
  --reps 1 --out "$TMP/bench_cpu_nodecode.json"
if python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["decode_tokens"] == 0 and j["prefill_tok_s"] > 0, j
assert j["weights_seed"] == 0, j  # a preset: its weights seed, which gate compares
assert not any(k in j for k in ("decode_tok_s", "decode_ms_per_token", "decode_weight_gbs", "decode_sgemm_gflops")), j
' "$TMP/bench_cpu_nodecode.json" 2>"$TMP/err"; then ok; else bad "bench_cpu --decode 0 json: $(tail -c 400 "$TMP/err")"; fi
# bench cpu runs token ids: a tokenizer would be loaded for nothing (and never checked).
expect_usage_error bench_cpu_tokenizer --tokenizer "has no effect on bench cpu" \
  "$CB" bench cpu --model preset:tiny-llama --prompt 8 --decode 1 --reps 1 --tokenizer x.model
expect_error cpu_weights_with_cuda "--cpu-weights" "--backend cpu" "$CB" forward -m preset:tiny-llama \
  --tokens 1,2 --cpu-weights bf16 --backend cuda
expect_error cpu_weights_ablate_sim "--cpu-weights" "sim mode" "$CB" ablate preload --cpu-weights bf16
expect_error gpu_ablate_sim "--gpu" "sim mode" "$CB" ablate preload --gpu 1
expect_error gpu_storage_ablate_sim "--gpu-storage" "sim mode" "$CB" ablate preload --gpu-storage bf16
# And the GPU's options with --backend cpu, which would ignore them (a typo'd --backend cuda).
expect_error gpu_with_cpu "--gpu" "has no effect with --backend cpu" "$CB" forward -m preset:tiny-llama \
  --tokens 1,2 --backend cpu --gpu 3
expect_error gpu_storage_with_cpu "--gpu-storage" "has no effect with --backend cpu" "$CB" generate \
  -m preset:tiny-llama --backend cpu --gpu-storage bf16 --prompt x
# With --backend auto on the CPU (here: --cpu-weights bf16 asks for it, on any machine) the GPU's
# options are ignored, and a note on stderr says so; the run itself goes on.
if "$CB" forward -m preset:tiny-llama --tokens 1,2 --cpu-weights bf16 --gpu-storage bf16 \
  >"$TMP/out" 2>"$TMP/err" && grep -qF -- "--gpu-storage is ignored: --backend auto runs on the CPU (--cpu-weights bf16" "$TMP/err" \
  && ! grep -qF -- "--gpu is ignored" "$TMP/err"; then ok; else bad "auto_gpu_note: $(head -c 400 "$TMP/err")"; fi
if "$CB" inspect >/dev/null 2>&1; then bad "inspect without MODEL exits 0"; else ok; fi
if "$CB" frobnicate >/dev/null 2>&1; then bad "unknown subcommand exits 0"; else ok; fi

STORIES="$DATA/models/stories260K/stories260K.gguf"
LLAMA_TOK="$DATA/models/tokenizers/llama2-tokenizer.model"
FALCON_VOCAB="$DATA/models/llamacpp-vocab/ggml-vocab-falcon.gguf"
if [ -f "$STORIES" ] && [ -f "$LLAMA_TOK" ] && [ -f "$FALCON_VOCAB" ]; then
  js=$("$CB" inspect --json "$STORIES")
  for kv in '"architecture": "llama"' '"n_layers": 5' '"hidden": 64' '"n_heads": 8' '"n_kv_heads": 4' \
            '"head_dim": 8' '"ffn_hidden": 172' '"vocab_size": 512'; do
    if grep -qF -- "$kv" <<<"$js"; then ok; else bad "stories260K json lacks $kv"; fi
  done
  expect_out stories_tokens "1 403 407 261 378" "$CB" tokenize --model "$STORIES" "Once upon a time"
: >"$TMP/empty_tok.txt"
  expect_error tokenizer_not_one "$TMP/empty_tok.txt" "is not a tokenizer file" \
    "$CB" tokenize --tokenizer "$TMP/empty_tok.txt" hi
  expect_usage_error weights_seed_file --weights-seed "seeds a preset's random weights" \
    "$CB" generate -m "$STORIES" -p hi -n 2 --weights-seed 4
  expect_usage_error weights_seed_file_bench --weights-seed "seeds a preset's random weights" \
    "$CB" bench cpu -m "$STORIES" --weights-seed 4
  # A text shorter than one window: a --ctx error in every convention, with the --ctx to use.
  printf 'Once upon a time there was a dog' >"$TMP/short.txt"
  expect_usage_error ppl_gptq_short --ctx "64 tokens make one window, and the text has" \
    "$CB" perplexity -m "$STORIES" --file "$TMP/short.txt" --ctx 64 --convention gptq
  # A result written to /dev/stdout is alone there (the table goes to stderr): it parses, and
  # records the revision and backend as every result does.
  if "$CB" forward --model "$STORIES" --tokens 1,403 --dump-logits /dev/stdout 2>/dev/null \
    | python3 -c "import json,sys; d=json.load(sys.stdin); assert d['git'] and d['backend'] and d['mode'] == 'real'" 2>/dev/null; then ok
  else bad "forward --dump-logits /dev/stdout is not JSON alone, or lacks git/backend/mode"; fi
  # A file-size limit is a write error naming the file (exit 1), no temporary left behind.
  mkdir -p "$TMP/fsz"
  (ulimit -f 8; "$CB" forward --model "$STORIES" --text "Once upon a time there was" \
    --dump-logits "$TMP/fsz/logits.json") >/dev/null 2>"$TMP/err"
  rc=$?
  if [ $rc -eq 1 ] && grep -qF "$TMP/fsz/logits.json" "$TMP/err" && [ -z "$(ls -A "$TMP/fsz")" ]; then ok
  else bad "forward under ulimit -f: rc=$rc, left: $(ls "$TMP/fsz"), $(head -c 300 "$TMP/err")"; fi
  expect_out stories_decode "Once upon a time" "$CB" tokenize --model "$STORIES" --decode "1 403 407 261 378"
  # A decoded NUL byte (<0x00>, id 3) is printed as one, with the text after it.
  if [ "$("$CB" tokenize --model "$STORIES" --decode "400,3,400" | od -An -c | tr -s ' ')" = " d o \0 d o \n" ]; then ok
  else bad "tokenize --decode with a NUL byte: $("$CB" tokenize --model "$STORIES" --decode "400,3,400" | od -An -c)"; fi
  expect_out llama_hello "15043 3186" "$CB" tokenize --tokenizer "$LLAMA_TOK" --no-bos "Hello world"
  expect_out llama_bos "1 15043 3186" "$CB" tokenize --tokenizer "$LLAMA_TOK" "Hello world"
  expect_out falcon_vocab "MQA" "$CB" inspect "$FALCON_VOCAB"
  expect_ok falcon_tokenize "$CB" tokenize --model "$FALCON_VOCAB" "Hello world"
  expect_error bad_ids "--decode" "not a token id" "$CB" tokenize --model "$STORIES" --decode "1 99999"
  expect_error decode_no_ids "--decode" "no token ids given" "$CB" tokenize --model "$STORIES" --decode ""
  expect_out decode_json_list "Once upon a time" "$CB" tokenize --model "$STORIES" --decode "[1, 403, 407, 261, 378]"
  expect_error decode_list_empty_item "--decode" "empty item at character 6" \
    "$CB" tokenize --model "$STORIES" --decode "[403,,407]"
  expect_error decode_list_trailing_comma "--decode" "ends with a comma" \
    "$CB" tokenize --model "$STORIES" --decode "[403,407,]"
  # Text in brackets is text (CLI11 would read "[a,b]" given to a list option as a, b).
  if [ "$("$CB" tokenize --model "$STORIES" --pieces "[a,b]" 2>/dev/null | grep -c ',')" = 1 ]; then ok
  else bad "tokenize of bracketed text lost its comma"; fi
  expect_error tokenize_unknown_option "tokenize" "unknown option --pices" \
    "$CB" tokenize --model "$STORIES" --pices hi
  # TEXT keeps its words in order, and -- before it is dropped (sentencepiece: "-x" is 448 29916
  # after BOS; the extras used to be appended, "-x --").
  if [ "$("$CB" tokenize --tokenizer "$LLAMA_TOK" -- -x 2>/dev/null)" = "1 448 29916" ]; then ok
  else bad "tokenize -- -x: $("$CB" tokenize --tokenizer "$LLAMA_TOK" -- -x 2>&1)"; fi
  if [ "$("$CB" tokenize --tokenizer "$LLAMA_TOK" y -x z 2>/dev/null)" = \
       "$("$CB" tokenize --tokenizer "$LLAMA_TOK" "y -x z" 2>/dev/null)" ]; then ok
  else bad "tokenize y -x z reordered its words: $("$CB" tokenize --tokenizer "$LLAMA_TOK" y -x z 2>&1)"; fi
  expect_error tokenize_dash_first "tokenize" "put -- before it" \
    "$CB" tokenize --tokenizer "$LLAMA_TOK" -x y
  expect_error tokenize_option_after_text "tokenize" "--pieces comes after TEXT" \
    "$CB" tokenize --tokenizer "$LLAMA_TOK" "hello world" --pieces
  # Both are usage errors, exit 2 as CLI11's own (TEXT being a prefix command, CLI11 lets them by).
  for args in "--pices hi" "hi --pieces"; do
    # shellcheck disable=SC2086
    "$CB" tokenize --tokenizer "$LLAMA_TOK" $args >/dev/null 2>&1
    rc=$?
    if [ $rc -eq 2 ]; then ok; else bad "tokenize $args: exit $rc, wanted 2"; fi
  done
  expect_error tokens_empty "--tokens" "no token ids given" "$CB" forward -m "$STORIES" --tokens ""
  expect_error tokens_trailing_comma "--tokens" "ends with a comma" "$CB" forward -m "$STORIES" --tokens 1,2,
  expect_error tokens_empty_item "--tokens" "empty item at character 3" "$CB" forward -m "$STORIES" --tokens 1,,2
  expect_error tokens_negative "--tokens" "'-1' is not a token id" "$CB" forward -m "$STORIES" --tokens 1,-1
  expect_out forward_bf16 "backend cpu bf16" "$CB" forward -m "$STORIES" --tokens 1,403,407 \
    --cpu-weights bf16
  # Weights holding NaN (the file's last 4 KiB of tensor data): non-finite logits are an error,
  # and no logits file is written.
  python3 -c '
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[-4096:] = b"\x00\x00\xc0\x7f" * 1024
open(sys.argv[2], "wb").write(b)
' "$STORIES" "$TMP/nan_weights.gguf"
  rm -f "$TMP/nan_logits.json"
  expect_error forward_nan_logits "forward" "not finite" "$CB" forward -m "$TMP/nan_weights.gguf" \
    --tokens 1,403,407 --dump-logits "$TMP/nan_logits.json"
  if [ -e "$TMP/nan_logits.json" ]; then bad "forward_nan_logits wrote $TMP/nan_logits.json"; else ok; fi
  # --backend cuda: the GPU's logits where a GPU is usable; elsewhere one line naming the
  # option and the way out (no CUDA in this build, or no GPU visible).
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    expect_out forward_cuda "backend cuda f16" "$CB" forward -m "$STORIES" --tokens 1,403,407 --backend cuda
    # A GPU calibration needs a model whose compute shows through the launch overheads:
    # stories260K's step time does not grow with its work on a GPU, so a 7B preset.
    expect_out calibrate_cuda "(cuda f16)" "$CB" calibrate -m preset:llama-7b --ctx 512 --backend cuda \
      --reps 2 --ssd-dir "" --out "$TMP/gpu_profile.json"
  else
    expect_error forward_cuda_without_gpu "--backend cuda" "--backend cpu" "$CB" forward -m "$STORIES" \
      --tokens 1,403,407 --backend cuda
    expect_error calibrate_cuda_without_gpu "--backend cuda" "--backend cpu" "$CB" calibrate -m "$STORIES" \
      --backend cuda --out "$TMP/gpu_profile.json"
  fi
  # PIQA on either backend: fp32 on the GPU picks the CPU's answers; the overflow study of
  # mmlu stays on the CPU (an explicit --backend cuda is refused).
  PIQA="$DATA/data/piqa"
  if [ -f "$PIQA/valid.jsonl" ]; then
    expect_out piqa_cpu "| 20 |" "$CB" piqa -m "$STORIES" --data "$PIQA" --limit 20 --backend cpu \
      --out "$TMP/piqa_cpu.json"
    expect_git piqa_cpu_git "$TMP/piqa_cpu.json"
    # A UTF-8 BOM before the first label is skipped, as in the JSON lines.
    mkdir -p "$TMP/piqa_bom"
    head -n 2 "$PIQA/valid.jsonl" >"$TMP/piqa_bom/valid.jsonl"
    { printf '\xef\xbb\xbf'; head -n 2 "$PIQA/valid-labels.lst"; } >"$TMP/piqa_bom/valid-labels.lst"
    expect_out piqa_labels_bom "| 2 |" "$CB" piqa -m "$STORIES" --data "$TMP/piqa_bom" --backend cpu
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
      expect_out piqa_cuda "| 20 |" "$CB" piqa -m "$STORIES" --data "$PIQA" --limit 20 --backend cuda \
        --gpu-storage f32 --out "$TMP/piqa_gpu.json"
      if python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); \
sys.exit(0 if a['acc'] == b['acc'] and a['acc_norm'] == b['acc_norm'] else 1)" "$TMP/piqa_cpu.json" "$TMP/piqa_gpu.json"; then
        ok
      else
        bad "piqa: GPU f32 accuracy differs from the CPU's"
      fi
    else
      expect_error piqa_cuda_without_gpu "--backend cuda" "--backend cpu" "$CB" piqa -m "$STORIES" \
        --data "$PIQA" --limit 20 --backend cuda
    fi
  fi
  expect_error mmlu_overflow_cuda "--method ca" "CPU backend only" "$CB" mmlu -m "$STORIES" \
    --data "$DATA/data/mmlu" --method ca --backend cuda
  expect_error mmlu_overflow_bos "--bos" "applies to --method none only" "$CB" mmlu -m "$STORIES" \
    --data "$DATA/data/mmlu" --method ca --bos no
  if [ -d "$DATA/data/mmlu/test" ]; then
    expect_out mmlu_out "abstract_algebra" "$CB" mmlu -m "$STORIES" --data "$DATA/data/mmlu" \
      --subjects abstract_algebra --limit 4 --shots 1 --backend cpu --out "$TMP/mmlu.json"
    expect_git mmlu_out_git "$TMP/mmlu.json"
    # An output that is one of the files --data DIR reads is refused, and the file kept.
    mkdir -p "$TMP/mm/test" "$TMP/mm/dev"
    cp "$DATA/data/mmlu/test/anatomy_test.csv" "$TMP/mm/test/"
    cp "$DATA/data/mmlu/dev/anatomy_dev.csv" "$TMP/mm/dev/"
    chmod -R u+w "$TMP/mm"  # copies of read-only data: an output over them is refused as such
    expect_error mmlu_out_over_data "$TMP/mm/test/anatomy_test.csv" "directory given to --data" \
      "$CB" mmlu -m "$STORIES" --data "$TMP/mm" --subjects anatomy --limit 1 --backend cpu \
      --out "$TMP/mm/test/anatomy_test.csv"
    if cmp -s "$DATA/data/mmlu/test/anatomy_test.csv" "$TMP/mm/test/anatomy_test.csv"; then ok
    else bad "mmlu --out over its data changed the file"; fi
    # A new file there is refused too (a rerun would otherwise meet it as an existing one).
    expect_error mmlu_out_in_data "$TMP/mm/r.json" "directory given to --data" \
      "$CB" mmlu -m "$STORIES" --data "$TMP/mm" --subjects anatomy --limit 1 --backend cpu \
      --out "$TMP/mm/r.json"
    if [ -e "$TMP/mm/r.json" ]; then bad "mmlu --out in its data dir wrote $TMP/mm/r.json"; else ok; fi
    # Zero-shot reads no dev file: a folder without one runs.
    mkdir -p "$TMP/mm0/test" "$TMP/mm0/dev"
    cp "$DATA/data/mmlu/test/anatomy_test.csv" "$TMP/mm0/test/"
    expect_out mmlu_zero_shot_no_dev "/1 correct" "$CB" mmlu -m "$STORIES" --data "$TMP/mm0" \
      --limit 1 --shots 0 --backend cpu
    expect_error mmlu_shots_no_dev "$TMP/mm0/dev/anatomy_dev.csv" "missing dev file" \
      "$CB" mmlu -m "$STORIES" --data "$TMP/mm0" --limit 1 --shots 1 --backend cpu
    # Few-shot without a dev/ folder names it.
    mkdir -p "$TMP/mmnd/test"
    cp "$DATA/data/mmlu/test/anatomy_test.csv" "$TMP/mmnd/test/"
    expect_error mmlu_shots_no_dev_folder "$TMP/mmnd/dev" "no dev/ folder" \
      "$CB" mmlu -m "$STORIES" --data "$TMP/mmnd" --limit 1 --shots 1 --backend cpu
    # A subject short of --shots dev questions stops the run before anatomy is scored (one
    # line on stderr, no "mmlu ...: N questions" before it), naming its dev file.
    mkdir -p "$TMP/mml/test" "$TMP/mml/dev"
    cp "$DATA/data/mmlu/test/anatomy_test.csv" "$TMP/mml/test/"
    cp "$DATA/data/mmlu/dev/anatomy_dev.csv" "$TMP/mml/dev/"
    printf 'question,choice0,choice1,choice2,choice3,answer\nQ,a,b,c,d,1\n' >"$TMP/mml/test/zz_test.csv"
    cp "$TMP/mml/test/zz_test.csv" "$TMP/mml/dev/zz_dev.csv"
    expect_error mmlu_shots_short_dev "$TMP/mml/dev/zz_dev.csv" "subject zz has 1 dev question" \
      "$CB" mmlu -m "$STORIES" --data "$TMP/mml" --limit 1 --shots 2 --backend cpu
    # A CSV that is not UTF-8 text is refused naming its file and line, as other text inputs.
    printf 'Q,a,b,c,d,A\nCaf\xe9?,a,b,c,d,B\n' >"$TMP/mml/test/zz_test.csv"
    expect_error mmlu_not_utf8 "$TMP/mml/test/zz_test.csv:2" "not UTF-8 text: byte 0xE9" \
      "$CB" mmlu -m "$STORIES" --data "$TMP/mml" --limit 1 --shots 0 --backend cpu
    # The JSON's provenance names the files read, whatever their names.
    mkdir -p "$TMP/mmn/test" "$TMP/mmn/dev"
    cp "$DATA/data/mmlu/test/anatomy_test.csv" "$TMP/mmn/test/anatomy.csv"
    cp "$DATA/data/mmlu/dev/anatomy_dev.csv" "$TMP/mmn/dev/anatomy.csv"
    "$CB" mmlu -m "$STORIES" --data "$TMP/mmn" --limit 1 --shots 1 --backend cpu \
      --out "$TMP/mmn.json" >/dev/null 2>&1
    if python3 -c "import json,sys; f=json.load(open(sys.argv[1]))['files_sha256']; \
sys.exit(0 if sorted(f)==[sys.argv[2]+'/dev/anatomy.csv', sys.argv[2]+'/test/anatomy.csv'] else 1)" \
      "$TMP/mmn.json" "$TMP/mmn" 2>/dev/null; then ok
    else bad "mmlu --out: files_sha256 does not name the files read"; fi
    : >"$TMP/emptyhist.txt"
    expect_error mmlu_empty_history "$TMP/emptyhist.txt" "is empty" "$CB" mmlu -m "$STORIES" \
      --data "$DATA/data/mmlu" --method ca --history-file "$TMP/emptyhist.txt" --ctx 64
    # A history that is not text is refused, as perplexity refuses such a file.
    head -c 3000 "$STORIES" >"$TMP/binhist.bin"
    expect_error mmlu_binary_history "$TMP/binhist.bin" "not UTF-8 text" "$CB" mmlu -m "$STORIES" \
      --data "$TMP/mmn" --method ca --history-file "$TMP/binhist.bin" --ctx 64 --limit 1
  fi
  # lm-eval's wikitext task keeps whole articles under --max-tokens; the JSON's `tokens` still
  # counts every article's (as on every other path), `tokens_used` the kept ones'.
  WT="$DATA/data/wikitext-2-raw/wiki.test.raw"
  if [ -f "$WT" ]; then
    # SIGTERM (or Ctrl-C) stops an evaluation with one message and exit 128 + 15, its progress
    # line ended and no result written (it used to die by the signal, silently).
    "$CB" perplexity -m "$STORIES" --dataset wikitext2-raw --file "$WT" --ctx 128 --backend cpu \
      --out "$TMP/ppl_int.json" >/dev/null 2>"$TMP/ppl_int.err" &
    pid=$!
    for _ in $(seq 300); do  # until it reports its first chunk (its handlers are in place)
      grep -q "chunk" "$TMP/ppl_int.err" 2>/dev/null && break
      sleep 0.1
    done
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    if [ $rc -eq 143 ] && grep -q "^cachebench: error: SIGTERM: interrupted" "$TMP/ppl_int.err" \
      && [ ! -e "$TMP/ppl_int.json" ]; then ok
    else bad "perplexity on SIGTERM: rc=$rc $(tail -c 300 "$TMP/ppl_int.err")"; fi
    "$CB" perplexity -m "$STORIES" --convention lm-eval --dataset wikitext2-raw --file "$WT" \
      --ctx 256 --max-tokens 12000 --backend cpu --out "$TMP/wk.json" >/dev/null 2>&1
    if python3 -c "import json,sys; j=json.load(open(sys.argv[1])); \
sys.exit(0 if 0 < j['tokens_used'] <= 12000 < j['tokens'] and j['documents'] < j['articles_in_file'] else 1)" \
      "$TMP/wk.json" 2>/dev/null; then ok
    else bad "perplexity lm-eval wikitext: tokens is not the whole file's count"; fi
  fi
  # The overflow study (TT, CA, NKVT in lockstep) on either backend: fp32 on the GPU gives the
  # CPU's perplexities (NKVT reads and rewrites the rotated KV on the device).
  TS="$DATA/data/tinystories/tinystories_val_part1.txt"
  if [ -f "$TS" ]; then
    expect_out overflow_cpu "| NKVT |" "$CB" perplexity -m "$STORIES" --dataset text --file "$TS" \
      --method all --ctx 64 --max-tokens 300 --backend cpu --out "$TMP/ov_cpu.json"
    expect_git overflow_cpu_git "$TMP/ov_cpu.json"
    # The JSON and the table say how much of the file the methods ran over.
    if python3 -c "import json,sys; j=json.load(open(sys.argv[1])); \
sys.exit(0 if j['tokens_used']==300==j['max_tokens'] and j['tokens']>300 and j['dropped_tokens']==32 else 1)" \
      "$TMP/ov_cpu.json"; then ok
    else bad "overflow study: JSON lacks the streamed token count"; fi
    # The shortest text the study takes is --ctx + 2 tokens; the error says so.
    "$CB" perplexity -m "$STORIES" --dataset text --file "$TS" --method ca --ctx 64 \
      --max-tokens 65 --backend cpu >/dev/null 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 2 ] && grep -qF "max-tokens keeps 65 tokens of the text's" "$TMP/err" \
      && grep -qF "; it needs at least 66 (--ctx 64 + 2)" "$TMP/err"; then ok
    else bad "overflow study on a too short text: rc=$rc, $(head -c 300 "$TMP/err")"; fi
    expect_out overflow_dropped "first 300 of its" "$CB" perplexity -m "$STORIES" --dataset text \
      --file "$TS" --method ca --ctx 64 --truncate-ratio 0.33 --max-tokens 300 --backend cpu
    expect_out overflow_dropped_count "21 of them dropped" "$CB" perplexity -m "$STORIES" \
      --dataset text --file "$TS" --method ca --ctx 64 --truncate-ratio 0.33 --max-tokens 300 \
      --backend cpu
    expect_error overflow_chunks "--chunks" "does not apply to the overflow study" "$CB" \
      perplexity -m "$STORIES" --dataset text --file "$TS" --method all --ctx 64 --chunks 2
    # CA alone recomputes nothing: its summary says no word of TT's recompute.
    expect_out overflow_ca_alone "one forward call per step (CA recomputes nothing);" \
      "$CB" perplexity -m "$STORIES" --dataset text --file "$TS" --method ca --ctx 64 \
      --max-tokens 100 --backend cpu
    expect_out ppl_out "| llama.cpp | 64 | 2 |" "$CB" perplexity -m "$STORIES" --dataset text --file "$TS" \
      --ctx 64 --chunks 2 --backend cpu --out "$TMP/ppl_cpu.json"
    expect_git ppl_out_git "$TMP/ppl_cpu.json"
    # As llama.cpp's -f, the llama.cpp convention drops one trailing newline: a file with one
    # scores as the same file without it (tokens and perplexity alike).
    printf '%s' "$(head -c 3000 "$TS" | sed '$d')" >"$TMP/nl0.txt"
    printf '\n' | cat "$TMP/nl0.txt" - >"$TMP/nl1.txt"
    for f in nl0 nl1; do
      "$CB" perplexity -m "$STORIES" --file "$TMP/$f.txt" --ctx 64 --backend cpu \
        --out "$TMP/$f.json" >/dev/null 2>&1
    done
    if python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:3]); \
sys.exit(0 if (a['tokens'],a['ppl'])==(b['tokens'],b['ppl']) and a['tokens']>0 else 1)" \
      "$TMP/nl0.json" "$TMP/nl1.json" 2>/dev/null; then ok
    else bad "perplexity llama.cpp: a trailing newline changed the result"; fi
    expect_out ppl_lm_eval_out "PPL" "$CB" perplexity -m "$STORIES" --dataset text --file "$TS" \
      --ctx 64 --max-tokens 300 --convention lm-eval --backend cpu --out "$TMP/ppl_lm_eval.json"
    expect_git ppl_lm_eval_out_git "$TMP/ppl_lm_eval.json"
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
      expect_out overflow_cuda "| NKVT |" "$CB" perplexity -m "$STORIES" --dataset text --file "$TS" \
        --method all --ctx 64 --max-tokens 300 --backend cuda --gpu-storage f32 --out "$TMP/ov_gpu.json"
      if python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['results']; b=json.load(open(sys.argv[2]))['results']; \
sys.exit(0 if all(abs(x['ppl'] - y['ppl']) <= 1e-3 * x['ppl'] for x, y in zip(a, b)) and len(a) == 3 == len(b) else 1)" \
        "$TMP/ov_cpu.json" "$TMP/ov_gpu.json"; then
        ok
      else
        bad "overflow study: GPU f32 perplexities differ from the CPU's"
      fi
    else
      expect_error overflow_cuda_without_gpu "--backend cuda" "--backend cpu" "$CB" perplexity \
        -m "$STORIES" --dataset text --file "$TS" --method all --ctx 64 --backend cuda
    fi
  fi
  # `bench gpu`: without a GPU, or in a build without the CUDA backend, one line says so.
  if "$CB" --version | grep -qE "CUDA: +off"; then
    expect_error bench_gpu_without_cuda "bench gpu" "no CUDA backend" "$CB" bench gpu --reps 1
  elif ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
    expect_error bench_gpu_without_gpu "bench gpu" "no CUDA GPU" "$CB" bench gpu --reps 1
    expect_error bench_gpu_no_opt_ins_without_gpu "bench gpu" "no CUDA GPU" \
      "$CB" bench gpu --reps 1 --no-opt-ins
  fi
  # `bench gpu --report`: a saved result's tables and targets in any build, no GPU needed.
  SAVED="$(dirname "$0")/../../results/gpu/bench-gpu-h100-2026-11-27.json"
  expect_out bench_gpu_report "| decode | preset:llama-2-13b | default |" "$CB" bench gpu --report "$SAVED"
  expect_out bench_gpu_report_alternatives "| prefill | preset:llama-2-7b | FlashAttention-2-style attention |" \
    "$CB" bench gpu --report "$SAVED"
  # Results since the fused paths became the default: the previous default and each fused path
  # turned off alone are the alternatives; every saved result, of every schema, renders.
  CURRENT="$(dirname "$0")/../../results/gpu/bench-gpu-h200-2026-11-27.json"
  expect_out bench_gpu_report_previous_default "| decode | preset:llama-2-7b | previous default |" \
    "$CB" bench gpu --report "$CURRENT"
  expect_out bench_gpu_report_columns "| CUDA-core decode attention | no launch fusions |" \
    "$CB" bench gpu --report "$CURRENT"
  for saved in "$(dirname "$0")"/../../results/gpu/bench-gpu-*.json; do
    expect_ok "bench_gpu_report_$(basename "$saved" .json)" "$CB" bench gpu --report "$saved"
  done
  printf 'not json' >"$TMP/bad_bench.json"
  expect_error bench_gpu_report_not_json "$TMP/bad_bench.json" "not valid JSON" "$CB" bench gpu --report "$TMP/bad_bench.json"
  printf '{"models": [{"model": "m", "parameters": 7e9, "prefill": [{"prompt": 2048, "prefix": 0}]}]}' >"$TMP/bad_bench.json"
  expect_error bench_gpu_report_no_ratio "$TMP/bad_bench.json" "ratio_to_gemm_ceiling" "$CB" bench gpu --report "$TMP/bad_bench.json"
  printf '{"models": [], "kv": []}' >"$TMP/bad_bench.json"
  expect_error bench_gpu_report_incomplete "$TMP/bad_bench.json" "not a complete" "$CB" bench gpu --report "$TMP/bad_bench.json"
  expect_error bench_gpu_report_missing "$TMP/no_such_bench.json" "cannot be opened" "$CB" bench gpu --report "$TMP/no_such_bench.json"
  expect_error bench_gpu_report_dir "$TMP" "is a directory" "$CB" bench gpu --report "$TMP"
  expect_error bench_gpu_report_empty "--report" "empty path" "$CB" bench gpu --report ""
  printf '{"models": [], "a": 1e400}' >"$TMP/bad_bench.json"  # beyond a double
  expect_error bench_gpu_report_overflow "$TMP/bad_bench.json" "not valid JSON" "$CB" bench gpu --report "$TMP/bad_bench.json"
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); j['reps']=1e300; json.dump(j, open(sys.argv[2], 'w'))" \
    "$SAVED" "$TMP/bad_bench.json"
  expect_error bench_gpu_report_float_reps "$TMP/bad_bench.json" "must be an integer" "$CB" bench gpu --report "$TMP/bad_bench.json"
  # Values no measurement gives: repetitions below 1, a copy ceiling of 0.
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); j['reps']=-3; json.dump(j, open(sys.argv[2], 'w'))" \
    "$SAVED" "$TMP/bad_bench.json"
  expect_error bench_gpu_report_negative_reps "$TMP/bad_bench.json" "'reps' must be above 0" "$CB" bench gpu --report "$TMP/bad_bench.json"
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); j['ceilings']['d2d_gbs_read_plus_write']=0; json.dump(j, open(sys.argv[2], 'w'))" \
    "$SAVED" "$TMP/bad_bench.json"
  expect_error bench_gpu_report_zero_ceiling "$TMP/bad_bench.json" "'d2d_gbs_read_plus_write' must be above 0" "$CB" bench gpu --report "$TMP/bad_bench.json"
  "$CB" bench gpu --report "$SAVED" --reps 3 >/dev/null 2>&1
  if [ $? -ne 0 ]; then ok; else bad "bench gpu --report with --reps: accepted a measuring option"; fi

  # Sampling: by definition top-k 1, top-p 0.01 and min-p 1 leave only the likeliest token, so
  # at any temperature they generate the greedy text; a seed gives the same sampled text.
  gen() { "$CB" generate -m "$STORIES" --backend cpu -p "Once upon a time" -n 48 "$@" 2>/dev/null; }
  greedy=$(gen)
  for narrow in "--top-k 1" "--top-p 0.01" "--min-p 1"; do
    # shellcheck disable=SC2086
    if [ -n "$greedy" ] && [ "$(gen --temperature 5 --seed 9 $narrow)" = "$greedy" ]; then ok
    else bad "generate $narrow at temperature 5 is not the greedy text"; fi
  done
  s1=$(gen --temperature 0.9 --top-k 40 --top-p 0.95 --min-p 0.02 --repeat-penalty 1.1 --seed 5)
  s2=$(gen --temperature 0.9 --top-k 40 --top-p 0.95 --min-p 0.02 --repeat-penalty 1.1 --seed 5)
  if [ -n "$s1" ] && [ "$s1" = "$s2" ]; then ok; else bad "generate: one seed, two texts"; fi
  # ...and sampling does sample: at temperature 0.9 over 48 tokens, two seeds and greedy all
  # agreeing would mean the options were ignored.
  s3=$(gen --temperature 0.9 --top-k 40 --top-p 0.95 --min-p 0.02 --repeat-penalty 1.1 --seed 6)
  if [ "$s1" != "$greedy" ] && [ "$s3" != "$s1" ]; then ok; else bad "generate: sampled text is greedy's or one seed's"; fi
  # --out: the text printed, the ids generated (48 of them, 47 decode steps after the prefill
  # with --ignore-eos), the sampling options; gate compares two such runs.
  gen --ignore-eos --out "$TMP/gen.json" > "$TMP/gen.txt"
  if GREEDY="$(cat "$TMP/gen.txt")" python3 -c "
import json, os, sys
d = json.load(open(sys.argv[1]))
assert d['task'] == 'generate' and d['mode'] == 'real' and d['git'] and d['backend'] == 'cpu'
assert d['text'] == os.environ['GREEDY'], d['text']
assert d['generated_tokens'] == 48 and len(d['tokens']) == 48 and d['decode_steps'] == 47
assert not d['stopped_at_eos'] and d['sampling']['temperature'] == 0
assert d['prefill_tok_s'] > 0 and d['decode_tok_s'] > 0
" "$TMP/gen.json"; then ok; else bad "generate --out: $(head -c 400 "$TMP/gen.json")"; fi
  if "$CB" gate --baseline "$TMP/gen.json" --current "$TMP/gen.json" \
      --max-regression decode_tok_s=50 >/dev/null 2>&1; then ok
  else bad "gate of a generate result against itself failed"; fi
  chat_out() {
    printf 'Once upon a time\nThe cat\n/quit\n' | "$CB" chat -m "$STORIES" --backend cpu \
      --max-tokens 16 "$@" 2>/dev/null | sed 's/TTFT [0-9.]* ms//'
  }
  c0=$(chat_out)
  if [ -n "$c0" ] && [ "$(chat_out --temperature 3 --top-k 1 --seed 2)" = "$c0" ]; then ok
  else bad "chat --top-k 1 at temperature 3 is not the greedy conversation"; fi
  c1=$(chat_out --temperature 1 --top-p 0.9 --repeat-penalty 1.2 --seed 4)
  if [ -n "$c1" ] && [ "$(chat_out --temperature 1 --top-p 0.9 --repeat-penalty 1.2 --seed 4)" = "$c1" ]; then ok
  else bad "chat: one seed, two conversations"; fi
  if [ "$c1" != "$c0" ]; then ok; else bad "chat: the sampled conversation is the greedy one (options ignored?)"; fi
  # /reset starts over as a new chat does, sampling from --seed again: the same answer twice.
  printf 'Once upon a time\n/reset\nOnce upon a time\n/quit\n' | "$CB" chat -m "$STORIES" \
    --backend cpu --max-tokens 16 --temperature 1 --top-p 0.9 --seed 4 2>/dev/null \
    | sed 's/TTFT [0-9.]* ms//' >"$TMP/chatreset"
  if python3 -c "
import sys
t = open(sys.argv[1]).read()
a, b = t.split('(conversation reset)')
assert a.strip('> \n') and a.strip('> \n') == b.strip('> \n'), (a, b)
" "$TMP/chatreset" 2>/dev/null; then ok
  else bad "chat: /reset did not start over (sampling not reseeded?): $(head -c 400 "$TMP/chatreset")"; fi
  # A byte-order mark opening piped input is not part of the first message (/stats here).
  printf '\xef\xbb\xbf/stats\r\n/quit\r\n' | "$CB" chat -m "$STORIES" --backend cpu -n 4 \
    >"$TMP/chatbom" 2>/dev/null
  if grep -qF "context: 0 tokens" "$TMP/chatbom"; then ok; else bad "chat: a BOM before /stats made it a message"; fi
  # -n caps the answers as generate's -n does: 4 tokens out per turn.
  # (Output to a file first: grep -q leaving the pipe early would end chat by SIGPIPE.)
  printf 'Once upon a time\n/quit\n' | "$CB" chat -m "$STORIES" --backend cpu -n 4 \
    >"$TMP/chat4" 2>/dev/null
  if grep -qF "| 4 tokens out]" "$TMP/chat4"; then ok; else bad "chat -n 4: answers not capped at 4 tokens"; fi
  # chat's chunks are 64 KiB and it has no --chunk-size: a smaller --dram is refused with
  # advice it takes.
  expect_usage_error chat_dram_chunk --dram "100 B is smaller than one chunk (64 KiB)" \
    "$CB" chat -m "$STORIES" --backend cpu --dram 100 </dev/null
  if ! grep -qF -- "--chunk-size" "$TMP/err"; then ok
  else bad "chat --dram 100 suggests --chunk-size, which chat does not take"; fi

  # A line over 1 MiB is skipped with a note, the chat going on; input without line ends is
  # refused after 64 MiB rather than read without bound. "/quit " is /quit.
  { echo hi; head -c 1100000 /dev/zero | tr '\0' a; printf '\nagain\n /quit \nunsent\n'; } |
    "$CB" chat -m "$STORIES" --backend cpu -n 4 >"$TMP/out" 2>"$TMP/err"
  rc=$?
  if [ $rc -eq 0 ] && grep -qF "(a line of 1100000 bytes was skipped" "$TMP/err" &&
    [ "$(grep -c "tokens out]" "$TMP/out")" -eq 2 ]; then ok
  else bad "chat with a 1.1 MB line: rc=$rc, $(head -c 300 "$TMP/err")"; fi
  head -c 70000000 /dev/zero | "$CB" chat -m "$STORIES" --backend cpu >/dev/null 2>"$TMP/err"
  rc=$?
  if [ $rc -eq 1 ] && grep -qF "stdin: no line end in 64 MiB" "$TMP/err"; then ok
  else bad "chat on input without line ends: rc=$rc, $(head -c 300 "$TMP/err")"; fi
  # What the window made the engine drop is told: history (with what was kept), a capped answer.
  printf 'hello\nhow are you\nOnce upon a time\nThe little dog was sad.\n' |
    "$CB" chat -m "$STORIES" --backend cpu -n 16 --ctx 64 >/dev/null 2>"$TMP/err"
  if grep -qE "^\(the conversation outgrew the 64-token context window: its first [0-9]+ tokens were dropped, [0-9]+ kept\)" "$TMP/err"; then ok
  else bad "chat: no note of the history dropped: $(head -c 300 "$TMP/err")"; fi
  printf 'hi\n' | "$CB" chat -m "$STORIES" --backend cpu -n 40 --ctx 32 >/dev/null 2>"$TMP/err"
  if grep -qF "the answer is capped at 16 tokens" "$TMP/err"; then ok
  else bad "chat: no note of the capped answer: $(head -c 300 "$TMP/err")"; fi

  # Malformed files: one clear line each, exit 1.
  python3 "$(dirname "$0")/make_bad_inputs.py" "$TMP/bad" "$STORIES" >"$TMP/cases.tsv" || bad "fixture generation"
  while IFS=$'\t' read -r name path needle; do
    expect_error "malformed:$name" "$path" "$needle" "$CB" inspect "$path"
  done <"$TMP/cases.tsv"
  expect_error "malformed-tokenize" "$TMP/bad/wrong_magic.gguf" "magic" "$CB" tokenize --model "$TMP/bad/wrong_magic.gguf" hi
else
  skip=1
  echo "SKIP: shared models not found under $DATA (set CACHEBENCH_DATA); model and malformed-file checks did not run"
fi

# Traces: synth writes a length trace (same seed, same file) and prints its statistics next to
# ShareGPT's; stats reads any trace back; a malformed trace is one line naming the file.
expect_out trace_synth "| multi-turn conversations | " "$CB" trace synth --sessions 2000 --seed 3 --out "$TMP/synth.json"
expect_ok trace_synth_again "$CB" trace synth --sessions 2000 --seed 3 --out "$TMP/synth2.json"
if cmp -s "$TMP/synth.json" "$TMP/synth2.json"; then ok; else bad "trace synth is not deterministic for a seed"; fi
expect_out trace_stats "2000 sessions" "$CB" trace stats "$TMP/synth.json" --out "$TMP/synth_stats.json"
expect_git trace_stats_git "$TMP/synth_stats.json"
printf '{"format": "cachebench-trace", "version": 1, "kind": "lengths", "sessions": [{"id": 0, "turns": [[0, 5]]}]}\n' >"$TMP/bad_trace.json"
expect_error trace_bad_lengths "$TMP/bad_trace.json" "outside 1..1000000" "$CB" trace stats "$TMP/bad_trace.json"
expect_error trace_missing "/no/such/trace.json" "" "$CB" trace stats /no/such/trace.json
# A length trace's token counts are given: a tokenizer beside it would go unused.
expect_usage_error trace_lengths_model --model "has no effect on a length trace" \
  "$CB" trace stats "$TMP/synth.json" --model preset:tiny-llama
SHAREGPT="$DATA/data/sharegpt/sharegpt_v3_multiturn_8conv.json"
if [ -f "$SHAREGPT" ] && [ -f "$LLAMA_TOK" ]; then
  expect_error trace_needs_tokenizer "$SHAREGPT" "needs a tokenizer" "$CB" trace stats "$SHAREGPT"
  "$CB" trace stats "$SHAREGPT" >/dev/null 2>&1
  if [ $? -eq 2 ]; then ok; else bad "trace stats without a tokenizer: not exit 2 (an option it needs)"; fi
  expect_out trace_sharegpt "3 sessions, 28 turns" "$CB" trace stats "$SHAREGPT" --tokenizer "$LLAMA_TOK"
  expect_out trace_sharegpt_pieces "8 sessions, 28 turns" "$CB" trace stats "$SHAREGPT" \
    --tokenizer "$LLAMA_TOK" --no-join-split
fi

# Option values out of range: CLI11 stops before any work, naming the option (exit 2).
# An option given twice names itself and says what to do (CLI11 says "At Most 1 required").
expect_usage_error option_twice --ctx "given 2 times; it takes one value, so give it once" \
  "$CB" perplexity -m preset:tiny-llama --ctx 16 --ctx 32
# A misspelt option is named, not reported as the required one it was meant to be.
expect_usage_error option_misspelt "not expected" "--modle preset:tiny-llama (a misspelt option? see --help)" \
  "$CB" perplexity --modle preset:tiny-llama -f "$TMP/none.txt"
# Whole numbers are decimal: CLI11 alone would read 010 as octal 8 and 0x10 as hex.
# The least mean turns, every multi-turn conversation two turns long, is reached with
# --max-turns 2 (it was refused); a range is printed with the digits that tell its ends apart.
expect_ok synth_max_turns_2 "$CB" trace synth -n 5 --out "$TMP/synth_mt2.json" --mean-turns 2 \
  --single-turn-fraction 0 --max-turns 2
expect_usage_error synth_mean_digits --mean-turns \
  "5.75 cannot be reached with a single-turn fraction of 0.9999999999 and at most 100 turns; choose a mean in [1.0000000001, 1.00000000990" \
  "$CB" trace synth -n 5 --out "$TMP/synth_digits.json" --single-turn-fraction 0.9999999999
expect_usage_error synth_sessions_octal --sessions "'010' starts with 0, which would read as octal" \
  "$CB" trace synth --sessions 010 --out "$TMP/octal.json"
expect_usage_error synth_sessions_hex --sessions "'0x10' is not a whole number" \
  "$CB" trace synth --sessions 0x10 --out "$TMP/octal.json"
expect_usage_error generate_seed_garbage --seed "'12abc' is not a whole number" \
  "$CB" generate -m preset:tiny-llama -p hi --seed 12abc
expect_usage_error cpu_weights_unknown --cpu-weights "f16 not in {f32,bf16}" \
  "$CB" forward -m preset:tiny-llama --tokens 1,2 --cpu-weights f16
# Nothing to run on, and options the run would not use: usage errors (exit 2), not ignored.
expect_usage_error forward_no_input forward "no input; pass --text or --tokens" \
  "$CB" forward -m preset:tiny-llama
expect_usage_error tokenize_no_text tokenize "no TEXT given" "$CB" tokenize -m preset:tiny-llama
expect_usage_error generate_seed_greedy --seed "has no effect when decoding is greedy" \
  "$CB" generate -m preset:tiny-llama -p hi --seed 5
expect_usage_error chat_top_k_greedy --top-k "has no effect when decoding is greedy" \
  "$CB" chat -m preset:tiny-llama --top-k 4
expect_usage_error generate_repeat_last_n_alone --repeat-last-n "has no effect while --repeat-penalty is 1" \
  "$CB" generate -m preset:tiny-llama -p hi --repeat-last-n 10
if ! "$CB" --version | grep -qE "CUDA: +off"; then  # bench gpu's options exist in CUDA builds
  expect_usage_error bench_gpu_profile_phase --profile-phase "x not in {decode,prefill}" \
    "$CB" bench gpu --profile-phase x
fi
expect_usage_error replay_block_size_0 --block-size "must be in 1..1024" \
  "$CB" replay "$TMP/synth.json" -m preset:tiny-llama --block-size 0
# Counts given as text (they also take "auto") are refused past their range, not wrapped: 2^32
# layers used to read as 0, and 2^63 - 1 as auto.
expect_usage_error replay_read_buffer_huge --read-buffer-layers \
  "must be auto or in 0..1000000, got 4294967296" \
  "$CB" replay "$TMP/synth.json" -m preset:tiny-llama --read-buffer-layers 4294967296
expect_usage_error replay_kv_blocks_huge --kv-blocks "99999999999 is out of range; give at most 2147483647" \
  "$CB" replay "$TMP/synth.json" -m preset:tiny-llama --kv-blocks 99999999999
expect_usage_error replay_truncate_align_overflow --truncate-align \
  "must be auto or in 1..1000000000, got 99999999999999999999" \
  "$CB" replay "$TMP/synth.json" -m preset:tiny-llama --truncate-align 99999999999999999999
expect_error replay_re_store_option "--policy" "no effect with --mode re" \
  "$CB" replay "$TMP/synth.json" -m preset:tiny-llama --sim --quiet --mode re --policy lru --limit 20
expect_ok replay_re_compare_store_option "$CB" replay "$TMP/synth.json" -m preset:tiny-llama \
  --sim --quiet --mode re --compare ca --policy lru --limit 20
expect_error replay_full_saves_admission "--no-save-admission" "no effect with --full-saves" \
  "$CB" replay "$TMP/synth.json" -m preset:tiny-llama --sim --quiet --full-saves \
  --no-save-admission --limit 20
expect_usage_error replay_rate_nan --rate "must be a finite number >= 0" \
  "$CB" replay "$TMP/synth.json" -m preset:tiny-llama --rate nan
expect_usage_error replay_gpus_0 --gpus "must be in 1..4096" \
  "$CB" replay "$TMP/synth.json" -m preset:tiny-llama --sim --gpus 0
expect_usage_error replay_lookahead_0 --lookahead "must be a finite number > 0, got 0" \
  "$CB" replay "$TMP/synth.json" -m preset:tiny-llama --lookahead 0
expect_usage_error ablate_sessions_0 --sessions "must be in 1..100000000" \
  "$CB" ablate eviction --sessions 0
expect_usage_error generate_top_p_0 --top-p "must be in (0, 1], got 0" \
  "$CB" generate -m preset:tiny-llama -p hi --top-p 0
expect_usage_error chat_min_p_2 --min-p "must be in 0..1, got 2" \
  "$CB" chat -m preset:tiny-llama --min-p 2
expect_usage_error generate_top_k_negative --top-k "must be a finite number >= 0, got -3" \
  "$CB" generate -m preset:tiny-llama -p hi --top-k -3
# A value outside its option's range is a usage error (exit 2), caught as the line is read.
while IFS='|' read -r opt needle cmd; do
  # shellcheck disable=SC2086
  "$CB" $cmd >"$TMP/out" 2>"$TMP/err"
  rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$opt: $needle" "$TMP/err"; then ok
  else bad "$cmd: exit $rc (want 2), wanted '$opt: $needle' in: $(head -c 300 "$TMP/err")"; fi
done <<EOF_RANGES
--dram|invalid size '-1': negative|replay $TMP/synth.json -m preset:tiny-llama --dram -1
--ssd|invalid size '2x'|replay $TMP/synth.json -m preset:tiny-llama --ssd 2x
--truncate-ratio|must be in (0, 1], got 5|replay $TMP/synth.json -m preset:tiny-llama --truncate-ratio 5
--max-turns|must be in 2..100000, got 0|trace synth -n 3 --out $TMP/r.json --max-turns 0
--single-turn-fraction|must be in [0, 1), got 2|trace synth -n 3 --out $TMP/r.json --single-turn-fraction 2
--input-sigma|must be in 0..10, got -1|trace synth -n 3 --out $TMP/r.json --input-sigma -1
--mean-turns|500 cannot be reached|trace synth -n 3 --out $TMP/r.json --mean-turns 500
--mode|bogus not in {sim,real}|ablate eviction --mode bogus
EOF_RANGES
expect_usage_error perplexity_ratio_1 --truncate-ratio "must be in (0, 1)" \
  "$CB" perplexity -m preset:tiny-llama --dataset text --file "$TMP/synth.json" --truncate-ratio 1
"$CB" trace synth --sessions 3 --seed 1 --out "$TMP/synth3.json" >/dev/null 2>&1 || bad "trace synth 3"
# Virtual time is a double in seconds: a rate or think time that would stretch a run past the
# span it resolves to a microsecond is refused (the millisecond metrics would be noise).
# A store too small for any entry would refuse every save: refused before the run (real and
# sim alike), not only said at its end.
expect_usage_error replay_no_room_for_an_entry --dram "3 MiB, the largest tier, holds no entry of tiny-llama: even one token's takes 4 MiB" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --quiet --dram 3MiB
expect_usage_error replay_no_room_sim --dram "3 MiB, the largest tier, holds no entry" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --sim --quiet --dram 3MiB
# Room for a short entry but not for these conversations' own: every save refused, said on
# stderr, not only as a hit rate of 0.
"$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --quiet --dram 16KiB --chunk-size 4KiB \
  >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ] && grep -qF "saves refused or failed (save_failures)" "$TMP/err"; then ok
else bad "replay with no room for an entry: rc=$rc, $(head -c 600 "$TMP/err")"; fi
expect_error replay_rate_tiny "--rate" "raise --rate" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --sim --quiet --rate 1e-20
expect_error replay_think_huge "--think-time" "from 0 to 1e6" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --sim --quiet --think-time const:1e15
expect_usage_error replay_price_huge --price-gpu "must be in 0..1000000" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --sim --price-gpu 1e308
# With --compare, --csv F writes F.MODE.csv per mode: one that is an input is refused.
cp "$TMP/synth3.json" "$TMP/turns.re.csv"
expect_error replay_csv_over_input "$TMP/turns.re.csv" "overwrite its input" \
  "$CB" replay "$TMP/turns.re.csv" -m preset:tiny-llama --sim --quiet --compare re --csv "$TMP/turns"
# With --compare, --csv names files F.MODE.csv: a stream has no such files (as root, replay
# used to create /dev/stdout.ca.csv).
expect_usage_error replay_csv_stream_compare --csv "with --compare it writes one file per mode" \
  "$CB" replay "$TMP/synth.json" -m preset:tiny-llama --sim --quiet --compare re --csv /dev/stdout
if ls /dev/stdout.*.csv >/dev/null 2>&1; then bad "replay made /dev/stdout.MODE.csv"; else ok; fi
# A file under /dev that is not a stream (tmpfs) takes the per-mode files.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  expect_ok replay_csv_dev_shm "$CB" replay "$TMP/synth.json" -m preset:tiny-llama --sim --quiet \
    --compare re --csv "/dev/shm/cb_csv_$$"
  rm -f "/dev/shm/cb_csv_$$".*.csv
fi
# ... and one that cannot be written, before the run, as the option's own value would be.
: >"$TMP/rocsv.ca.csv"
chmod 444 "$TMP/rocsv.ca.csv"
expect_usage_error replay_csv_mode_read_only "--csv $TMP/rocsv writes $TMP/rocsv.ca.csv" \
  "'$TMP/rocsv.ca.csv' is read-only" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --sim --compare re --csv "$TMP/rocsv"
if [ ! -s "$TMP/out" ] && [ ! -e "$TMP/rocsv.re.csv" ]; then ok
else bad "replay ran before refusing its read-only --csv F.ca.csv"; fi
chmod 644 "$TMP/rocsv.ca.csv"
# A ShareGPT text option on a length trace has no effect: refused (as trace stats does).
expect_usage_error replay_join_lengths --no-join-split "has no effect on a length trace" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --sim --quiet --no-join-split
expect_usage_error stats_join_lengths --no-join-split "has no effect on a length trace" \
  "$CB" trace stats "$TMP/synth3.json" --no-join-split
# ... and so is one that another output names; --out F with --csv F is no clash then.
expect_error replay_csv_over_out "$TMP/col.ca.csv" "would be lost" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --sim --quiet --compare re \
  --out "$TMP/col.ca.csv" --csv "$TMP/col"
if "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --sim --quiet --compare re \
  --out "$TMP/same.json" --csv "$TMP/same.json" >"$TMP/out" 2>"$TMP/err" &&
  [ -s "$TMP/same.json" ] && [ -s "$TMP/same.json.ca.csv" ] && [ -s "$TMP/same.json.re.csv" ]; then
  ok
else
  bad "replay --out F --csv F --compare re: $(head -c 600 "$TMP/err")"
fi
expect_error replay_sim_io_threads "--io-threads" "no effect in sim mode" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --sim --quiet --io-threads 7
expect_error replay_warmup_all "--warmup-turns" "nothing would be measured" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --sim --quiet --warmup-turns 1000
expect_error replay_ctx_over_window "--ctx" "exceeds the model's context window" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --quiet --ctx 1000000
# A scratch directory without write permission is refused, as root too (who could write in it).
mkdir -p "$TMP/ro_scratch" && chmod 555 "$TMP/ro_scratch"
expect_usage_error replay_store_dir_ro --store-dir "'$TMP/ro_scratch' is read-only" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --quiet --ssd 64MiB --store-dir "$TMP/ro_scratch"
chmod 755 "$TMP/ro_scratch"
expect_error store_dir_empty "--store-dir" "is empty" "$CB" store stat --store-dir ""
: >"$TMP/afile"
expect_usage_error store_dir_a_file "$TMP/afile" "--store-dir is not a directory" \
  "$CB" store stat --store-dir "$TMP/afile"
expect_usage_error store_dir_missing "$TMP/no_such_store" "store directory does not exist" \
  "$CB" store clear --store-dir "$TMP/no_such_store"
# Files only named like a store's are not a store: clear refuses them and deletes nothing;
# verify says it cannot verify such a directory with 2 (1 means corruption found).
mkdir -p "$TMP/notstore"
for f in data-0000.bin data-0001.bin journal.cbj; do echo "someone's notes" >"$TMP/notstore/$f"; done
expect_error store_clear_not_a_store "$TMP/notstore" "not a cachebench store" \
  "$CB" store clear --store-dir "$TMP/notstore"
if [ "$(ls "$TMP/notstore" | wc -l)" -eq 3 ]; then ok; else bad "store clear deleted files of a non-store"; fi
"$CB" store verify --store-dir "$TMP/notstore" >/dev/null 2>&1
rc=$?
if [ $rc -eq 2 ]; then ok; else bad "store verify of a non-store: exit $rc, want 2"; fi
expect_error replay_store_dir_without_ssd "--store-dir" "give --ssd SIZE" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --quiet --store-dir "$TMP"
expect_usage_error mmlu_data_missing --data "'$TMP/no-mmlu' does not exist" \
  "$CB" mmlu -m preset:tiny-llama --data "$TMP/no-mmlu"
expect_usage_error piqa_data_file --data "'$TMP/synth3.json' is a file; pass the directory" \
  "$CB" piqa -m preset:tiny-llama --data "$TMP/synth3.json"
# An integer its option's type cannot hold is refused (CLI11 would clamp it to the limit).
expect_error seed_overflow "--seed" "out of range" \
  "$CB" generate -m preset:tiny-llama -p hi --seed 99999999999999999999999999
expect_error ctx_overflow "--ctx" "out of range" \
  "$CB" replay "$TMP/synth3.json" -m preset:tiny-llama --quiet --ctx 99999999999999999999
# ablate names its outputs after --out DIR: one that is an input file is refused, untouched.
mkdir -p "$TMP/ablate_in"
cp "$TMP/synth3.json" "$TMP/ablate_in/eviction.json"
expect_error ablate_over_its_trace "$TMP/ablate_in/eviction.json" "overwrite its input" \
  "$CB" ablate eviction --sessions 3 --trace "$TMP/ablate_in/eviction.json" --out "$TMP/ablate_in" --quiet
"$CB" ablate eviction --sessions 3 --trace "$TMP/ablate_in/eviction.json" --out "$TMP/ablate_in" \
  --quiet >/dev/null 2>&1
rc=$?
if [ $rc -eq 2 ]; then ok; else bad "ablate over its trace: exit $rc, wanted 2 (a refused output)"; fi
if cmp -s "$TMP/synth3.json" "$TMP/ablate_in/eviction.json"; then ok; else bad "ablate changed its input trace"; fi
expect_error forward_preset_too_big "preset:llama-65b" "more than this machine's" \
  "$CB" forward -m preset:llama-65b --tokens 1,2,3

# Outputs: never an input, never twice the same file, never empty; written whole or not at
# all; unsigned options refuse negative numbers.
O="$TMP/outputs"
rm -rf "$O" && mkdir -p "$O"
cp "$TMP/synth3.json" "$O/trace.json"
expect_error out_is_trace "--out $O/trace.json" "would overwrite its input" \
  "$CB" replay "$O/trace.json" -m preset:tiny-llama --sim --quiet --out "$O/trace.json"
if cmp -s "$TMP/synth3.json" "$O/trace.json"; then ok; else bad "out_is_trace changed the trace"; fi
# A checkpoint directory's files are inputs, whether --model names the directory or its weights
# file: no output lands among them (checked before the model is read, so these need not load).
mkdir -p "$O/ckpt" && echo '{}' >"$O/ckpt/config.json" && echo weights >"$O/ckpt/model.safetensors"
expect_error out_in_checkpoint "--dump-logits $O/ckpt/model.safetensors" \
  "is in the directory given to --model ($O/ckpt), whose files the run reads" \
  "$CB" forward -m "$O/ckpt" --tokens 1,2 --dump-logits "$O/ckpt/model.safetensors"
expect_error out_beside_weights "--out $O/ckpt/config.json" \
  "is in the directory of the checkpoint file given to --model" \
  "$CB" generate -m "$O/ckpt/model.safetensors" --prompt Once -n 2 --out "$O/ckpt/config.json"
# A Hugging Face cache's snapshot links its files to blobs elsewhere: the link, inside the
# checkpoint, is one of its files, and so is the config.json beside a linked weights file.
mkdir -p "$O/hub/blobs" "$O/hub/snap" && echo '{}' >"$O/hub/blobs/c" && echo weights >"$O/hub/blobs/w"
ln -sf ../blobs/c "$O/hub/snap/config.json" && ln -sf ../blobs/w "$O/hub/snap/model.safetensors"
expect_error out_on_a_checkpoint_link "--out $O/hub/snap/config.json" "whose files the run reads" \
  "$CB" generate -m "$O/hub/snap" --prompt Once -n 2 --out "$O/hub/snap/config.json"
expect_error out_beside_linked_weights "--out $O/hub/snap/config.json" "whose files the run reads" \
  "$CB" generate -m "$O/hub/snap/model.safetensors" --prompt Once -n 2 --out "$O/hub/snap/config.json"
if [ "$(cat "$O/ckpt/config.json")" = '{}' ] && [ "$(cat "$O/ckpt/model.safetensors")" = weights ] \
  && [ "$(cat "$O/hub/blobs/c")" = '{}' ]; then ok
else bad "an output replaced a checkpoint's file"; fi
expect_error out_twice "--csv $O/./r.json" "is also given to --out" \
  "$CB" replay "$O/trace.json" -m preset:tiny-llama --sim --quiet --out "$O/r.json" --csv "$O/./r.json"
expect_usage_error out_proc --out "the directory of '/proc/cb.json' is read-only" \
  "$CB" replay "$O/trace.json" -m preset:tiny-llama --sim --quiet --out /proc/cb.json
expect_usage_error out_empty --out "an empty path" \
  "$CB" replay "$O/trace.json" -m preset:tiny-llama --sim --quiet --out ""
# A socket (as a block device) is refused before the run, not after it.
python3 -c "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$O/sock"
expect_usage_error out_socket --out "'$O/sock' is a block device or a socket" \
  "$CB" replay "$O/trace.json" -m preset:tiny-llama --sim --quiet --out "$O/sock"
# A read-only file or directory is not written over, though root could (a run as root once
# overwrote a shared model with a trace).
printf 'keep' >"$O/ro.gguf" && chmod 444 "$O/ro.gguf" && mkdir -p "$O/ro_dir"
printf 'keep' >"$O/ro_dir/t.json" && chmod 555 "$O/ro_dir"
expect_usage_error out_read_only --out "'$O/ro.gguf' is read-only" \
  "$CB" trace synth --sessions 3 --out "$O/ro.gguf"
if [ "$(cat "$O/ro.gguf")" = keep ]; then ok; else bad "trace synth overwrote a read-only file"; fi
expect_usage_error out_read_only_dir --out "the directory of '$O/ro_dir/t.json' is read-only" \
  "$CB" trace synth --sessions 3 --out "$O/ro_dir/t.json"
expect_usage_error ablate_out_read_only --out "the directory above $O/ro_dir/a is read-only" \
  "$CB" ablate preload --out "$O/ro_dir/a"
expect_usage_error ablate_out_no_parent --out "the directory above $O/no/such does not exist" \
  "$CB" ablate preload --out "$O/no/such"
# A symbolic link is followed: its target's read-only directory is refused; a trailing slash
# names the directory itself.
ln -sf "$O/ro_dir/t.json" "$O/ro_link.json"
expect_usage_error out_link_read_only_dir --out "the directory of '$O/ro_link.json' is read-only" \
  "$CB" trace synth --sessions 3 --out "$O/ro_link.json"
if [ "$(cat "$O/ro_dir/t.json")" = keep ]; then ok; else bad "a link led trace synth into a read-only directory"; fi
expect_ok ablate_out_trailing_slash "$CB" ablate preload --out "$O/abl_slash/" --quiet --no-plot
if [ ! -e "$O/ro_dir/a" ] && [ ! -e "$O/no" ]; then ok; else bad "ablate --out made directories"; fi
chmod 755 "$O/ro_dir"
# Refusals of an option found after the command line was read exit 2 as CLI11's own do: an
# output that is an input (ablate's derived files), an option without the one it needs.
for args in "replay $O/trace.json -m preset:tiny-llama --ssd 1GiB" \
            "replay $O/trace.json -m preset:tiny-llama --sim --keep-store"; do
  # shellcheck disable=SC2086
  "$CB" $args >/dev/null 2>&1
  rc=$?
  if [ $rc -eq 2 ]; then ok; else bad "$args: exit $rc, wanted 2"; fi
done
expect_error negative_seed "--seed" "must be a non-negative integer, got -1" \
  "$CB" replay "$O/trace.json" -m preset:tiny-llama --sim --quiet --seed -1
expect_usage_error bench_store_policy_entries --policy-entries "must be in 0..10000000" \
  "$CB" bench store --store-dir "$O" --policy-entries 100000000000
expect_usage_error bench_store_no_traffic --traffic "0 moves nothing" \
  "$CB" bench store --store-dir "$O" --traffic 0
# A --store-dir that cannot be a directory is the command line's error, as replay's is (exit 2,
# naming the option); so is one this user cannot write (not checkable as root).
: >"$O/afile"
expect_usage_error bench_store_dir_a_file --store-dir "$O/afile is not a directory" \
  "$CB" bench store --store-dir "$O/afile" --policy-entries 0 --journal-entries 0
expect_usage_error bench_store_dir_under_a_file --store-dir "$O/afile is not a directory" \
  "$CB" bench store --store-dir "$O/afile/sub" --policy-entries 0 --journal-entries 0
expect_usage_error replay_store_dir_a_file --store-dir "'$O/afile' is not a directory" \
  "$CB" replay "$O/trace.json" -m preset:tiny-llama --ssd 64MiB --store-dir "$O/afile" --quiet
if [ "$(id -u)" -ne 0 ]; then
  mkdir -p "$O/ro_store" && chmod 555 "$O/ro_store"
  expect_usage_error bench_store_dir_read_only --store-dir "$O/ro_store is not writable" \
    "$CB" bench store --store-dir "$O/ro_store" --policy-entries 0 --journal-entries 0
  expect_usage_error replay_store_dir_read_only --store-dir "'$O/ro_store' is not writable" \
    "$CB" replay "$O/trace.json" -m preset:tiny-llama --ssd 64MiB --store-dir "$O/ro_store" --quiet
  chmod 755 "$O/ro_store"
fi
# --traffic is moved as whole entries, and a rounded one is said so.
mkdir -p "$O/bs"
if "$CB" bench store --store-dir "$O/bs" --entry-size 4MiB --traffic 6MiB --reps 1 \
  --policy-entries 0 --journal-entries 0 >/dev/null 2>"$TMP/err" \
  && grep -qF "note: --traffic 6 MiB moved as 4 MiB, whole entries of 4 MiB (1 a round)" "$TMP/err"; then ok
else bad "bench store --traffic 6MiB: rounding not noted: $(tail -c 300 "$TMP/err")"; fi
# Small entries in large chunks need a store many times --traffic: refused before allocating.
expect_usage_error bench_store_chunks --traffic "entries of 1.5 MiB take 64 chunks of 1 MiB each" \
  "$CB" bench store --store-dir "$O" --entry-size 1.5MiB --traffic 100GiB
# A file system too small for the SSD benchmark: the need named part by part, before anything
# is written. (A 16 MiB tmpfs in a mount namespace of its own, where this user may make one.)
mkdir -p "$TMP/small_fs"
if unshare -m true 2>/dev/null; then
  unshare -m sh -c 'mount -t tmpfs -o size=16m tmpfs "$1" && exec "$2" bench store --store-dir "$1/b" --entry-size 1MiB --traffic 1MiB' \
    sh "$TMP/small_fs" "$CB" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  if [ $rc -eq 1 ] && grep -qF "$TMP/small_fs/b: the SSD benchmark needs 130 MiB free (the store's 64 MiB of data files, two reference files of 1 MiB, and 64 MiB for the store's journal) but only 16 MiB is available" "$TMP/err" \
    && grep -qF -- "--traffic cannot make it fit, free disk space, or give a --store-dir on a larger file system" "$TMP/err"; then ok
  else bad "bench store on a 16 MiB file system: rc=$rc, $(head -c 500 "$TMP/err")"; fi
else
  echo "SKIP: bench store on a small file system (no mount namespace for this user)"
fi
# calibrate refuses step times that do not grow with the work, as a machine busy with other
# tests (or other guests) can give it; those checks, about other things, try it three times.
calibrate_retried() {
  local i rc
  for i in 1 2 3; do
    "$@" 2>"$TMP/cal_err" && return 0
    rc=$?
    grep -qF "do not grow with the work" "$TMP/cal_err" || break
  done
  cat "$TMP/cal_err" >&2
  return $rc
}
expect_ok calibrate_cpu calibrate_retried "$CB" calibrate -m preset:tiny-llama --out "$O/cal.json"
expect_git calibrate_cpu_git "$O/cal.json"
# Scratch directories are made fresh, never taken over: a directory of the name calibrate and
# the journal bench used to take (NAME-PID; `bash -c '... exec'` keeps the PID) keeps what it
# holds, and nothing else is left behind.
for run in "calibrate cachebench-calibrate-" "bench cachebench-bench-journal."; do
  set -- $run
  if [ "$1" = calibrate ]; then
    cmd=("$CB" calibrate -m preset:tiny-llama --reps 1 --ssd-dir "$O/scratch" --out "$O/cal_scratch.json")
  else
    cmd=("$CB" bench store --store-dir "$O/scratch" --entry-size 1MiB --traffic 1MiB --reps 1
      --policy-entries 0 --journal-entries 100)
  fi
  for _ in 1 2 3; do  # calibrate_retried's retries, for a busy machine
    rm -rf "$O/scratch" && mkdir -p "$O/scratch"
    bash -c 'mkdir "$1/$2$$" && echo mine >"$1/$2$$/notes" && exec "${@:3}"' _ "$O/scratch" "$2" \
      "${cmd[@]}" >/dev/null 2>"$TMP/err"
    rc=$?
    [ $rc -eq 0 ] && break
    grep -qF "do not grow with the work" "$TMP/err" || break
  done
  theirs=$(ls "$O/scratch")
  if [ $rc -eq 0 ] && [ "$(cat "$O/scratch/$theirs/notes" 2>/dev/null)" = mine ] \
    && [ "$(ls -A "$O/scratch/$theirs")" = notes ] && [ "$(ls -A "$O/scratch" | wc -l)" -eq 1 ]; then ok
  else bad "$1 beside a directory named like its scratch: rc=$rc, left: $(ls -AR "$O/scratch"), $(tail -c 300 "$TMP/err")"; fi
done
# A profile field outside its range is refused naming the file, the field and the range (a
# step_overhead_s of 1e306 used to hang the replay, deaf to SIGTERM).
"$CB" calibrate --print-profile a100-80gb >"$TMP/prof.json"
prof_with() {  # field value out
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d[sys.argv[2]]=float(sys.argv[3]); \
json.dump(d, open(sys.argv[4], 'w'))" "$TMP/prof.json" "$@"
}
prof_with step_overhead_s 1e306 "$TMP/prof_huge.json"
expect_error profile_overhead_huge "$TMP/prof_huge.json: field 'step_overhead_s'" "from 0 to 10 seconds" \
  timeout -k 5 30 "$CB" replay "$TMP/synth3.json" -m preset:llama-13b --sim --quiet --rate 0 \
  --profile "$TMP/prof_huge.json"
# A KV pool that the profile's HBM leaves short of one window names the profile, not --kv-blocks.
prof_with hbm_bytes 3e10 "$TMP/prof_hbm.json"
expect_error profile_hbm_short "--profile $TMP/prof_hbm.json" "fewer than the 129 one full window" \
  "$CB" replay "$TMP/synth3.json" -m preset:llama-13b --sim --quiet --profile "$TMP/prof_hbm.json"
# A profile that is a FIFO (which blocked the open) or a device (/dev/zero read until memory
# ran out) is refused by what it is; the timeout makes a hang fail rather than block.
rm -f "$TMP/prof_fifo"
mkfifo "$TMP/prof_fifo"
expect_error profile_fifo "$TMP/prof_fifo" "is not a regular file" \
  timeout -k 5 20 "$CB" replay "$TMP/synth3.json" -m preset:llama-13b --sim --quiet \
  --profile "$TMP/prof_fifo"
expect_error print_profile_fifo "$TMP/prof_fifo" "is not a regular file" \
  timeout -k 5 20 "$CB" calibrate --print-profile "$TMP/prof_fifo"
expect_error print_profile_zero /dev/zero "is not a regular file" \
  timeout -k 5 20 "$CB" calibrate --print-profile /dev/zero
rm -f "$TMP/prof_fifo"
# Malformed JSON says where and why; a field given twice (nlohmann kept the last, silently) is
# refused naming it.
printf '{"gemm_tflops": 1,,}' >"$TMP/prof_bad.json"
expect_error profile_bad_json "$TMP/prof_bad.json" "not valid JSON (parse error at line 1, column" \
  "$CB" calibrate --print-profile "$TMP/prof_bad.json"
sed 's/^{/{"gemm_tflops": 0.001, /' "$TMP/prof.json" >"$TMP/prof_twice.json"
expect_error profile_twice "$TMP/prof_twice.json" "gives the field 'gemm_tflops' twice" \
  "$CB" replay "$TMP/synth3.json" -m preset:llama-13b --sim --quiet --profile "$TMP/prof_twice.json"
# The value given is printed, not one clamped for the check, and the range is --gpus's.
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['gpus']=4294967298; \
json.dump(d, open(sys.argv[2], 'w'))" "$TMP/prof.json" "$TMP/prof_gpus_huge.json"
expect_error profile_gpus_huge "$TMP/prof_gpus_huge.json" \
  "field 'gpus' is 4294967298; it must be an integer from 1 to 4096" \
  "$CB" calibrate --print-profile "$TMP/prof_gpus_huge.json"
# An explicit --gpus wins over the profile's "gpus", 1 included, and the result records what
# ran (a profile of 2 GPUs with --gpus 1 ran on 2 and recorded config.gpus 1).
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['gpus']=2; \
json.dump(d, open(sys.argv[2], 'w'))" "$TMP/prof.json" "$TMP/prof_g2.json"
for g in 1 2 4 given; do
  if [ $g = given ]; then gpus=(); want=2; else gpus=(--gpus $g); want=$g; fi
  "$CB" replay "$TMP/synth3.json" -m preset:llama-13b --sim --quiet --profile "$TMP/prof_g2.json" \
    "${gpus[@]}" --out "$TMP/g2_$g.json" >/dev/null 2>"$TMP/err" || bad "profile gpus 2, --gpus $g: $(cat "$TMP/err")"
  if python3 -c "import json,sys; j=json.load(open(sys.argv[1])); w=int(sys.argv[2]); \
sys.exit(0 if j['config']['gpus'] == w and j['profile']['gpus'] == w and j['summary']['gpus'] == w else 1)" \
    "$TMP/g2_$g.json" $want; then ok; else bad "profile gpus 2, --gpus $g: not $want GPUs throughout"; fi
done
# --gpus 1 and the profile's 2 ran different replays: the two GPUs' run is faster.
if python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); \
sys.exit(0 if a['summary']['gpu_time_s'] > b['summary']['gpu_time_s'] else 1)" "$TMP/g2_1.json" \
  "$TMP/g2_given.json"; then ok; else bad "--gpus 1 over a profile of 2 GPUs ran on 2"; fi
# A profile's dram_bytes too small for one entry, with --dram auto, is the file's fault (exit 1),
# not --dram's, which was not given.
prof_with dram_bytes 1e6 "$TMP/prof_d1m.json"
"$CB" replay "$TMP/synth3.json" -m preset:llama-13b --sim --quiet --profile "$TMP/prof_d1m.json" \
  >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 1 ] && grep -qF "$TMP/prof_d1m.json (--profile): its dram_bytes 1e+06 (977 KiB)" "$TMP/err" \
  && grep -qF "give the profile a dram_bytes of at least 83886080, or pass --dram SIZE" "$TMP/err" \
  && ! grep -qF "error: --dram" "$TMP/err"; then ok
else bad "profile dram_bytes too small: rc=$rc $(cat "$TMP/err")"; fi
# A file is labelled by its path, beside the name it gives itself (a file of A100 figures named
# "h100-80gb" was printed as the built-in); the result records both.
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['name']='h100-80gb'; \
json.dump(d, open(sys.argv[2], 'w'))" "$TMP/prof.json" "$TMP/prof_named.json"
expect_out profile_label "(sim, profile $TMP/prof_named.json (profile 'h100-80gb'))" \
  "$CB" replay "$TMP/synth3.json" -m preset:llama-13b --sim --quiet --profile "$TMP/prof_named.json" \
  --out "$TMP/named.json"
if python3 -c "import json,sys; j=json.load(open(sys.argv[1])); \
sys.exit(0 if j['profile_file'] == sys.argv[2] and j['profile']['name'] == 'h100-80gb' else 1)" \
  "$TMP/named.json" "$TMP/prof_named.json"; then ok; else bad "replay JSON lacks the profile's file"; fi
# calibrate without --ssd-dir says the SSD was not measured; sim refuses an SSD tier on its
# placeholder rates.
expect_out calibrate_no_ssd "SSD not measured" \
  calibrate_retried "$CB" calibrate -m preset:tiny-llama --reps 1 --ssd-dir "" --out "$O/cal_nossd.json"
expect_error sim_ssd_unmeasured "--profile $O/cal_nossd.json" "SSD rates were not measured" \
  "$CB" replay "$O/trace.json" -m preset:tiny-llama --sim --quiet --profile "$O/cal_nossd.json" \
  --ssd 1GB
expect_usage_error calibrate_ssd_dir --ssd-dir "'$O/nope' does not exist" \
  "$CB" calibrate -m preset:tiny-llama --out "$O/p.json" --ssd-dir "$O/nope"
expect_usage_error calibrate_ctx_below_grid --ctx "10 is below the grid's least window" \
  "$CB" calibrate -m preset:tiny-llama --out "$O/p.json" --ssd-dir "" --ctx 10
expect_error calibrate_print_and_measure "--print-profile" "measures nothing" \
  "$CB" calibrate --print-profile a100-80gb -m preset:tiny-llama --out "$O/p.json"
expect_usage_error calibrate_print_reps --reps "--print-profile prints a profile and measures nothing" \
  "$CB" calibrate --print-profile a100-80gb --reps 3
expect_usage_error calibrate_print_empty --print-profile "an empty name" \
  "$CB" calibrate --print-profile ""
expect_error calibrate_print_dir "$O" "is a directory (--print-profile)" \
  "$CB" calibrate --print-profile "$O"
expect_usage_error ablate_batch_huge --batch "must be in 1..4096, got 100000" \
  "$CB" ablate recompute-vs-ca --batch 100000
# A window too short for a study names --ctx when --ctx made it so (not the model's 2K).
expect_error ablate_ctx_window "--ctx 512" "gives a 512-token window; preload (1K-token histories and 100 new tokens) needs a window of 1101 tokens; use --ctx 1101 or more" \
  "$CB" ablate preload --ctx 512
# Options the run would ignore are refused.
"$CB" replay "$O/trace.json" -m preset:tiny-llama --profile h100-80gb --quiet >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -ne 0 ] && grep -qF -- "--profile requires --sim" "$TMP/err" && ok || bad "--profile without --sim: rc=$rc $(cat "$TMP/err")"
"$CB" replay "$O/trace.json" -m preset:tiny-llama --no-preload --read-buffer-layers 3 >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -ne 0 ] && grep -qF -- "excludes --no-preload" "$TMP/err" && ok || bad "--no-preload with --read-buffer-layers: rc=$rc $(cat "$TMP/err")"
# forward's --no-bos acts on --text only; tokenize --decode prints the ids' text (no BOS to
# drop); tokenize's --tokenizer takes the place of --model.
for args in "forward -m $TMP/none.gguf --tokens 1,2 --no-bos|--no-bos requires --text" \
  "tokenize -m $TMP/none.gguf --decode --no-bos 1 2|--no-bos excludes --decode" \
  "tokenize -m $TMP/none.gguf --tokenizer $TMP/none.model hi|--model excludes --tokenizer"; do
  "$CB" ${args%%|*} >/dev/null 2>"$TMP/err"
  rc=$?
  [ $rc -eq 2 ] && grep -qF -- "${args#*|}" "$TMP/err" && ok || bad "${args%%|*}: rc=$rc $(cat "$TMP/err")"
done
printf 'Once upon a time there was a cat.\n' >"$O/text.txt"
expect_error perplexity_full_sink "--sink" "overflow study only" \
  "$CB" perplexity -m preset:tiny-llama --file "$O/text.txt" --sink 4
expect_error perplexity_llamacpp_max_tokens "--max-tokens" "llama.cpp convention" \
  "$CB" perplexity -m preset:tiny-llama --file "$O/text.txt" --max-tokens 10
# Options without effect are refused when given, also at their default value.
expect_usage_error perplexity_overflow_convention --convention "applies to --method full only" \
  "$CB" perplexity -m preset:tiny-llama --file "$O/text.txt" --method nkvt --convention llama.cpp
expect_usage_error perplexity_lmeval_chunks --chunks "does not apply to the lm-eval convention" \
  "$CB" perplexity -m preset:tiny-llama --file "$O/text.txt" --convention lm-eval --chunks 0
expect_usage_error perplexity_batch_one_method --batch "has no effect with --method nkvt alone" \
  "$CB" perplexity -m preset:tiny-llama --file "$O/text.txt" --method nkvt --batch 1
if [ -f "$STORIES" ]; then
  expect_error perplexity_binary "$STORIES" "not UTF-8 text: byte 0x00" \
    "$CB" perplexity -m "$STORIES" --backend cpu --file "$STORIES"
fi
"$CB" trace synth --sessions 2 --seed 1 --out "$O/good.json" >/dev/null 2>&1
cp "$O/good.json" "$O/kept.json"
# (stderr through a pipe: under the limit the process could not write a file of its own)
bash -c "trap '' XFSZ; ulimit -f 0; exec \"$CB\" trace synth --sessions 3 --seed 2 --out \"$O/good.json\"" \
  2>&1 >/dev/null | cat >"$TMP/err"
rc=${PIPESTATUS[0]}
if [ $rc -eq 1 ] && grep -qF "file size limit" "$TMP/err" && cmp -s "$O/good.json" "$O/kept.json" \
  && [ -z "$(ls "$O" | grep -F .tmp.)" ]; then ok
else bad "a failed write kept the old file whole: rc=$rc $(head -c 300 "$TMP/err"); $(ls "$O")"; fi

echo "cli: $pass passed, $fail failed$( [ $skip -eq 1 ] && echo ', 1 skipped')"
[ $fail -eq 0 ]
