#!/usr/bin/env python3
"""compare_turns.py REAL.csv SIM.csv: how well a sim replay predicts a real one.

Both files are per-turn CSVs of `cachebench replay --csv` for the same trace and settings.
Prints the turns whose tier (hit, miss, none) differs, and the sim/real ratios of TTFT mean
and p90; exits 1 when the files do not hold the same turns.
"""
import csv
import statistics
import sys


def load(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["warmup"] == "0"]
    return {(int(r["session"]), int(r["turn"])): r for r in rows}


def p90(xs):
    # Linear between the closest ranks, as the summaries' percentiles (and numpy's default).
    xs = sorted(xs)
    pos = 0.9 * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    real, sim = load(sys.argv[1]), load(sys.argv[2])
    if real.keys() != sim.keys():
        print(f"the files hold different turns: {len(real)} real, {len(sim)} sim")
        return 1
    differ = [k for k in sorted(real) if real[k]["tier"] != sim[k]["tier"]]
    for k in differ:
        print(f"session {k[0]} turn {k[1]}: real {real[k]['tier']}, sim {sim[k]['tier']}")
    rt = [float(r["ttft_ms"]) for r in real.values()]
    st = [float(r["ttft_ms"]) for r in sim.values()]
    print(f"turns {len(real)}, tiers differ on {len(differ)}")
    print(f"TTFT mean real {statistics.mean(rt):.2f} ms, sim {statistics.mean(st):.2f} ms, "
          f"ratio {statistics.mean(st) / statistics.mean(rt):.3f}")
    print(f"TTFT p90  real {p90(rt):.2f} ms, sim {p90(st):.2f} ms, ratio {p90(st) / p90(rt):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
