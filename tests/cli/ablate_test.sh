#!/usr/bin/env bash
# `cachebench ablate` end to end: every study writes its JSON, a gnuplot script and an SVG
# that parses, prints its table, and its rows hold the properties the study is about (CA
# below RE, synchronous saving never faster, Belady's hit rate an upper bound, more storage
# never fewer hits, ...); bad arguments give a clear error.
# Usage: ablate_test.sh CACHEBENCH_BINARY SCRATCH_DIR sim|real
set -uo pipefail
CB="$1"
TMP="$2"
WHAT="$3"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DATA="${CACHEBENCH_DATA:-$ROOT/../shared}"
MODEL="$DATA/models/stories260K/stories260K.gguf"
mkdir -p "$TMP"
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# check NAME FILE PYTHON: the expression over r (rows) and j (the JSON) must hold.
check() {
  if python3 - "$2" "$3" <<'EOF'; then ok; else bad "$1"; fi
import json, sys
j = json.load(open(sys.argv[1]))
r = j["rows"]
def v(series, label, key):
    for x in r:
        if x["series"] == series and x["label"] == label:
            return x["values"][key]
    raise SystemExit("no row %s / %s" % (series, label))
ok = eval(sys.argv[2])
if not ok:
    print(json.dumps(r)[:1500])
sys.exit(0 if ok else 1)
EOF
}

# svg STUDY DIR: the plot exists and is well-formed XML with an <svg> root.
svg() {
  if python3 -c "import sys, xml.etree.ElementTree as E; t=E.parse(sys.argv[1]); sys.exit(0 if t.getroot().tag.endswith('svg') else 1)" "$2/$1.svg" 2>/dev/null; then
    ok
  else
    bad "$1: $2/$1.svg is missing or not SVG"
  fi
}

run() {  # name, args...: the command must succeed
  local name="$1"
  shift
  if "$CB" ablate "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
    ok
  else
    bad "ablate $*: $(tail -c 600 "$TMP/$name.err")"
  fi
}

fails() {  # name, expected text, args...: the command must fail naming the problem, exit 2
  local name="$1" want="$2" rc
  shift 2
  "$CB" ablate "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  rc=$?
  if [ $rc -ne 2 ]; then
    bad "ablate $*: exit $rc, wanted 2 (a usage error): $(head -c 400 "$TMP/$name.err")"
  elif ! grep -q -- "$want" "$TMP/$name.err"; then
    bad "ablate $*: no '$want' in: $(head -c 400 "$TMP/$name.err")"
  else
    ok
  fi
}

