"""benchmarks/compare.py: a results file written again is compared with the recorded one, quality figures apart from
timings and machine readings."""

from __future__ import annotations

import importlib
import json

import pytest


@pytest.fixture(scope="module")
def compare():
    return importlib.import_module("benchmarks.compare")  # run from the repository root


RECORDED = {
    "scifact": {"ndcg@10": 64.5082, "recall@100": 92.5, "wall_time_s": 31.2, "p50_ms": 4.1, "hits": [3, 1]},
    "load_average": {"before": [0.5, 0.4]},
    "environment": {"torch_threads": 2},
    "exact": True,
}


def test_equal_scores_reproduce_whatever_the_timings_say(compare) -> None:
    new = json.loads(json.dumps(RECORDED))
    new["scifact"] |= {"wall_time_s": 99.0, "p50_ms": 8.0}
    new["load_average"]["before"] = [3.0, 2.0]
    new["environment"]["torch_threads"] = 1
    found = compare.compare(RECORDED, new)
    assert found.reproduced and found.equal == 5 and not found.differing  # ndcg, recall, two hits, exact
    assert found.machine == 5


def test_a_score_that_moved_is_named_and_fails(compare, tmp_path, capsys) -> None:
    new = json.loads(json.dumps(RECORDED))
    new["scifact"]["ndcg@10"] = 64.5083
    new["scifact"]["mrr@10"] = 60.0  # a new arm: listed, not failed
    found = compare.compare(RECORDED, new)
    assert found.differing == [("scifact.ndcg@10", 64.5082, 64.5083)] and not found.reproduced
    assert found.only_new == ["scifact.mrr@10"]
    assert compare.compare(RECORDED, new, tolerance=1e-3).reproduced
    assert compare.compare(RECORDED, new, ignore="ndcg").reproduced
    old, now = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(RECORDED))
    now.write_text(json.dumps(new))
    assert compare.main([str(old), str(now)]) == 1
    assert "differs: scifact.ndcg@10: 64.5082 → 64.5083" in capsys.readouterr().out
    assert compare.main([str(old), str(now), "--section", "load_average"]) == 0  # timings only, every one written
    with pytest.raises(SystemExit, match="--section nope"):
        compare.main([str(old), str(now), "--section", "nope"])


def test_a_timing_file_is_written_again_when_every_figure_is_and_its_ratios_are_listed(compare, tmp_path, capsys):
    recorded = {"arms": {"fp32": {"wall_s": 2.0}, "int8": {"wall_s": 1.0, "speedup": 2.0, "rss_mb": 90}},
                "dense_over_hybrid_p50": 0.5, "load": [0.3]}  # fmt: skip
    new = {"arms": {"fp32": {"wall_s": 3.0}, "int8": {"wall_s": 2.0, "speedup": 1.5, "rss_mb": 95}},
           "dense_over_hybrid_p50": 0.6, "load": [1.9]}  # fmt: skip
    found = compare.compare(recorded, new)
    assert found.timings_only and found.reproduced and found.machine == 6
    assert found.ratios == [("arms.int8.speedup", 2.0, 1.5), ("dense_over_hybrid_p50", 0.5, 0.6)]
    timed = compare.compare({"bucketed_over_runs": 1.07, "recall_at_10_vs_exact": 0.99},
                            {"bucketed_over_runs": 1.09, "recall_at_10_vs_exact": 0.99})  # fmt: skip
    assert timed.ratios == [("bucketed_over_runs", 1.07, 1.09)] and timed.equal == 1 and timed.reproduced
    old, now = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(recorded))
    now.write_text(json.dumps(new))
    assert compare.main([str(old), str(now)]) == 0
    out = capsys.readouterr().out
    assert "arms.int8.speedup: 2 → 1.5" in out and "a timing file: written again" in out
    del new["arms"]["fp32"]  # the command no longer writes an arm it wrote: not written again
    now.write_text(json.dumps(new))
    assert not compare.compare(recorded, new).reproduced
    assert compare.main([str(old), str(now)]) == 1
    assert "figures missing now" in capsys.readouterr().out


def test_a_comparison_is_recorded_once_per_file_and_section(compare, tmp_path) -> None:
    old, now, record = tmp_path / "old.json", tmp_path / "new.json", tmp_path / "reproduced.json"
    old.write_text(json.dumps(RECORDED))
    now.write_text(json.dumps({**RECORDED, "scifact": {**RECORDED["scifact"], "recall@100": 92.4}}))
    assert compare.main([str(old), str(now), "--record", str(record), "--command", "run it"]) == 1
    assert compare.main([str(old), str(old), "--record", str(record), "--section", "scifact"]) == 0
    assert compare.main([str(old), str(now), "--record", str(record), "--tolerance", "0.2"]) == 0
    files = json.loads(record.read_text())["files"]
    assert set(files) == {str(old), f"{old}#scifact"}
    whole = files[str(old)]
    assert (whole["equal"], whole["differing"], whole["reproduced"], whole["tolerance"]) == (5, 0, True, 0.2)
    assert whole["largest_difference"] == pytest.approx(0.1)
    assert whole["command"] is None and whole["host"] and "python" in whole["environment"]


def _written_commands(tree) -> list:
    """Every value a benchmark stores under a ``"command"`` key (dict literals) or passes as ``command=``."""
    import ast

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            found += [v for k, v in zip(node.keys, node.values, strict=True)
                      if isinstance(k, ast.Constant) and k.value == "command"]  # fmt: skip
        elif isinstance(node, ast.Call):
            found += [kw.value for kw in node.keywords if kw.arg == "command"]
    return found


def test_every_benchmark_records_the_command_it_was_started_with() -> None:
    """A results file's ``command`` is what `compare` reruns: written from the process's own arguments
    (`benchmarks._measure.command_line`), never a string the script spells itself, which drops the flags a run was
    given (the ColBERT training recorded ``python -m benchmarks.train.colbert`` for a run at half an epoch)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "benchmarks"
    spelled = []
    for path in sorted(root.rglob("*.py")):
        for value in _written_commands(ast.parse(path.read_text(encoding="utf-8"))):
            text = ast.unparse(value)
            if "python" in text and "command_line" not in text:
                spelled.append(f"{path.relative_to(root)}:{value.lineno}: {text[:80]}")
    assert not spelled, "\n".join(spelled)


def test_the_status_lists_every_results_file_and_what_its_comparisons_say(compare, tmp_path, capsys) -> None:
    for name in ("a.json", "b.json", "c.json", "d.json"):
        (tmp_path / name).write_text("{}")
    record = tmp_path / "reproduced.json"
    entry = {"reproduced": True, "differing": 0, "equal": 3}
    record.write_text(json.dumps({"files": {
        f"{tmp_path}/a.json": entry,
        f"{tmp_path}/b.json#one": entry, f"{tmp_path}/b.json#two": {**entry, "reproduced": False, "differing": 2},
        f"{tmp_path}/c.json#one": entry}}))  # fmt: skip
    assert compare.main(["--status", str(record)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["written again  a.json", "differing      b.json  (one; two: 2 differ)",
                     "written again  c.json  (one)", "not compared   d.json",
                     "2 written again, 1 differing, 1 not compared"]  # fmt: skip
    with pytest.raises(SystemExit):
        compare.main([str(record)])  # one file and no --status: told to give both
