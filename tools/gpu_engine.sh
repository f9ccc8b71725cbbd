#!/usr/bin/env bash
# tools/gpu_engine.sh CACHEBENCH OUT: the engine's GPU paths that the CLI suites do not reach,
# on stories260K and the ShareGPT sample (CACHEBENCH_DATA, default ../shared):
#   - chat --backend cuda: three turns, the later ones reusing the earlier ones' KV;
#   - replay --backend cuda with a 1 MiB DRAM tier (64 KiB chunks) over an SSD tier: hits in
#     both, write-back ahead of eviction (--clean-ahead), demotions with their budget and save
#     admission, and overflow cuts on arrival (--ctx 256), against recompute in the same run;
#   - the same replay with --kv-entries native (entries in the GPU's fp16), and with
#     --backend cpu, for the hit rates' comparison.
# Prints one line per check (ok / FAIL) and exits 1 when any failed.
set -u
CB="${1:?usage: tools/gpu_engine.sh CACHEBENCH OUT}"
OUT="${2:?usage: tools/gpu_engine.sh CACHEBENCH OUT}"
DATA="${CACHEBENCH_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/shared}"
MODEL="$DATA/models/stories260K/stories260K.gguf"
TRACE="$DATA/data/sharegpt/sharegpt_v3_multiturn_8conv.json"
mkdir -p "$OUT"
fails=0
check() {  # check NAME RC [CONDITION_PY JSON]
  local name="$1" rc="$2"
  if [ "$rc" -ne 0 ]; then
    echo "FAIL $name (exit $rc)"; fails=$((fails + 1)); return
  fi
  if [ $# -ge 4 ]; then
    if python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($3) else 1)" "$4"; then
      echo "ok   $name"
    else
      echo "FAIL $name: $3"; fails=$((fails + 1))
    fi
  else
    echo "ok   $name"
  fi
}

printf 'Once upon a time\nThe cat sat\n/stats\nShe ran home\n/quit\n' |
  "$CB" chat -m "$MODEL" --backend cuda --max-tokens 24 >"$OUT/chat.txt" 2>&1
check "chat --backend cuda" $?
grep -q "reused" "$OUT/chat.txt" && echo "ok   chat reports reused tokens" ||
  { echo "FAIL chat: no reuse line"; fails=$((fails + 1)); }

for run in cuda cuda-native cpu; do
  backend="${run%-native}" entries=f32
  [ "$run" = cuda-native ] && entries=native
  store="$(mktemp -d)"
  "$CB" replay "$TRACE" -m "$MODEL" --backend "$backend" --kv-entries "$entries" --mode ca \
    --compare re --ctx 256 --dram 1M --chunk-size 64K --ssd 64M --store-dir "$store" \
    --clean-ahead 256K --quiet --out "$OUT/replay-$run.json" >"$OUT/replay-$run.txt" 2>&1
  rc=$?
  check "replay --backend $backend --kv-entries $entries (DRAM over SSD, write-back, cuts)" $rc \
    "j['summary']['save_failures'] == 0 and j['summary']['load_failures'] == 0 and \
     j['summary']['store']['hits'] > 0 and j['summary']['store']['truncations'] > 0" \
    "$OUT/replay-$run.json"
  [ $rc -eq 0 ] && python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))['summary']; st = s['store']
print('     reused/recomputed %d/%d, hits dram %d ssd %d, cleaned %d, copies reused %d, cuts %d, '
      'TTFT mean %.2f ms' % (s['reused_tokens'], s['recomputed_tokens'], st['tiers']['dram']['hits'],
      st['tiers']['ssd']['hits'], st['ssd_chunks_cleaned'], st['ssd_copy_chunks_reused'],
      st['truncations'], s['ttft_ms']['mean']))
" "$OUT/replay-$run.json"
  rm -rf "$store"
done
echo "== $fails failed"
[ "$fails" -eq 0 ]