if [ "$WHAT" = sim ]; then
  O="$TMP/sim"
  run micro recompute-vs-ca --batch 4 --out "$O" --quiet
  check "recompute-vs-ca: CA below RE at every split" "$O/recompute-vs-ca.json" \
    "all(v('CA (preload)', l, 'gpu_time_ms') < v('RE', l, 'gpu_time_ms') and v('CA (no preload)', l, 'gpu_time_ms') < v('RE', l, 'gpu_time_ms') for l in ['500/500','700/300','900/100'])"
  check "recompute-vs-ca: preloading never slower" "$O/recompute-vs-ca.json" \
    "all(v('CA (preload)', x['label'], 'gpu_time_ms') <= v('CA (no preload)', x['label'], 'gpu_time_ms') + 1e-6 for x in r)"
  check "recompute-vs-ca: CA gains grow with the history share" "$O/recompute-vs-ca.json" \
    "v('CA (preload)', '900/100', 'gpu_time_ms') < v('CA (preload)', '500/500', 'gpu_time_ms')"
  # Loads start layer-major across the batch, so where compute outlasts the load (500/500) the
  # layer-wise pipeline hides nearly all of it: each job's layer l need not wait for the whole
  # entries of the jobs ahead of it.
  check "recompute-vs-ca: preloading hides the load at 500/500" "$O/recompute-vs-ca.json" \
    "v('CA (preload)', '500/500', 'preload_stall_ms') < 0.1 * v('CA (no preload)', '500/500', 'preload_stall_ms')"
  grep -q "| RE | 500/500 |" "$TMP/micro.out" && ok || bad "recompute-vs-ca: no table"
  svg recompute-vs-ca "$O"
  run preload preload --batch 4 --out "$O" --quiet
  check "preload: 5 rows, preloading never slower than none" "$O/preload.json" \
    "len(r) == 5 and all(x['values']['gpu_time_ms'] <= r[0]['values']['gpu_time_ms'] + 1e-6 for x in r)"
  # A read buffer fills behind the loads of the batch admitted before its job: never slower
  # than no buffer, and it hides the second batch's first layer where compute outlasts the
  # loads (Mistral-7B's GQA entries; the time grew with the buffer when buffers started as
  # their jobs were prepared).
  run preload_mistral preload --model preset:mistral-7b --batch 4 --out "$O/mistral" --quiet
  check "preload: a read buffer never slower than none, and it helps" "$O/mistral/preload.json" \
    "all(x['values']['gpu_time_ms'] <= r[1]['values']['gpu_time_ms'] + 1e-6 for x in r[2:]) and r[2]['values']['preload_stall_ms'] < r[1]['values']['preload_stall_ms']"
  svg preload "$O"
  run async async-save --batch 4 --out "$O" --quiet
  check "async-save: sync saving never faster, and it stalls" "$O/async-save.json" \
    "all(v('sync save', l, 'duration_s') >= v('async save', l, 'duration_s') and v('sync save', l, 'save_stall_ms') > 0 and v('async save', l, 'save_stall_ms') == 0 for l in ['1000','1600'])"
  # The execution time runs until the last synchronous save is done, not the last token: the
  # sync saves' whole stall is on it.
  check "async-save: the execution time holds every synchronous save" "$O/async-save.json" \
    "all(v('sync save', l, 'duration_s') - v('async save', l, 'duration_s') >= 0.99e-3 * v('sync save', l, 'save_stall_ms') for l in ['1000','1600'])"
  svg async-save "$O"
  T="--sessions 300 --out $O --quiet"
  run eviction eviction $T
  check "eviction: 8 rows; Belady bounds every policy; 10TB never below 2TB" "$O/eviction.json" \
    "len(r) == 8 and all(v(s, 'belady', 'hit') + 1e-9 >= v(s, p, 'hit') for s in ['128GB + 2TB', '128GB + 10TB'] for p in ['scheduler-aware', 'lru', 'fifo']) and all(v('128GB + 10TB', p, 'hit') + 1e-9 >= v('128GB + 2TB', p, 'hit') for p in ['scheduler-aware', 'lru', 'fifo', 'belady'])"
  check "eviction: profile recorded" "$O/eviction.json" "j['profile']['name'] == 'a100-80gb' and j['config']['execution'] == 'sim'"
  check "eviction: a sim run's clock is virtual: no cpu_steal_max" "$O/eviction.json" \
    "all('cpu_steal_max' not in x['values'] for x in r) and not any('hypervisor' in n for n in j['notes'])"
  # Every run whose mean TTFT is over a minute is counted in a note, and only then.
  check "eviction: saturated runs noted" "$O/eviction.json" \
    "(sum(x['values']['ttft_mean_ms'] > 60000 for x in r) > 0) == any('saturated' in n for n in j['notes'])"
  svg eviction "$O"
  run truncation truncation $T
  check "truncation: CA keeps more history than OF; RE none" "$O/truncation.json" \
    "r[0]['values']['hit'] >= r[1]['values']['hit'] and r[2]['values']['hit'] == 0 and r[0]['values']['gpu_time_s'] <= r[2]['values']['gpu_time_s']"
  svg truncation "$O"
  # A profile that gives no DRAM or SSD size (calibrate writes 0) gets the paper's 128 GB and
  # 10 TB, said on stderr (also with --quiet) and recorded; the file is recorded beside its
  # name. A profile's own sizes are used (its ssd_bytes was ignored for a fixed 10 TB).
  "$CB" calibrate --print-profile a100-80gb >"$TMP/a100.json"
  for v in 0 1e9; do
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['dram_bytes']=d['ssd_bytes']=float(sys.argv[2]); \
json.dump(d, open(sys.argv[3], 'w'))" "$TMP/a100.json" $v "$TMP/prof_$v.json"
    run "trunc_$v" truncation --sessions 300 --quiet --no-plot --profile "$TMP/prof_$v.json" \
      --out "$TMP/trunc_$v"
  done
  for tier in "DRAM size (dram_bytes 0, as calibrate writes), so the studies use the paper's 128GB of DRAM" \
    "SSD size (ssd_bytes 0, as calibrate writes), so truncation, medium and arrival-rate use the paper's 10TB of SSD"; do
    if grep -qF "ablate: note: the profile $TMP/prof_0.json (profile 'a100-80gb') gives no $tier" "$TMP/trunc_0.err"
    then ok; else bad "truncation on a profile of no sizes: no note of $tier: $(cat "$TMP/trunc_0.err")"; fi
  done
  if grep -qF "note:" "$TMP/trunc_1e9.err"; then bad "a profile with sizes noted: $(cat "$TMP/trunc_1e9.err")"; else ok; fi
  check "truncation: the paper's sizes for a profile of none, recorded with the file" "$TMP/trunc_0/truncation.json" \
    "j['config']['dram_bytes'] == 128e9 and j['config']['ssd_bytes'] == 10e12 and j['config']['profile'] == 'a100-80gb' and j['profile_file'] == '$TMP/prof_0.json' and r == json.load(open('$O/truncation.json'))['rows']"
  check "truncation: a profile's 1 GB of DRAM and SSD, recorded, hit less than 128 GB + 10 TB" "$TMP/trunc_1e9/truncation.json" \
    "j['config']['dram_bytes'] == 1e9 and j['config']['ssd_bytes'] == 1e9 and r[0]['values']['hit'] < json.load(open('$O/truncation.json'))['rows'][0]['values']['hit']"
  run medium medium $T
  check "medium: each tier added never lowers the hit rate" "$O/medium.json" \
    "r[0]['values']['hit'] <= r[1]['values']['hit'] + 1e-9 <= r[2]['values']['hit'] + 2e-9 and r[3]['values']['hit'] == 0"
  svg medium "$O"
  run capacity capacity $T
  check "capacity: CCpUT measured; full capacity hits at least as often as 10%" "$O/capacity.json" \
    "j['config']['ccput_bytes'] > 0 and r[-1]['values']['hit'] >= r[0]['values']['hit'] and r[-1]['values']['hit'] > 0.9"
  # The unbounded run that measures CCpUT says how often it hit, the bound of every row.
  check "capacity: the unbounded run's hit rate bounds every row" "$O/capacity.json" \
    "all(x['values']['hit'] <= j['config']['unbounded_hit_rate'] + 1e-9 for x in r) and any('which hit' in n for n in j['notes'])"
  svg capacity "$O"
  run rate arrival-rate $T
  check "arrival-rate: CA hits, RE never; CA prefill throughput above RE" "$O/arrival-rate.json" \
    "all(v('CA', l, 'hit') > 0 and v('RE', l, 'hit') == 0 and v('CA', l, 'prefill_throughput') > v('RE', l, 'prefill_throughput') for l in ['0.5', '2.0'])"
  svg arrival-rate "$O"
  fails unknown "unknown study 'nope'" nope
  fails short_ctx "gives a 512-token window; recompute-vs-ca (1K-token prompts) needs a window of 1001 tokens; use --ctx 1001 or more (at most" \
    recompute-vs-ca --ctx 512 --no-plot
  fails short_model "preload (1K-token histories and 100 new tokens) needs a window of 1101 tokens; use a model whose window is 1101 tokens or more (tiny-llama's is 256)" \
    preload --model preset:tiny-llama --no-plot
  fails realonly "use --mode sim" eviction --mode real --model "$MODEL"
  fails realonly_first "use --mode sim" eviction --mode real --model /no/such.gguf
  fails nomodel "pass --model" preload --mode real
  fails badmode "gpu not in {sim,real}" preload --mode gpu
  # Options this run would ignore are refused: a trace study's for a micro study, and the
  # other way round, and real mode's --reps in sim mode.
  fails trace_opt_micro "--trace: applies to the trace studies" recompute-vs-ca --trace x.json
  fails batch_opt_trace "--batch: applies to the micro studies" eviction --batch 3
  fails reps_in_sim "--reps: sim mode is deterministic" preload --reps 3
  fails rate_sweep "--rate: arrival-rate sweeps the rate itself" arrival-rate --rate 0.25
  fails max_out_micro "--max-output-tokens: applies to the trace studies" async-save --max-output-tokens 5
  fails tokenizer_no_trace "--tokenizer: applies to a ShareGPT --trace only" eviction --tokenizer t.model
  fails gpus_real "--gpus: models hardware in sim mode" preload --mode real --model "$MODEL" --gpus 2
  fails simentries "kv_bytes_per_element" preload --kv-entries native
  touch "$TMP/file"
  fails badout "$TMP/file" preload --batch 2 --out "$TMP/file" --quiet
  fails emptyout "an empty path" preload --batch 2 --out "" --quiet
  # An --out that cannot be written is refused before the study runs: no table printed.
  fails unwritable_out "$TMP/file/sub" preload --batch 2 --out "$TMP/file/sub" --quiet
  if [ -s "$TMP/unwritable_out.out" ]; then bad "ablate ran before refusing its --out"; else ok; fi
  # An existing read-only directory is refused, as root too (who could write in it).
  RO="$TMP/ro_out"
  mkdir -p "$RO"
  chmod 555 "$RO"
  fails ro_out "is read-only" preload --batch 2 --out "$RO" --quiet
  if [ -s "$TMP/ro_out.out" ]; then bad "ablate ran before refusing its read-only --out"; else ok; fi
  chmod 755 "$RO"
  # The files the study writes in --out are checked too, before it runs: a read-only
  # DIR/STUDY.json, a directory where DIR/STUDY.svg goes.
  mkdir -p "$TMP/files_out/preload.svg"
  fails out_svg_dir "preload.svg' is a directory" preload --batch 2 --out "$TMP/files_out" --quiet
  if [ -s "$TMP/out_svg_dir.out" ]; then bad "ablate ran before refusing DIR/STUDY.svg"; else ok; fi
  rmdir "$TMP/files_out/preload.svg"
  : >"$TMP/files_out/preload.json"
  chmod 444 "$TMP/files_out/preload.json"
  fails out_json_ro "preload.json' is read-only" preload --batch 2 --out "$TMP/files_out" --no-plot --quiet
  chmod 644 "$TMP/files_out/preload.json"
  # Real mode's options are refused in sim mode, even with the values real mode defaults to.
  fails sim_backend_cpu "--backend: sim mode runs no model" preload --backend cpu --no-plot
  fails sim_kv_f32 "--kv-entries: sim mode sizes entries" preload --kv-entries f32 --no-plot
  # A ShareGPT text option on a length trace has no effect: refused.
  "$CB" trace synth --sessions 6 --seed 2 --out "$TMP/len6.json" >/dev/null 2>&1
  fails join_on_lengths "--no-join-split: has no effect on a length trace" eviction \
    --trace "$TMP/len6.json" --no-join-split --no-plot
