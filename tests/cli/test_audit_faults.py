"""`lengthwise audit` and `lengthwise report` under bad input and faults (issue 13 items 6, 12–16, 19, 21).

Each test failed before its fix: a traceback, a silent no-op, lost work, or a swallowed message.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lengthwise.cli import app

runner = CliRunner()
PAIRS = "".join(f"text number {i} about cats\tanother text {i} about dogs\n" for i in range(12))


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert lines[0].startswith("error:"), result.output
    assert "Traceback" not in result.output
    return " ".join(line.strip() for line in lines)


def _audit(tiny: Path, *args: str):
    return runner.invoke(app, ["audit", "--model", str(tiny), "--null-permutations", "10", "--no-curve", *args])


@pytest.fixture()
def pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.tsv"
    path.write_text(PAIRS, encoding="utf-8")
    return path


# 13.12 ----------------------------------------------------------------------------------------------------------


def test_out_that_is_a_file_fails_before_any_model_work(tmp_path: Path, pairs: Path, monkeypatch) -> None:
    import lengthwise.pipelines

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before --out was checked")

    monkeypatch.setattr(lengthwise.pipelines, "load_model", no_model)
    blocker = tmp_path / "taken"
    blocker.write_text("not a directory", encoding="utf-8")
    message = _one_line_error(_audit(tmp_path, "--pairs", str(pairs), "--out", str(blocker)))
    assert "--out" in message and "not a directory" in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere; the read-only case needs a normal user")
def test_read_only_out_fails_before_any_model_work(tmp_path: Path, pairs: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        message = _one_line_error(_audit(tmp_path, "--pairs", str(pairs), "--out", str(locked / "run")))
        assert "--out" in message
    finally:
        locked.chmod(0o700)


def test_out_holding_other_files_is_refused_before_computing(tmp_path: Path, pairs: Path, tiny_model_dir) -> None:
    """The output set replaces its folder as one unit, so a folder with the user's files is never used."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine", encoding="utf-8")
    message = _one_line_error(_audit(tiny_model_dir, "--pairs", str(pairs), "--out", str(home)))
    assert "notes.txt" in message
    assert (home / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_report_to_an_unwritable_out_fails_cleanly(tmp_path: Path, pairs: Path, tiny_model_dir) -> None:
    out = tmp_path / "run"
    assert _audit(tiny_model_dir, "--pairs", str(pairs), "--out", str(out), "--elongate", "3").exit_code == 0
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    message = _one_line_error(runner.invoke(app, ["report", str(out), "--out", str(blocker)]))
    assert "--out" in message


# 13.14 ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "field"),
    [(("attack", "mean_shift"), "attack.mean_shift"), (("first_k_curve",), None), (("attack",), "attack")],
)
def test_report_on_audit_json_missing_a_key_names_the_field(
    tmp_path: Path, pairs: Path, tiny_model_dir, path: tuple[str, ...], field: str | None
) -> None:
    out = tmp_path / "run"
    assert _audit(tiny_model_dir, "--pairs", str(pairs), "--out", str(out), "--elongate", "3").exit_code == 0
    payload = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    section = payload
    for key in path[:-1]:
        section = section[key]
    del section[path[-1]]
    (out / "audit.json").write_text(json.dumps(payload), encoding="utf-8")
    result = runner.invoke(app, ["report", str(out)])
    if field is None:  # an optional section: the report is rendered without it
        assert result.exit_code == 0, result.output
        return
    message = _one_line_error(result)
    assert f"field {field} is missing" in message and "audit.json" in message


def test_report_on_a_mistyped_field_names_it(tmp_path: Path) -> None:
    (tmp_path / "audit.json").write_text(json.dumps({"attack": {"n": "many"}}), encoding="utf-8")
    assert "field attack.n should be an integer" in _one_line_error(runner.invoke(app, ["report", str(tmp_path)]))


# 13.15 ----------------------------------------------------------------------------------------------------------


def test_fail_keeps_square_brackets(capsys) -> None:
    import typer

    from lengthwise.cli.console import fail

    with pytest.raises(typer.Exit):
        fail("install the extra: pip install 'lengthwise[train]' (see [docs])")
    assert "pip install 'lengthwise[train]' (see [docs])" in capsys.readouterr().err


def test_a_bracketed_path_survives_in_messages(tmp_path: Path, tiny_model_dir) -> None:
    odd = tmp_path / "[bold]pairs.tsv"
    odd.write_text("a\tb\nonly one column\n", encoding="utf-8")
    message = _one_line_error(_audit(tiny_model_dir, "--pairs", str(odd)))
    assert "[bold]pairs.tsv:2" in message


# 13.16 ----------------------------------------------------------------------------------------------------------


