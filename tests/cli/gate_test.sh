#!/usr/bin/env bash
# cachebench gate as a CI job uses it: exit 0 when nothing regressed, 1 on a regression (a
# count line, the metric named), 2 when it cannot compare (a malformed or missing summary, a
# run of another setup); the directions metrics are judged in, and the bounds.
# Usage: gate_test.sh CACHEBENCH_BINARY SCRATCH_DIR
set -uo pipefail
CB="$1"
TMP="$2"
mkdir -p "$TMP"
source "$(dirname "$0")/common.sh"

# cachebench gate: pass (exit 0), regression (exit 1 with a count line), bad files named.
G="$TMP/gate"
mkdir -p "$G"
cat >"$G/base.json" <<'JSON'
{"completed": 10, "hit_rate": {"overall": 0.5, "dram": 0.3, "ssd": 0.2}, "reused_tokens": 100,
 "recomputed_tokens": 50, "bytes_loaded": 4096, "bytes_saved": 8192, "ttft_ms": {"mean": 100.0}}
JSON
cat >"$G/better.json" <<'JSON'
{"summary": {"completed": 10, "hit_rate": {"overall": 0.5, "dram": 0.3, "ssd": 0.2},
 "reused_tokens": 100, "recomputed_tokens": 50, "bytes_loaded": 4096, "bytes_saved": 8192,
 "ttft_ms": {"mean": 90.0}}}
JSON
sed 's/"overall": 0.5/"overall": 0.4/' "$G/base.json" >"$G/worse.json"
printf '{"completed": 10,' >"$G/broken.json"
expect_out gate_pass "no regression" "$CB" gate --baseline "$G/base.json" --current "$G/better.json"
expect_out gate_bound "| improved |" "$CB" gate --baseline "$G/base.json" --current "$G/better.json" \
  --max-regression ttft_ms.mean=5 --out "$G/report.json"
if grep -qF '"passed": true' "$G/report.json" 2>/dev/null; then ok; else bad "gate --out report lacks passed: true"; fi
expect_git gate_out_git "$G/report.json"
"$CB" gate --baseline "$G/base.json" --current "$G/worse.json" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 1 ] && grep -qF "1 regression in 8 checks" "$TMP/out" && grep -qF "REGRESSION" "$TMP/out"; then ok
else bad "gate regression: rc=$rc, $(head -c 600 "$TMP/out") $(head -c 300 "$TMP/err")"; fi
# Exit 1 is a regression and nothing else: an output that is one of the inputs, and an
# unknown option, are usage errors (2), as is a summary that cannot be compared.
for args in "--out $G/base.json" "--no-such-flag"; do
  # shellcheck disable=SC2086
  "$CB" gate --baseline "$G/base.json" --current "$G/worse.json" $args >"$TMP/out" 2>"$TMP/err"
  rc=$?
  if [ $rc -eq 2 ]; then ok; else bad "gate $args: exit $rc, wanted 2: $(head -c 300 "$TMP/err")"; fi
done
if grep -qF '"completed": 10, "hit_rate"' "$G/base.json"; then ok; else bad "gate --out overwrote its baseline"; fi
# A run whose machine's hypervisor took the CPU (replay's cpu_steal) is named in a note; the
# verdict stands. A quiet one (5% or less) is not.
sed 's/"completed": 10,/"completed": 10, "cpu_steal": 0.3,/' "$G/base.json" >"$G/stolen.json"
sed 's/"completed": 10,/"completed": 10, "cpu_steal": 0.05,/' "$G/base.json" >"$G/quiet.json"
expect_out gate_steal_note "other guests 30% of the machine's CPU time during the current run" \
  "$CB" gate --baseline "$G/quiet.json" --current "$G/stolen.json"
sed 's/"overall": 0.5/"overall": 0.4/' "$G/stolen.json" >"$G/stolen_worse.json"
"$CB" gate --baseline "$G/stolen.json" --current "$G/stolen_worse.json" >"$TMP/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -qF "30% of the machine's CPU time during the baseline run" "$TMP/out" \
  && grep -qF "during the current run" "$TMP/out" && grep -qF "1 regression in 8 checks" "$TMP/out"; then ok
