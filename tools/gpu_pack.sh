#!/usr/bin/env bash
# tools/gpu_pack.sh BUILD PACK: packs what a lent GPU machine needs to run tools/gpu_check.sh
# without building there: BUILD's cachebench and test_cuda (stripped), the shared libraries
# they use that a bare CUDA machine lacks (everything ldd finds outside the CUDA toolkit and
# the C runtime), and a copy of CACHEBENCH_DATA (default ../shared), into PACK/pack.tar.xz.
# On the GPU machine: tar xJf PACK/pack.tar.xz -C /tmp/p, then
#   LD_LIBRARY_PATH=/tmp/p/lib:/usr/local/cuda/lib64 CACHEBENCH_DATA=/tmp/p/shared \
#     DEADLINE=560 bash tools/gpu_check.sh /tmp/p/build /tmp/o STAGES; tar czf $OUT/o.tgz -C /tmp/o .
# (OUT holds more files than a lent machine sends back, hence the tarball; DEADLINE keeps the
# stages inside its 600 s per call, so the tar runs even when a stage runs long.)
set -euo pipefail
BUILD="${1:?usage: tools/gpu_pack.sh BUILD PACK}"
PACK="${2:?usage: tools/gpu_pack.sh BUILD PACK}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DATA="${CACHEBENCH_DATA:-$ROOT/../shared}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build/apps/cachebench" "$stage/build/tests/unit/cuda" "$stage/lib" "$PACK"
strip -o "$stage/build/apps/cachebench/cachebench" "$BUILD/apps/cachebench/cachebench"
strip -o "$stage/build/tests/unit/cuda/test_cuda" "$BUILD/tests/unit/cuda/test_cuda"
for bin in "$stage"/build/apps/cachebench/cachebench "$stage"/build/tests/unit/cuda/test_cuda; do
  ldd "$bin" | awk '/=> \// {print $3}' | grep -v -e cuda -e cublas -e '/libc\.so' -e libm.so \
    -e libdl.so -e libpthread.so -e librt.so -e libgcc_s.so || true
done | sort -u | while read -r lib; do cp -L "$lib" "$stage/lib/"; done
cp -rL "$DATA" "$stage/shared"
tar cJf "$PACK/pack.tar.xz" -C "$stage" build lib shared
ls -l "$PACK/pack.tar.xz"