def test_truncated_gzip_is_a_one_line_error_not_aborted(tmp_path: Path, tiny_model_dir) -> None:
    data = gzip.compress(PAIRS.encode() * 200)
    path = tmp_path / "pairs.tsv.gz"
    path.write_bytes(data[: len(data) // 2])
    message = _one_line_error(_audit(tiny_model_dir, "--pairs", str(path)))
    assert "pairs.tsv.gz:" in message and "truncated or corrupt" in message and "Aborted" not in message


# 13.19 ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["quantum", "cuda:7"])
def test_bad_device_is_a_one_line_error(tmp_path: Path, tiny_model_dir, device: str) -> None:
    import torch

    if device.startswith("cuda") and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    message = _one_line_error(_audit(tiny_model_dir, "--device", device, "--out", str(tmp_path / "o")))
    assert f"--device {device!r}" in message


# 13.21 and 13.6 -------------------------------------------------------------------------------------------------


def test_bins_has_an_upper_bound(tiny_model_dir) -> None:
    assert "--bins 1000000: use 2 to 1000 bins" in _one_line_error(_audit(tiny_model_dir, "--bins", "1000000"))
    assert "--bins 1: use 2 to 1000 bins" in _one_line_error(_audit(tiny_model_dir, "--bins", "1"))


def test_max_length_3_is_an_error_not_a_silent_jsd_of_zero(tmp_path: Path, tiny_model_dir) -> None:
    message = _one_line_error(_audit(tiny_model_dir, "--max-length", "3", "--out", str(tmp_path / "o")))
    assert "elongation changes no text" in message
    assert not (tmp_path / "o" / "audit.json").exists()


def test_elongate_one_is_an_error(tmp_path: Path, tiny_model_dir) -> None:
    message = _one_line_error(_audit(tiny_model_dir, "--elongate", "1", "--out", str(tmp_path / "o")))
    assert "m = 1 to every text" in message


def test_settings_errors_name_the_flag(tmp_path: Path, tiny_model_dir) -> None:
    def error(*args: str) -> str:
        argv = ["audit", "--model", str(tiny_model_dir), "--out", str(tmp_path / "o"), *args]
        return _one_line_error(runner.invoke(app, argv))

    assert error("--batch-size", "0").startswith("error: --batch-size 0:")
    assert "--null-permutations -1" in error("--null-permutations", "-1")
    assert "--curve-k 16, 2" in error("--curve-k", "16", "--curve-k", "2")
    assert "--max-pairs 0" in error("--max-pairs", "0")
    assert "--elongate 'many'" in error("--elongate", "many")
    assert not (tmp_path / "o" / "audit.json").exists()


# 13.13 ----------------------------------------------------------------------------------------------------------


def test_output_set_is_replaced_as_one_unit(tmp_path: Path, pairs: Path, tiny_model_dir) -> None:
    """A second run replaces every file of the first at once; no stale plot survives, no staging is left."""
    out = tmp_path / "run"
    assert _audit(tiny_model_dir, "--pairs", str(pairs), "--out", str(out), "--elongate", "3").exit_code == 0
    first = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert (out / "word_shuffle.png").exists()
    args = ["--pairs", str(pairs), "--out", str(out), "--elongate", "4", "--no-shuffle"]
    assert _audit(tiny_model_dir, *args).exit_code == 0
    second = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert (first["settings"]["elongation"], second["settings"]["elongation"]) == ("3", "4")
    assert not (out / "word_shuffle.png").exists()  # not this run's: gone with the old set
    assert "m=4" in (out / "report.html").read_text(encoding="utf-8")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.slow
def test_ctrl_c_of_a_real_audit_never_mixes_sets(tmp_path: Path, pairs: Path, tiny_model_dir) -> None:
    """Interrupt `lengthwise audit` at several moments: the folder holds the complete old or new set only."""
    out = tmp_path / "run"
    base = [sys.executable, "-m", "lengthwise.cli", "audit", "--model", str(tiny_model_dir), "--pairs", str(pairs)]
    base += ["--out", str(out), "--null-permutations", "200", "--no-curve"]
    assert subprocess.run([*base, "--elongate", "3"], capture_output=True, timeout=300).returncode == 0
    old = (out / "audit.json").read_bytes()
    for delay in (2.0, 4.0, 6.0, 8.0):
        proc = subprocess.Popen(  # SIGINT at its default even when the suite itself inherited it as ignored
            [*base, "--elongate", "5"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=300)
        payload = json.loads((out / "audit.json").read_text(encoding="utf-8"))
        page = (out / "report.html").read_text(encoding="utf-8")
        m = payload["settings"]["elongation"]
        assert f"m={m}" in page, "report.html does not belong to audit.json"
        if (out / "audit.json").read_bytes() != old:
            old = (out / "audit.json").read_bytes()
            # a run that swapped in its set finished it; a Ctrl-C that came during the swap is raised right after
            # it (deferred, not lost), so such a run may end by SIGINT, with its whole set in place (seen in CI)
            assert proc.returncode in (0, -signal.SIGINT), proc.stderr