else bad "gate with steal on both sides: a regression still fails, both noted: rc=$rc, $(head -c 800 "$TMP/out")"; fi
"$CB" gate --baseline "$G/quiet.json" --current "$G/quiet.json" >"$TMP/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && ! grep -qF "other guests" "$TMP/out"; then ok
else bad "gate noted steal of 5%: rc=$rc, $(head -c 600 "$TMP/out")"; fi
# A replay --compare result's comparison run (its "baseline") is named too: its "comparison"
# ratios divide by that run's times.
printf '{"summary": %s, "baseline": {"completed": 10, "cpu_steal": 0.4}}' "$(cat "$G/quiet.json")" \
  >"$G/compare_stolen.json"
expect_out gate_steal_compare_note "40% of the machine's CPU time during the current run's --compare baseline (baseline.cpu_steal)" \
  "$CB" gate --baseline "$G/quiet.json" --current "$G/compare_stolen.json"
# bench cpu results that ran other BLAS kernels are named in a note; the verdict stands.
printf '{"bench": "cpu", "blas": "OpenBLAS 0.3.21, core Prescott", "prefill_tok_s": 68.0}' >"$G/blas1.json"
printf '{"bench": "cpu", "blas": "OpenBLAS 0.3.21, core SkylakeX", "prefill_tok_s": 240.0}' >"$G/blas2.json"
expect_out gate_blas_note "the runs' BLAS differ (baseline: OpenBLAS 0.3.21, core Prescott; current: OpenBLAS 0.3.21, core SkylakeX)" \
  "$CB" gate --baseline "$G/blas1.json" --current "$G/blas2.json" --max-regression prefill_tok_s=5
"$CB" gate --baseline "$G/blas1.json" --current "$G/blas1.json" --max-regression prefill_tok_s=5 >"$TMP/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && ! grep -qF "BLAS differ" "$TMP/out"; then ok
else bad "gate noted a BLAS difference between equal runs: rc=$rc, $(head -c 600 "$TMP/out")"; fi
# Two checkpoints of one name ("llama") but another shape are different models.
printf '{"model": {"name": "llama", "shape": "llama 6x288"}, "summary": {"completed": 1}}' >"$G/m1.json"
printf '{"model": {"name": "llama", "shape": "llama 8x512"}, "summary": {"completed": 1}}' >"$G/m2.json"
expect_error gate_model_shape "$G/m2.json" "model shape llama 6x288 vs llama 8x512" \
  "$CB" gate --baseline "$G/m1.json" --current "$G/m2.json"
# A given bound adds to the default ones: a hit-rate drop still fails beside a TTFT bound,
# unless --no-default-bounds asks for the given ones alone.
"$CB" gate --baseline "$G/base.json" --current "$G/worse.json" --max-regression ttft_ms.mean=5 >"$TMP/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -qF "1 regression in 9 checks" "$TMP/out"; then ok
else bad "gate with a bound dropped the defaults: rc=$rc, $(head -c 600 "$TMP/out")"; fi
# A summary without the default metrics (e.g. a perplexity result) gates on its own bound.
printf '{"ppl": 4.0}' >"$G/ppl_base.json"
printf '{"ppl": 4.1}' >"$G/ppl_cur.json"
expect_line gate_ppl_only "gate: no regression in 1 check" "$CB" gate --baseline "$G/ppl_base.json" \
  --current "$G/ppl_cur.json" --max-regression ppl=5
# Evaluations and benchmarks gate in their metrics' own directions: a faster bench, a higher
# accuracy and a lower perplexity are improvements, not regressions.
printf '{"bench": "cpu", "prefill_tok_s": 100.0, "decode_ms_per_token": 10.0, "sgemm_gflops": 50.0}' >"$G/bench_base.json"
printf '{"bench": "cpu", "prefill_tok_s": 150.0, "decode_ms_per_token": 5.0, "sgemm_gflops": 80.0}' >"$G/bench_cur.json"
expect_out gate_bench_faster "no regression in 3 checks" "$CB" gate --baseline "$G/bench_base.json" \
  --current "$G/bench_cur.json" --max-regression prefill_tok_s=5 \
  --max-regression decode_ms_per_token=5 --max-regression sgemm_gflops=5
