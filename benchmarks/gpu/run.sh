#!/usr/bin/env bash
# The GPU speed check from the repository alone (issue 48.4); see README.md. Usage, from anywhere:
#   benchmarks/gpu/run.sh [OUT] [bench_gpu.py flags…]     e.g. benchmarks/gpu/run.sh /tmp/lw-gpu --device cuda
# Installs the carried wheels (benchmarks/gpu/carry/wheels, made by prepare.sh) into a private folder only when a
# module the package needs is missing, runs the package from src/ (no install), and writes OUT/results.json as it goes.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${1:-/tmp/lw-gpu}"
shift || true
mkdir -p "$OUT"
SITE="$OUT/site"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
export PYTHONPATH="$ROOT/src:$SITE${PYTHONPATH:+:$PYTHONPATH}"
missing=$(python - <<'PY'
import importlib.util
names = ["pysbd", "pytrec_eval", "usearch", "bm25s", "Stemmer", "fastapi", "uvicorn", "pydantic", "typer", "rich",
         "datasets", "opentelemetry"]
print(" ".join(n for n in names if importlib.util.find_spec(n) is None))
PY
)
if [ -n "$missing" ]; then
  echo "missing: $missing — installing the carried wheels into $SITE" >&2
  python -m pip install --quiet --no-index --no-deps --target "$SITE" "$HERE"/carry/wheels/*.whl
fi
cd "$ROOT"
python "$HERE/bench_gpu.py" --out "$OUT" "$@" 2>&1 | tee "$OUT/log.txt"
