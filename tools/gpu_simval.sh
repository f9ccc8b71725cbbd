#!/usr/bin/env bash
# tools/gpu_simval.sh CACHEBENCH OUT: sim against real on a GPU. A profile calibrated on the
# GPU (calibrate --backend cuda) predicts a real GPU replay of the validation test's trace
# (16 synthetic sessions, seed 3, all at once, LRU, answers of at most 48 tokens) through
# preset:llama-7b with a 1,024-token window; tools/compare_turns.py then compares the two
# replays' per-turn tiers and TTFTs, for fp32 store entries and for native (fp16) ones. Writes
# OUT/profile-simval.json and OUT/simval/.
set -euo pipefail
CB="${1:?usage: tools/gpu_simval.sh CACHEBENCH OUT}"
OUT="${2:?usage: tools/gpu_simval.sh CACHEBENCH OUT}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
t="$OUT/simval" m=preset:llama-7b
common=(--mode ca --policy lru --ctx 1024 --max-output-tokens 48 --dram 16G --rate 0 --quiet)
mkdir -p "$t"
"$CB" trace synth --sessions 16 --seed 3 --out "$t/trace.json"
"$CB" calibrate -m "$m" --backend cuda --ctx 1024 --reps 3 --ssd-dir "" \
  --out "$OUT/profile-simval.json"
"$CB" replay "$t/trace.json" -m "$m" --backend cuda "${common[@]}" --csv "$t/real.csv" --out "$t/real.json"
"$CB" replay "$t/trace.json" -m "$m" --sim --profile "$OUT/profile-simval.json" "${common[@]}" \
  --csv "$t/sim.csv" --out "$t/sim.json"
python3 "$ROOT/tools/compare_turns.py" "$t/real.csv" "$t/sim.csv"
# The same real replay with entries in the GPU's own fp16 (half the bytes, no conversion),
# against sim with the same profile but 2-byte entries (what calibrate --kv-entries native
# writes; the timings it fits do not depend on the entries).
"$CB" replay "$t/trace.json" -m "$m" --backend cuda --kv-entries native "${common[@]}" \
  --csv "$t/real-native.csv" --out "$t/real-native.json"
python3 -c "
import json, sys
p = json.load(open(sys.argv[1])); p['kv_bytes_per_element'] = 2; p['name'] += '-native'
json.dump(p, open(sys.argv[2], 'w'), indent=2)" "$OUT/profile-simval.json" "$OUT/profile-simval-native.json"
"$CB" replay "$t/trace.json" -m "$m" --sim --profile "$OUT/profile-simval-native.json" "${common[@]}" \
  --csv "$t/sim-native.csv" --out "$t/sim-native.json"
echo "== --kv-entries native"
python3 "$ROOT/tools/compare_turns.py" "$t/real-native.csv" "$t/sim-native.csv"