printf '{"task": "mmlu", "file_sha256": "aa", "acc_micro": 0.5, "ppl": 4.0}' >"$G/acc_base.json"
printf '{"task": "mmlu", "file_sha256": "aa", "acc_micro": 0.6, "ppl": 3.0}' >"$G/acc_cur.json"
expect_out gate_acc_higher "| acc_micro | 0.5 | 0.6 | +20.00 | 1.00 | higher | improved |" \
  "$CB" gate --baseline "$G/acc_base.json" --current "$G/acc_cur.json" \
  --max-regression acc_micro=1 --max-regression ppl=1
"$CB" gate --baseline "$G/acc_base.json" --current "$G/acc_cur.json" --max-regression acc_micro=1:exact >"$TMP/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -qF "| acc_micro | 0.5 | 0.6 | +20.00 | 1.00 | exact | REGRESSION |" "$TMP/out"; then ok
else bad "gate with a direction given: rc=$rc, $(head -c 600 "$TMP/out")"; fi
# Evaluations of other data are not comparable.
printf '{"task": "mmlu", "file_sha256": "bb", "acc_micro": 0.6}' >"$G/acc_other.json"
expect_error gate_other_data "$G/acc_other.json" "file aa vs bb" \
  "$CB" gate --baseline "$G/acc_base.json" --current "$G/acc_other.json" --max-regression acc_micro=1
# MMLU and PIQA name their files in a map: other files (whatever their paths), or another
# --limit, are another setup; the same files under another root are not.
printf '{"task": "piqa", "limit": 20, "files_sha256": {"/a/valid.jsonl": "aa", "/a/valid-labels.lst": "cc"}, "results": [{"acc": 0.5}]}' >"$G/pq_base.json"
printf '{"task": "piqa", "limit": 20, "files_sha256": {"/b/valid.jsonl": "aa", "/b/valid-labels.lst": "cc"}, "results": [{"acc": 0.5}]}' >"$G/pq_moved.json"
printf '{"task": "piqa", "limit": 20, "files_sha256": {"/a/valid.jsonl": "bb", "/a/valid-labels.lst": "cc"}, "results": [{"acc": 0.6}]}' >"$G/pq_other.json"
printf '{"task": "piqa", "limit": 40, "files_sha256": {"/a/valid.jsonl": "aa", "/a/valid-labels.lst": "cc"}, "results": [{"acc": 0.6}]}' >"$G/pq_limit.json"
expect_line gate_moved_data "gate: no regression in 1 check" "$CB" gate --baseline "$G/pq_base.json" \
  --current "$G/pq_moved.json" --max-regression results.0.acc=0
expect_error gate_other_files "$G/pq_other.json" "data files (2 vs 2, checksums differ)" \
  "$CB" gate --baseline "$G/pq_base.json" --current "$G/pq_other.json" --max-regression results.0.acc=0
expect_error gate_other_limit "$G/pq_limit.json" "limit 20 vs 40" \
  "$CB" gate --baseline "$G/pq_base.json" --current "$G/pq_limit.json" --max-regression results.0.acc=0
# A setting only one of the two records (an older build's result) is a difference too.
printf '{"task": "piqa", "files_sha256": {"/a/valid.jsonl": "aa", "/a/valid-labels.lst": "cc"}, "results": [{"acc": 0.5}]}' >"$G/pq_nolimit.json"
expect_error gate_setting_one_sided "$G/pq_nolimit.json" "limit 20 vs absent" \
  "$CB" gate --baseline "$G/pq_base.json" --current "$G/pq_nolimit.json" --max-regression results.0.acc=0
# results.0.ppl is the first method's: runs of other methods (or truncation) are other setups.
printf '{"task": "perplexity", "truncate_ratio": 0.5, "results": [{"method": "TT", "ppl": 4.0}, {"method": "CA", "ppl": 4.1}]}' >"$G/ov_all.json"
printf '{"task": "perplexity", "truncate_ratio": 0.5, "results": [{"method": "CA", "ppl": 4.1}]}' >"$G/ov_ca.json"
printf '{"task": "perplexity", "truncate_ratio": 0.25, "results": [{"method": "TT", "ppl": 4.0}, {"method": "CA", "ppl": 4.1}]}' >"$G/ov_quarter.json"
expect_error gate_other_methods "$G/ov_ca.json" "methods TT,CA vs CA" \
  "$CB" gate --baseline "$G/ov_all.json" --current "$G/ov_ca.json" --max-regression results.0.ppl=1