else
  if [ ! -f "$MODEL" ]; then
    echo "SKIP: $MODEL not found (set CACHEBENCH_DATA)"
    exit 0
  fi
  O="$TMP/real"
  run real recompute-vs-ca --mode real --model "$MODEL" --batch 2 --reps 3 --out "$O" --quiet
  check "real recompute-vs-ca: CA below RE with 900 of 1000 tokens stored" "$O/recompute-vs-ca.json" \
    "v('CA (preload)', '900/100', 'gpu_time_ms') < v('RE', '900/100', 'gpu_time_ms') and v('CA (no preload)', '900/100', 'gpu_time_ms') < v('RE', '900/100', 'gpu_time_ms') and j['config']['execution'] == 'real'"
  check "real recompute-vs-ca: every CA turn a hit" "$O/recompute-vs-ca.json" \
    "all(x['values']['hit'] == 1 for x in r if x['series'] != 'RE')"
  # Each point records the most of the CPU the hypervisor took in any repetition; a note
  # says so when that was over 5% (steal_note).
  check "real recompute-vs-ca: cpu_steal_max per point, noted above 5%" "$O/recompute-vs-ca.json" \
    "all(0 <= x['values']['cpu_steal_max'] <= 1 for x in r) and any(x['values']['cpu_steal_max'] > 0.05 for x in r) == any('hypervisor' in n for n in j['notes'])"
  svg recompute-vs-ca "$O"
  run realtrunc truncation --mode real --model "$MODEL" --sessions 6 --ctx 256 --reps 1 \
    --max-output-tokens 32 --out "$O" --quiet
  check "real truncation: CA keeps more history than OF" "$O/truncation.json" \
    "r[0]['values']['hit'] >= r[1]['values']['hit'] and r[0]['values']['hit'] > 0"
  svg truncation "$O"
fi
echo "ablate_test ($WHAT): $pass passed, $fail failed"
[ "$fail" -eq 0 ]
