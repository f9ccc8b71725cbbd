#!/usr/bin/env bash
# Runs fuzz targets of a CACHEBENCH_FUZZ build for a while each (`make fuzz` calls it).
#   fuzz/run.sh BUILD SECONDS [TARGET...]    (default: every fuzz_* target in BUILD/fuzz)
# Seeds: hand-made ones and links to the shared data (CACHEBENCH_DATA, default ../shared),
# written to BUILD/fuzz-seeds by fuzz/make_seeds.py. Each target keeps its corpus in
# BUILD/fuzz-corpus/TARGET (it grows across runs), writes crashes, leaks, timeouts and
# out-of-memory inputs to BUILD/fuzz-artifacts/ and its log to BUILD/fuzz-logs/TARGET.log.
# Exits non-zero when any target found something.
set -u
build=${1:?usage: fuzz/run.sh BUILD SECONDS [TARGET...]}
seconds=${2:?usage: fuzz/run.sh BUILD SECONDS [TARGET...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
data=${CACHEBENCH_DATA:-$here/../../shared}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$build"/fuzz/fuzz_*; do [ -x "$f" ] && targets+=("$(basename "$f")"); done
fi
python3 "$here/make_seeds.py" "$build/fuzz-seeds" "$data" >/dev/null
mkdir -p "$build/fuzz-artifacts" "$build/fuzz-logs"

# Largest input per target: whole small files, the start of large ones.
max_len() {
  case "$1" in
    fuzz_gguf | fuzz_safetensors | fuzz_trace | fuzz_csv | fuzz_json_lines | fuzz_checkpoint)
      echo 65536 ;;
    *) echo 16384 ;;
  esac
}

# JSON parsers get a dictionary of JSON tokens, edge-case numbers and field names.
dict_args() {
  case "$1" in
    fuzz_trace | fuzz_json_lines | fuzz_tokenizer_json | fuzz_safetensors | fuzz_store_marker | \
      fuzz_profile | fuzz_hf_config | fuzz_checkpoint)
      echo "-dict=$here/json.dict" ;;
  esac
}

failed=0
for t in "${targets[@]}"; do
  bin="$build/fuzz/$t"
  if [ ! -x "$bin" ]; then
    echo "== $t: not built ($bin)"
    failed=1
    continue
  fi
  mkdir -p "$build/fuzz-corpus/$t" "$build/fuzz-seeds/$t"
  log="$build/fuzz-logs/$t.log"
  echo "== $t: ${seconds}s"
  CACHEBENCH_DATA="$data" \
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" "$build/fuzz-corpus/$t" "$build/fuzz-seeds/$t" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
    -max_len="$(max_len "$t")" $(dict_args "$t") -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-artifacts/$t-" >"$log" 2>&1
  rc=$?
  grep -E '^#[0-9]+[[:space:]]+(DONE|INITED)' "$log" | tail -n 2 | sed 's/^/   /'
  grep -E '^stat::number_of_executed_units' "$log" | sed 's/^/   /'
  if [ $rc -ne 0 ]; then
    failed=1
    echo "   FOUND (exit $rc): $(grep -m1 -E 'ERROR: |runtime error|deadly signal|Timeout|out-of-memory' "$log")"
    grep -E '^(artifact_prefix|Test unit written to)' "$log" | sed 's/^/   /'
  fi
done
exit $failed