expect_error gate_other_truncation "$G/ov_quarter.json" "truncate_ratio 0.5 vs 0.25" \
  "$CB" gate --baseline "$G/ov_all.json" --current "$G/ov_quarter.json" --max-regression results.0.ppl=1
# generate: another prompt or sampling is another setup.
printf '{"task": "generate", "prompt": "Once", "n_tokens": 8, "sampling": {"temperature": 0}, "decode_tok_s": 100}' >"$G/gen_a.json"
printf '{"task": "generate", "prompt": "The dog", "n_tokens": 8, "sampling": {"temperature": 0.8}, "decode_tok_s": 90}' >"$G/gen_b.json"
expect_error gate_other_prompt "$G/gen_b.json" "prompt differs" \
  "$CB" gate --baseline "$G/gen_a.json" --current "$G/gen_b.json" --max-regression decode_tok_s=5
# The same prompt tokenized otherwise, a preset's other weights, forward's other input, MMLU's
# overflow methods after another history: other setups.
printf '{"task": "generate", "prompt": "Once", "prompt_ids": [1, 9], "weights_seed": 1, "decode_tok_s": 90}' >"$G/gen_c.json"
printf '{"task": "generate", "prompt": "Once", "prompt_ids": [1, 7], "weights_seed": 2, "decode_tok_s": 90}' >"$G/gen_d.json"
expect_error gate_other_tokens_and_seed "$G/gen_d.json" "weights_seed 1 vs 2, prompt's tokens differ" \
  "$CB" gate --baseline "$G/gen_c.json" --current "$G/gen_d.json" --max-regression decode_tok_s=5
printf '{"task": "forward", "tokens": [1, 403], "logits": [[0.5]]}' >"$G/fw_a.json"
printf '{"task": "forward", "tokens": [1, 407], "logits": [[0.5]]}' >"$G/fw_b.json"
expect_error gate_other_forward_input "$G/fw_b.json" "input tokens differ" \
  "$CB" gate --baseline "$G/fw_a.json" --current "$G/fw_b.json" --max-regression logits.0.0=0
printf '{"task": "mmlu", "method": "tt", "history_sha256": "aa", "acc_micro": 0.5}' >"$G/hist_a.json"
printf '{"task": "mmlu", "method": "tt", "history_sha256": "bb", "acc_micro": 0.5}' >"$G/hist_b.json"
expect_error gate_other_history "$G/hist_b.json" "history file differs" \
  "$CB" gate --baseline "$G/hist_a.json" --current "$G/hist_b.json" --max-regression acc_micro=1
expect_error gate_nothing_to_check "--max-regression" "none given, and the baseline has none of" \
  "$CB" gate --baseline "$G/pq_base.json" --current "$G/pq_moved.json"
expect_line gate_no_defaults "gate: no regression in 1 check" "$CB" gate --baseline "$G/base.json" \
  --current "$G/worse.json" --max-regression ttft_ms.mean=5 --no-default-bounds
expect_error gate_bound_twice "ttft_ms.mean" "twice" "$CB" gate --baseline "$G/base.json" \
  --current "$G/better.json" --max-regression ttft_ms.mean=5 --max-regression ttft_ms.mean=9
expect_error gate_malformed "$G/broken.json" "not valid JSON" "$CB" gate --baseline "$G/base.json" --current "$G/broken.json"
expect_error gate_missing_file "$G/nope.json" "cannot be opened" "$CB" gate --baseline "$G/nope.json" --current "$G/base.json"
expect_error gate_missing_metric "tpot_ms.p99" "$G/base.json" "$CB" gate --baseline "$G/base.json" --current "$G/better.json" --max-regression tpot_ms.p99=5
expect_error gate_bad_bound "ttft_ms.mean" "METRIC=PCT" "$CB" gate --baseline "$G/base.json" --current "$G/better.json" --max-regression ttft_ms.mean

