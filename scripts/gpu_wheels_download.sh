#!/usr/bin/env bash
# Download the CPython 3.12 manylinux x86-64 wheels the GPU checks need (no torch) into
# gpu_wheels/ (ignored by git), for a GPU machine without network:
#     scripts/gpu_wheels_download.sh            # then, on the GPU machine:
#     python3 benchmarks/run_gpu_checks.py      # installs them offline, runs both checks
# Every requirement is pinned in benchmarks/gpu_requirements.txt; --no-deps because that
# list is already the whole closure (resolving megatron-core's dependencies would fetch a
# CUDA torch of several GiB). GPU_WHEELS_SKIP names requirements the GPU machine already
# has, to carry less; for this workplace's H200 image (64 MiB carry limit; it holds numpy
# and pyarrow above ftaudit's floors, packaging older than the pin; 8 wheels, 30 MB):
#     GPU_WHEELS_SKIP="numpy pyarrow" scripts/gpu_wheels_download.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-gpu_wheels}
mkdir -p "$dest"
requirements=$(mktemp)
trap 'rm -f "$requirements"' EXIT
grep -v '^#' benchmarks/gpu_requirements.txt > "$requirements"
for name in ${GPU_WHEELS_SKIP:-}; do
    grep -v -i "^${name}==" "$requirements" > "$requirements.tmp" || true
    mv "$requirements.tmp" "$requirements"
done
python3 -m pip download \
    --dest "$dest" \
    --requirement "$requirements" \
    --no-deps \
    --only-binary=:all: \
    --implementation cp \
    --python-version 3.12 \
    --abi cp312 --abi abi3 --abi none \
    --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_28_x86_64
count=$(ls "$dest"/*.whl | wc -l)
echo "$count wheels in $dest ($(du -sh "$dest" | cut -f1))"
