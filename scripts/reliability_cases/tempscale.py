"""Bad inputs and faults for `lengthwise tempscale` (bake, save, tune): one clear line (exit 2) or a right result,
and the source model is never overwritten. The tiny random BERT keeps every case to seconds; cases that must fail
before any model work name a model that does not exist (`NO_MODEL`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from reliability_cases import Case, Context, write_remote_code_model

NO_MODEL = "/nonexistent/lengthwise-model"


def _digest(folder: Path) -> str:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return hashlib.sha256(b"".join(str(p.relative_to(folder)).encode() + p.read_bytes() for p in files)).hexdigest()


def _copy_model(tmp: Path, context: Context) -> None:
    shutil.copytree(context.tiny_model, tmp / "model")
    (tmp / "digest").write_text(_digest(tmp / "model"), encoding="utf-8")


def _source_intact(tmp: Path, output: str) -> str | None:
    return None if _digest(tmp / "model") == (tmp / "digest").read_text(encoding="utf-8") else "the source changed"


def _baked_once(tmp: Path, context: Context) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    argv = ["tempscale", "bake", "-m", str(context.tiny_model), "--t", "0.8", "--out", str(tmp / "baked")]
    done = subprocess.run([sys.executable, "-m", "lengthwise.cli", *argv], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"setup failed: {done.stderr[-500:]}")


def _absent(name: str):
    def check(tmp: Path, output: str) -> str | None:
        return f"{name} was written" if (tmp / name).exists() else None

    return check


def _product_recorded(tmp: Path, output: str) -> str | None:
    settings = json.loads((tmp / "again" / "lengthwise_tempscale.json").read_text(encoding="utf-8"))
    t, steps = settings["config"]["t"], settings.get("baked_steps")
    return None if abs(t - 0.4) < 1e-9 and steps == [0.8, 0.5] else f"recorded t = {t}, steps {steps}"


def _sts(tmp: Path, _: Context | None = None) -> None:
    rows = [f"a cat number {i} sat\ta cat {i} sits on a mat\t{i % 5}" for i in range(12)]
    (tmp / "sts.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")


def _out_is_file(tmp: Path, _: Context) -> None:
    _sts(tmp)
    (tmp / "out").write_text("keep me\n", encoding="utf-8")


def _not_computed(tmp: Path, output: str) -> str | None:
    if "spearman =" in output:
        return "the dev data was scored before --out was refused"
    return None if (tmp / "out").read_text(encoding="utf-8") == "keep me\n" else "the file at --out changed"


def _tune_record(tmp: Path, output: str) -> str | None:
    record = json.loads((tmp / "out" / "tune.json").read_text(encoding="utf-8"))
    missing = {"task", "metric", "result", "model", "data", "settings", "created", "wall_time_s"} - set(record)
    if missing:
        return f"tune.json lacks {sorted(missing)}"
    return None if (tmp / "out" / "tune.png").read_bytes()[:4] == b"\x89PNG" else "no tune.png"


def _remote_code(tmp: Path, context: Context) -> None:
    _sts(tmp)
    write_remote_code_model(context.tiny_model, tmp / "remote")


def _bake(model: str, out: str, t: str, *extra: str) -> list[str]:
    return ["tempscale", "bake", "-m", model, "--t", t, "--out", out, *extra]


_TUNE = ["tempscale", "tune", "--task-type", "sts", "--data", "{tmp}/sts.tsv", "--out", "{tmp}/out"]

CASES = [
    Case("tempscale-bake-in-place", "13.9", _bake("{tmp}/model", "{tmp}/model", "0.8"), 2, "is the model being baked",
         _copy_model, _source_intact),
    Case("tempscale-bake-in-place-other-spelling", "13.9", _bake("{tmp}/model", "{tmp}/./model/", "0.8"), 2,
         "is the model being baked", _copy_model, _source_intact),
    Case("tempscale-bake-twice", "13.9", _bake("{tmp}/baked", "{tmp}/again", "0.5"), 2, "already carries t = 0.8",
         _baked_once, _absent("again")),
    Case("tempscale-rebake-records-product", "13.9", _bake("{tmp}/baked", "{tmp}/again", "0.5", "--rebake"), 0,
         "t = 0.4 (= 0.8 × 0.5)", _baked_once, _product_recorded),
    Case("tempscale-bake-t-tiny", "13.21", _bake(NO_MODEL, "{tmp}/b", "1e-30"), 2, "--t 1e-30: outside [0.01, 100]",
         None, _absent("b")),
    Case("tempscale-bake-t-inf", "new", _bake(NO_MODEL, "{tmp}/b", "inf"), 2, "--t inf: not a positive finite",
         None, _absent("b")),
    Case("tempscale-bake-t-query-nan", "new", _bake(NO_MODEL, "{tmp}/b", "0.8", "--t-query", "nan"), 2,
         "--t-query nan", None, _absent("b")),
    Case("tempscale-bake-schedule", "new", _bake("{tiny}", "{tmp}/b", "0.8", "--schedule", "32:1.0,64:0.8"), 2,
         "length schedule", None, _absent("b")),
    Case("tempscale-bake-bad-schedule", "new", _bake(NO_MODEL, "{tmp}/b", "0.8", "--schedule", "long"), 2,
         "--schedule 'long': not LENGTH:FACTOR", None, _absent("b")),
    Case("tempscale-bake-unusual-t-noted", "new", _bake("{tiny}", "{tmp}/b", "0.1", "--no-verify"), 0,
         "far from the usual"),
    Case("tempscale-bake-device-unknown", "13.19", _bake(NO_MODEL, "{tmp}/b", "0.8", "--device", "quantum"), 2,
         "--device 'quantum': not a torch device", None, _absent("b")),
    Case("tempscale-save-device-absent", "13.19",
         ["tempscale", "save", "-m", NO_MODEL, "--t", "0.8", "--out", "{tmp}/s", "--device", "cuda:7"], 2,
         "not available on this machine", None, _absent("s")),
    Case("tempscale-tune-device-unknown", "13.19", [*_TUNE, "-m", NO_MODEL, "--device", "quantum"], 2,
         "not a torch device", _sts, _absent("out")),
    Case("tempscale-bake-remote-code", "13.20", _bake("{tmp}/remote", "{tmp}/b", "0.8"), 2,
         "without --trust-remote-code", _remote_code),
    Case("tempscale-tune-remote-code", "13.20", [*_TUNE, "-m", "{tmp}/remote"], 2, "without --trust-remote-code",
         _remote_code),
    Case("tempscale-tune-out-is-a-file", "13.12", [*_TUNE, "-m", "{tiny}", "--grid", "0.5,1.0"], 2,
         "exists and is not a directory", _out_is_file, _not_computed),
    Case("tempscale-tune-out-unwritable", "13.12",
         ["tempscale", "tune", "--task-type", "sts", "--data", "{tmp}/sts.tsv", "--out", "/proc/lw-tune",
          "-m", "{tiny}"],
         2, "--out /proc/lw-tune", _sts),
    Case("tempscale-tune-grid-not-numbers", "new", [*_TUNE, "-m", NO_MODEL, "--grid", "a,b"], 2,
         "not comma-separated temperatures", _sts, _absent("out")),
    Case("tempscale-tune-grid-out-of-range", "new", [*_TUNE, "-m", NO_MODEL, "--grid", "0.001,1.0"], 2,
         "--grid/--bounds 0.001: outside", _sts, _absent("out")),
    Case("tempscale-tune-bounds-reversed", "new", [*_TUNE, "-m", NO_MODEL, "--bounds", "0.9", "0.5"], 2,
         "--bounds (0.9, 0.5)", _sts, _absent("out")),
    Case("tempscale-tune-nothing", "new", [*_TUNE, "-m", NO_MODEL, "--grid", "", "--no-search"], 2,
         "nothing to tune", _sts, _absent("out")),
    Case("tempscale-tune-missing-data", "new",
         ["tempscale", "tune", "--task-type", "sts", "--data", "{tmp}/nope.tsv", "--out", "{tmp}/out",
          "-m", "{tiny}"], 2,
         "no such file", None),
    Case("tempscale-tune-writes-typed-record", "14", [*_TUNE, "-m", "{tiny}", "--grid", "0.7,1.0", "--no-search"], 0,
         "best t =", _sts, _tune_record),
]  # fmt: skip