# gate refuses runs of another trace, model, mode or execution unless told otherwise.
GBASE="$(dirname "$0")/../../results/baselines/replay-stories260K-lru.json"
python3 - "$GBASE" "$TMP/other_trace.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["trace"]["sha256"] = "0" * 64
json.dump(j, open(sys.argv[2], "w"))
PY
expect_error gate_other_trace "$TMP/other_trace.json" "not a run of the baseline's setup" \
  "$CB" gate --baseline "$GBASE" --current "$TMP/other_trace.json"
# ... or of another part of it (--limit) or other settings; the store's directory is no setting.
python3 - "$GBASE" "$TMP" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["trace"]["sessions"] -= 1
json.dump(j, open(sys.argv[2] + "/fewer_sessions.json", "w"))
j = json.load(open(sys.argv[1]))
j["config"]["max_batch"] += 4
j["config"]["store"]["policy"] = "fifo"
json.dump(j, open(sys.argv[2] + "/other_config.json", "w"))
j = json.load(open(sys.argv[1]))
j["config"]["store"]["store_dir"] = "/elsewhere"
json.dump(j, open(sys.argv[2] + "/other_dir.json", "w"))
PY
expect_error gate_fewer_sessions "$TMP/fewer_sessions.json" "trace sessions" \
  "$CB" gate --baseline "$GBASE" --current "$TMP/fewer_sessions.json"
expect_error gate_other_config "$TMP/other_config.json" \
  'config max_batch 4 vs 8, config store.policy "lru" vs "fifo"' \
  "$CB" gate --baseline "$GBASE" --current "$TMP/other_config.json"
expect_ok gate_other_store_dir "$CB" gate --baseline "$GBASE" --current "$TMP/other_dir.json"
# A setting only one of the two records (a result of another build) is compared too, either way
# round; so are the tokens replayed (another tokenizer on the same ShareGPT file), sim's
# hardware profile, and a benchmark's or evaluation's backend, weights and shape.
python3 - "$GBASE" "$TMP" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
del j["config"]["truncate_align"]
json.dump(j, open(sys.argv[2] + "/no_align.json", "w"))
j = json.load(open(sys.argv[1]))
j["trace"]["input_tokens"] += 1
json.dump(j, open(sys.argv[2] + "/other_tokens.json", "w"))
for name, peak, source in (("sim_a", 312.0, "a"), ("sim_b", 400.0, "a"), ("sim_c", 312.0, "c")):
    j = json.load(open(sys.argv[1]))
    j["profile"] = {"name": "a100-80gb", "gemm_tflops": peak, "sources": {"gemm_tflops": source}}
    json.dump(j, open(sys.argv[2] + "/" + name + ".json", "w"))
PY
expect_error gate_setting_absent_current "$TMP/no_align.json" "config truncate_align" \
  "$CB" gate --baseline "$GBASE" --current "$TMP/no_align.json"
expect_error gate_setting_absent_baseline "$GBASE" "config truncate_align absent vs" \
  "$CB" gate --baseline "$TMP/no_align.json" --current "$GBASE"
expect_error gate_other_tokens "$TMP/other_tokens.json" "trace input tokens" \
  "$CB" gate --baseline "$GBASE" --current "$TMP/other_tokens.json"
expect_error gate_other_profile "$TMP/sim_b.json" "profile a100-80gb vs another a100-80gb" \
  "$CB" gate --baseline "$TMP/sim_a.json" --current "$TMP/sim_b.json"
# The same figures with other words for their sources (a later build's) are the same profile.
expect_ok gate_profile_sources_reworded "$CB" gate --baseline "$TMP/sim_a.json" --current "$TMP/sim_c.json"
printf '{"bench": "cpu", "layers": 1, "weights": "f32", "prefill_tok_s": 100.0}' >"$G/b1.json"
printf '{"bench": "cpu", "layers": 5, "weights": "bf16", "prefill_tok_s": 100.0}' >"$G/b5.json"
expect_error gate_bench_shape "$G/b5.json" "weights f32 vs bf16, layers 1 vs 5" \
  "$CB" gate --baseline "$G/b1.json" --current "$G/b5.json" --max-regression prefill_tok_s=5
printf '{"convention": "llama.cpp", "dataset": "text", "backend": "cpu", "ppl": 4.0}' >"$G/pc.json"
printf '{"convention": "llama.cpp", "dataset": "text", "backend": "cpu bf16", "ppl": 4.0}' >"$G/pb.json"
expect_error gate_ppl_backend "$G/pb.json" "backend cpu vs cpu bf16" \
  "$CB" gate --baseline "$G/pc.json" --current "$G/pb.json" --max-regression ppl=5
# expect_refused NAME NEEDLE BASELINE CURRENT [ARG...]: gate refuses the pair as runs of other
# setups (exit 2, the needle in its error line).
expect_refused() {
  local name="$1" needle="$2" base="$3" cur="$4"
  shift 4
  "$CB" gate --baseline "$base" --current "$cur" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ $rc -eq 2 ] && grep -qF "not a run of the baseline's setup" "$TMP/err" \
    && grep -qF -- "$needle" "$TMP/err"; then ok
  else bad "$name: rc=$rc, wanted 2 and '$needle': $(head -c 600 "$TMP/out") $(head -c 600 "$TMP/err")"; fi
}
# A setup section one result has and the other lacks hides all its settings from the
# comparison: a difference, either way round (sim_a holds every section, profile too).
python3 - "$TMP/sim_a.json" "$TMP" <<'PY2'
import json, sys
for s in ("tool", "trace", "config", "model", "mode", "execution", "backend", "profile"):
    j = json.load(open(sys.argv[1]))
    del j[s]
    json.dump(j, open(sys.argv[2] + "/no_" + s + ".json", "w"))
PY2
for s in tool trace config model mode execution backend profile; do
  expect_refused "gate_no_${s}_current" "section $s present vs absent" "$TMP/sim_a.json" "$TMP/no_$s.json"
  expect_refused "gate_no_${s}_baseline" "section $s absent vs present" "$TMP/no_$s.json" "$TMP/sim_a.json"
done
expect_ok gate_no_section_both "$CB" gate --baseline "$TMP/no_config.json" --current "$TMP/no_config.json"
# bench store runs of another entry size, chunk size, traffic, I/O mode or threads, or whose
# reference, policy or journal benchmarks ran other sizes, are other setups; their measurements
# and --reps are not settings.
python3 - "$TMP" <<'PY2'
import json, sys
base = {"bench": "store", "mode": "real", "reps": 5, "entry_bytes": 8388608,
        "traffic_bytes": 33554432, "entries_per_rep": 4, "n_layers": 32, "token_bytes": 8192,
        "tokens_per_entry": 32, "chunk_bytes": 1048576, "io_threads": 4, "io": "auto",
        "io_backend": "io_uring", "parallel_ref_depth": 32, "parallel_ref_threads": 4,
        "policy_entries": 100000, "policy_queue": 100000, "ssd_read_gbs": 2.0,
        "store_notes": ["ssd: 256 MiB"], "journal": {"entries": 10, "commit_us": 150.0}}
def write(name, **changes):
    j = json.loads(json.dumps(base))
    for k, v in changes.items():
        if v is None:
            del j[k]
        else:
            j[k] = v
    json.dump(j, open(sys.argv[1] + "/bs_" + name + ".json", "w"))
write("base")
write("measured", reps=1, ssd_read_gbs=1.0, store_notes=["ssd: 128 MiB"],
      journal={"entries": 10, "commit_us": 300.0})
write("entry", entry_bytes=4194304, entries_per_rep=8, tokens_per_entry=16)
write("chunk", chunk_bytes=65536)
write("traffic", traffic_bytes=67108864, entries_per_rep=8)
write("io", io="pread", io_backend="pread")
write("backend", io_backend="pread")  # --io auto on a machine without io_uring
write("threads", io_threads=8)
write("ref", parallel_ref_depth=8, parallel_ref_threads=1)
write("policy", policy_entries=1000)
write("journal", journal={"entries": 100, "commit_us": 150.0})
write("no_journal", journal=None)
write("no_chunk", chunk_bytes=None)
PY2
expect_ok gate_bench_store_measured "$CB" gate --baseline "$TMP/bs_base.json" \
  --current "$TMP/bs_measured.json" --max-regression ssd_read_gbs=60
for c in "entry entry_bytes" "chunk chunk_bytes" "traffic traffic_bytes" "io io \"auto\" vs \"pread\"" \
  "backend io_backend \"io_uring\" vs \"pread\"" \
  "threads io_threads" "ref parallel_ref_depth" "policy policy_entries" "journal journal_entries" \
  "no_journal journal_entries 10 vs absent" "no_chunk chunk_bytes 1048576 vs absent"; do
  expect_refused "gate_bench_store_${c%% *}" "${c#* }" "$TMP/bs_base.json" "$TMP/bs_${c%% *}.json" \
    --max-regression ssd_read_gbs=60
done
expect_refused gate_bench_store_chunk_absent_baseline "chunk_bytes absent vs 1048576" \
  "$TMP/bs_no_chunk.json" "$TMP/bs_base.json" --max-regression ssd_read_gbs=60
# Integers beyond 2^53 compare exactly (as doubles, 2^53 + 1 is 2^53): an exact bound fails on
# one byte, and the table shows both values with all their digits.
printf '{"bytes_loaded": 9007199254740992}' >"$G/big_a.json"
printf '{"bytes_loaded": 9007199254740993}' >"$G/big_b.json"
"$CB" gate --baseline "$G/big_a.json" --current "$G/big_b.json" --max-regression bytes_loaded=0 \
  >"$TMP/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -qF "| bytes_loaded | 9007199254740992 | 9007199254740993 |" "$TMP/out" \
  && grep -qF "REGRESSION" "$TMP/out"; then ok
else bad "gate of integers beyond 2^53: rc=$rc, $(head -c 600 "$TMP/out")"; fi
# perplexity --method's overflow study is a perplexity result, not an ablation's.
printf '{"study": "overflow", "dataset": "text", "results": [{"method": "TT", "ppl": 4.0}]}' >"$G/ovf.json"
expect_error gate_overflow_kind "$G/pc.json" "result perplexity overflow vs perplexity" \
  "$CB" gate --baseline "$G/ovf.json" --current "$G/pc.json" --max-regression ppl=5
# A replay --compare result's ratios are metrics: comparison.gpu_time_x judged higher.
printf '{"trace": {}, "summary": {"completed": 1}, "comparison": {"gpu_time_x": 2.0}}' >"$G/cmp_a.json"
printf '{"trace": {}, "summary": {"completed": 1}, "comparison": {"gpu_time_x": 1.5}}' >"$G/cmp_b.json"
"$CB" gate --baseline "$G/cmp_a.json" --current "$G/cmp_b.json" --no-default-bounds \
  --max-regression comparison.gpu_time_x=5 >"$TMP/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -qF "| comparison.gpu_time_x | 2 | 1.5 | -25.00 | 5.00 | higher | REGRESSION |" "$TMP/out"; then ok
else bad "gate comparison.gpu_time_x: rc=$rc, $(head -c 600 "$TMP/out")"; fi
# Results of different commands, and perplexities of other --chunks, are other setups; a
# binary file is named as one.
printf '{"convention": "llama.cpp", "dataset": "text", "chunks": 3, "ppl": 4.0}' >"$TMP/ppl3.json"
printf '{"convention": "llama.cpp", "dataset": "text", "chunks": 4, "ppl": 4.0}' >"$TMP/ppl4.json"
expect_error gate_other_chunks "$TMP/ppl4.json" "chunks 3 vs 4" \
  "$CB" gate --baseline "$TMP/ppl3.json" --current "$TMP/ppl4.json" --max-regression ppl=5
expect_error gate_other_result "$TMP/ppl3.json" "result replay vs perplexity" \
  "$CB" gate --baseline "$GBASE" --current "$TMP/ppl3.json"
printf 'GGUF\0\0\0' >"$TMP/binary.json"
expect_error gate_binary "$TMP/binary.json" "a binary file?" \
  "$CB" gate --baseline "$GBASE" --current "$TMP/binary.json"
expect_out gate_allow_mismatch "compared anyway" \
  "$CB" gate --baseline "$GBASE" --current "$TMP/other_trace.json" --allow-mismatch
# Exit 1 is a regression only: a gate that cannot compare exits 2.
"$CB" gate --baseline "$G/base.json" --current "$G/broken.json" >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] && ok || bad "gate on a malformed summary: exit $rc, want 2"

echo "gate: $pass passed, $fail failed"
[ $fail -eq 0 ]
