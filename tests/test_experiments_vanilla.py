"""experiments/vanilla.py (issue 37): MLM pretraining from scratch runs, records its curves, resumes, and saves a
model sentence-transformers loads.

Tiny: the ``tiny`` preset (2 layers × 32 wide, blocks of 32 tokens, batch 4, 6 steps, checkpoints every 3) on a few
sentences written to a temporary file, one torch thread.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest
from conftest import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "vanilla.py"

SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "A man is playing a guitar on the corner of a busy street in the evening.",
    "Truth is the daughter of time, and not of authority, said the old philosopher.",
    "The committee met on Tuesday to discuss the budget for the coming year.",
    "Rain fell all night, and in the morning the fields were covered in mist.",
    "She read the letter twice before folding it back into its envelope.",
    "Engineers tested the bridge with heavy trucks before it opened to traffic.",
    "The film was long, but the last half hour made up for the slow start.",
]


@pytest.fixture(autouse=True)
def _thread_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The script sets OMP/MKL_NUM_THREADS for its child processes; give them back after each test."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "1")


@pytest.fixture(scope="module")
def vanilla():
    return load_script(SCRIPT, "experiments_vanilla")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Documents separated by blank lines (the reader for text files given by path)."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    docs = [" ".join(SENTENCES[i : i + 3]) for i in range(len(SENTENCES))] * 80
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


def _pretrain(vanilla, out: Path, corpus: Path) -> dict:
    code = vanilla.main(["pretrain", "--preset", "tiny", "--out", str(out), "--sources", str(corpus)])
    assert code == 0
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def test_pretrain_records_curves_and_saves_a_sentence_transformer(vanilla, corpus, tmp_path, one_thread):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModelForMaskedLM

    summary = _pretrain(vanilla, tmp_path / "run", corpus)
    assert summary["status"] == "done" and summary["global_step"] == 6
    data = summary["data"]
    assert data["tokens"] > 0 and data["train_blocks"] > 0 and data["held_out_blocks"] > 0
    assert [row["sha256"] for row in data["files"]] == [vanilla.sha256(corpus)]
    assert [row["step"] for row in summary["curves"]["held_out_mlm_loss"]] == [0, 3, 6, 6]  # start, evals, final
    assert len(summary["curves"]["train_mlm_loss"]) == 6
    model_dir = tmp_path / "run" / "model"
    assert (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file()
    st = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
    assert st.encode(["a short sentence"]).shape == (1, 32)
    assert [type(m).__name__ for m in st] == ["Transformer", "Pooling"]
    AutoModelForMaskedLM.from_pretrained(str(model_dir))  # the MLM head is kept
    assert vanilla.main(["check", str(model_dir)]) == 0


def test_a_killed_run_resumes_to_the_same_model(vanilla, corpus, tmp_path, one_thread):
    """Cut a finished run back to its step-3 checkpoint (what a kill after step 3 leaves); the rerun resumes there
    and ends with the weights and curve of the uninterrupted run."""
    from safetensors.torch import load_file

    whole = _pretrain(vanilla, tmp_path / "whole", corpus)
    cut = tmp_path / "cut"
    shutil.copytree(tmp_path / "whole", cut)
    shutil.rmtree(cut / "model")
    shutil.rmtree(cut / "checkpoints" / "checkpoint-6")
    (cut / "summary.json").unlink()
    resumed = _pretrain(vanilla, cut, corpus)
    assert resumed["global_step"] == 6
    assert resumed["curves"]["train_mlm_loss"] == whole["curves"]["train_mlm_loss"]
    a, b = load_file(tmp_path / "whole" / "model" / "model.safetensors"), load_file(cut / "model" / "model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        assert (a[key] - b[key]).abs().max().item() < 1e-6, key


def test_resume_with_other_settings_is_refused(vanilla, corpus, tmp_path, one_thread):
    out = tmp_path / "run"
    args = ["pretrain", "--preset", "tiny", "--out", str(out), "--sources", str(corpus)]
    assert vanilla.main([*args, "--max-steps", "3"]) == 0
    shutil.rmtree(out / "model")
    with pytest.raises(SystemExit, match="other settings"):
        vanilla.main([*args, "--max-steps", "4", "--lr", "0.01"])


@pytest.fixture(scope="module")
def arms():
    return load_script(SCRIPT.with_name("vanilla_arms.py"), "experiments_vanilla_arms")


def test_arms_share_one_sample_and_a_pair_arm_trains(arms, tiny_model_dir, tmp_path, one_thread):
    """vanilla_arms.py (part 2): one seeded sample for every arm (the pair arms get its self-pairs); an arm trains
    from the given start with the shared settings."""
    documents = tmp_path / "docs.jsonl"
    docs = [" ".join(SENTENCES[i : i + 3]) for i in range(len(SENTENCES) - 2)] * 4
    documents.write_text("".join(json.dumps({"text": doc}) + "\n" for doc in docs), encoding="utf-8")
    out = tmp_path / "arms"
    common = ["--out", str(out), "--model", str(tiny_model_dir), "--documents", str(documents), "--texts", "16"]
    assert arms.main(["data", *common]) == 0
    data = json.loads((out / "data.json").read_text(encoding="utf-8"))
    texts = [json.loads(line)["text"] for line in Path(data["texts"]).read_text(encoding="utf-8").splitlines()]
    pairs = [json.loads(line) for line in Path(data["pairs"]).read_text(encoding="utf-8").splitlines()]
    assert len(texts) == 16 and [p["anchor"] for p in pairs] == texts == [p["positive"] for p in pairs]
    steps = ["--steps", "2", "--batch-size", "4", "--max-length", "48", "--save-steps", "1"]
    assert arms.main(["train", "copy-concat", "--seed", "2", *common, *steps]) == 0
    record = json.loads((out / "copy-concat" / "seed2" / "train_record.json").read_text(encoding="utf-8"))
    assert record["steps"] == 2 and record["settings"]["pooling"] == "mean" and record["settings"]["seed"] == 2
    plan = arms.plan(argparse.Namespace(out=out, model="m"))
    assert len(plan) == 2 + 3 * 7 * 2 + 1  # data, start, train+eval per arm and seed, report
    assert plan[0].endswith("data --out " + str(out) + " --model m") and " report " in plan[-1] + " "


class _Pair:
    def __init__(self, text1: str, text2: str, score: float) -> None:
        self.text1, self.text2, self.score = text1, text2, score


def test_long_sts_groups_are_seeded_disjoint_and_gold_is_the_mean(arms):
    """The long-text probe: seeded groups of g STS pairs (remainder dropped), sentences joined in the same member
    order on both sides, gold = the mean of the members' golds."""
    pairs = [_Pair(f"first {i}.", f"second {i}.", float(i % 6)) for i in range(23)]
    rows = arms.long_sts_pairs(pairs, 5, seed=0)
    assert len(rows) == 4 and all(len(r["members"]) == 5 for r in rows)
    members = [i for r in rows for i in r["members"]]
    assert len(set(members)) == 20 and set(members) <= set(range(23))
    for row in rows:
        chosen = [pairs[i] for i in row["members"]]
        assert row["text1"] == " ".join(p.text1 for p in chosen) and row["text2"] == " ".join(p.text2 for p in chosen)
        assert row["score"] == pytest.approx(sum(p.score for p in chosen) / 5)
    assert arms.long_sts_pairs(pairs, 5, seed=0) == rows  # deterministic
    assert [r["members"] for r in arms.long_sts_pairs(pairs, 5, seed=1)] != [r["members"] for r in rows]
    assert sorted(arms.long_sts_groups(10, 10, 3)[0]) == list(range(10)) and arms.long_sts_groups(9, 10, 3) == []
    with pytest.raises(ValueError):
        arms.long_sts_groups(10, 0, 0)


def test_first_k_curve_keeps_per_pair_values_and_matches_the_audit(arms, tiny_model_dir, tmp_path, one_thread):
    """The eval's first-k curve (per-pair cosines, computed in-process) gives the audit's own per-k summary; k above
    the window N is skipped and the k = N cut is the full window."""
    import lengthwise

    texts = [" ".join(SENTENCES[i : i + n]) for n in (1, 2, 4) for i in range(4)]
    path = tmp_path / "pairs.jsonl"
    rows = [{"text1": texts[i], "text2": texts[(i + 5) % len(texts)]} for i in range(len(texts))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    curve = arms.first_k_curve(str(tiny_model_dir), path, ks=(16, 32, 64, 128))
    assert curve["window"] == 64 and curve["ks"] == [16, 32, 64] and curve["skipped_ks"] == [128]
    assert curve["n"] == len(rows) and all(len(curve["cosines"][k]) == len(rows) for k in ("full", "16", "32", "64"))
    assert curve["cosines"]["64"] == curve["cosines"]["full"]
    model = lengthwise.load_model(str(tiny_model_dir), device="cpu")
    config = lengthwise.AuditConfig(curve_ks=(16, 32, 64, 128), word_shuffle=False, null_permutations=0)
    audit = lengthwise.run_audit(model, lengthwise.read_pairs(path), config)
    theirs = {row["k"]: row for row in audit.first_k_curve}
    assert sorted(theirs) == [16, 32, 64]
    for row in curve["summary"]:
        assert row["mean"] == pytest.approx(theirs[row["k"]]["mean"], abs=1e-5)
        assert row["js_distance_vs_full"] == pytest.approx(theirs[row["k"]]["js_distance_vs_full"], abs=1e-6)


# ---------------------------------------------------------------------------------- the report, on synthetic records


@pytest.fixture(scope="module")
def arms_report(arms):
    return load_script(SCRIPT.with_name("vanilla_arms_report.py"), "experiments_vanilla_arms_report")


def _record(rng, gold: dict, noise: float, shift: float, curve_drop: float) -> dict:
    """One synthetic eval record: cosines = gold / 5 + noise (less noise: higher Spearman); the attack moves every
    cosine up by `shift` (0: no attack shift); first-k cosines fall by `curve_drop` per halving of k."""
    import numpy as np

    def cosines(values):
        return [float(x) for x in np.asarray(values) / 5 + rng.normal(0, noise, len(values))]

    sts = {name: {"spearman": 0.0, "cosines": cosines(g), "gold": g} for name, g in gold.items() if name != "long"}
    before = rng.uniform(0.2, 0.8, 300)
    after = before + shift + rng.normal(0, 0.002, 300)
    full = rng.uniform(0.3, 0.9, 80)
    by_k = {str(k): [float(x) for x in full - curve_drop * (4 - i) + rng.normal(0, 0.01, 80)]
            for i, k in enumerate((16, 32, 64, 128))}  # fmt: skip
    return {
        "sts": sts,
        "stsb_attack": {"mean_shift": float(np.mean(after - before)), "js_distance": 0.5 if shift else 0.05,
                        "js_null": {"q95": 0.1, "p_value": 0.5}, "before": before.tolist(), "after": after.tolist()},
        "first_k": {"pairs_sha256": "x", "window": 256, "ks": [16, 32, 64, 128, 256],
                    "cosines": {"full": full.tolist(), **by_k, "256": full.tolist()},
                    "summary": [{"k": k, "mean": 0.5} for k in (16, 32, 64, 128, 256)]},
        "long_sts": {"spearman": 0.0, "pairs_sha256": "y", "gold": gold["long"], "cosines": cosines(gold["long"])},
    }  # fmt: skip


def _write_study(out: Path, seeds=(1, 2, 3)) -> None:
    """simcse (noisy, attacked), hicl (clean STS, same long STS as simcse), copy-concat (no attack shift, flat
    first-k curve); every other arm missing."""
    import numpy as np

    gold_rng = np.random.default_rng(0)
    gold = {name: [float(x) for x in gold_rng.uniform(0, 5, 60)] for name in
            ("STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R", "long")}  # fmt: skip
    for seed in seeds:
        rng = np.random.default_rng(seed)
        base = _record(rng, gold, noise=0.4, shift=0.1, curve_drop=0.05)
        runs = {
            "simcse": base,
            "hicl": {**_record(rng, gold, noise=0.05, shift=0.1, curve_drop=0.05), "long_sts": base["long_sts"]},
            "copy-concat": _record(rng, gold, noise=0.4, shift=0.0, curve_drop=0.0),
        }
        for arm, record in runs.items():
            folder = out / arm / f"seed{seed}"
            folder.mkdir(parents=True)
            (folder / "record.json").write_text(json.dumps({"arm": arm, "seed": seed, **record}), encoding="utf-8")
            train = {"train_runtime_s": 100.0 if arm != "hicl" else 80.0 + seed, "steps": 10, "wall_s": 101.0,
                     "timing_session": "queue-1" if seed != 3 or arm != "simcse" else "queue-2",
                     "start": str(out / "no-model"), "settings": {"max_steps": 10, "batch_size": 4, "max_length": 256,
                                                                  "lr": 5e-5, "pooling": "mean"}}  # fmt: skip
            (folder / "train_record.json").write_text(json.dumps(train), encoding="utf-8")


def test_verdict_rule(arms_report):
    v = arms_report.verdict
    assert v({"diff": 1, "low": 0.2, "high": 2}, "+") == "reproduced in direction"
    assert v({"diff": -1, "low": -2, "high": -0.1}, "+") == "not reproduced (opposite direction)"
    assert v({"diff": 0.1, "low": -0.1, "high": 0.4}, "+") == "inconclusive at this scale"
    assert v({"diff": -1, "low": -2, "high": -0.1}, "-") == "reproduced in direction"
    assert v({"diff": 1, "low": 0.2, "high": 2}, "-") == "not reproduced (opposite direction)"
    assert v({"diff": -0.3, "low": -0.8, "high": 0.2}, ">=", 1.0).startswith("reproduced")
    assert v({"diff": -2, "low": -3, "high": -1.2}, ">=", 1.0).startswith("not reproduced")
    assert v({"diff": -1, "low": -1.5, "high": -0.5}, ">=", 1.0) == "inconclusive at this scale"
    assert v({"diff": 0.2, "low": -1, "high": 1.2}, "~", 1.5).startswith("reproduced (within")
    assert v({"diff": 3, "low": 2, "high": 4}, "~", 1.5).startswith("not reproduced (outside")
    assert v({"diff": 1, "low": 0.2, "high": 2}, "+", seeds=2) == "reproduced in direction (2 of 3 seeds)"
    assert v(None, "+") == "not measured"
    assert v({"diff": float("nan"), "low": float("nan"), "high": float("nan")}, "+").startswith("inconclusive")


def test_combined_interval_resamples_items_jointly_and_averages_seeds(arms_report):
    """One draw of item ids serves every seed; the point is the mean of the seeds' differences; with one seed the
    interval is `paired_bootstrap`'s own on the arrays."""
    import numpy as np

    from lengthwise.core.stats import mean_difference, paired_bootstrap

    rng = np.random.default_rng(1)
    x, y = rng.normal(1.0, 1.0, 50), rng.normal(0.0, 1.0, 50)
    one = arms_report.combined([(50, arms_report._mean_stat(x, y))], resamples=300)
    expected = paired_bootstrap((y, x), mean_difference, resamples=300, vectorized=False)
    assert (one["diff"], one["low"], one["high"]) == pytest.approx(expected)
    same = arms_report.combined([(50, arms_report._mean_stat(x, y))] * 3, resamples=300)
    assert (same["diff"], same["low"], same["high"]) == pytest.approx((one["diff"], one["low"], one["high"]))
    two = arms_report.combined([(50, arms_report._mean_stat(x, y)), (50, arms_report._mean_stat(x + 1, y))], 300)
    assert two["per_seed"] == pytest.approx([one["diff"], one["diff"] + 1])
    assert two["diff"] == pytest.approx(one["diff"] + 0.5) and two["low"] < two["diff"] < two["high"]
    with pytest.raises(ValueError, match="differ in number"):
        arms_report.combined([(50, arms_report._mean_stat(x, y)), (10, arms_report._mean_stat(x[:10], y[:10]))], 100)


def test_count_statistics_equal_the_statistics_of_resampled_arrays(arms_report):
    """A resample as counts per item gives exactly what scipy's Spearman and the audit's JSD give on the resampled
    arrays (ties from repeated items included)."""
    import numpy as np
    from scipy.stats import spearmanr

    import lengthwise

    rng = np.random.default_rng(3)
    gold = np.round(rng.uniform(0, 5, 80), 1)
    arm, base = np.round(gold / 5 + rng.normal(0, 0.2, 80), 3), np.round(rng.uniform(-1.2, 1.2, 80), 2)
    stat = arms_report._spearman_stat(np.zeros(80), gold, arm, base)
    for draw in range(3):
        ids = rng.integers(0, 80, 80) if draw else np.arange(80)
        counts = np.bincount(ids, minlength=80).astype(float)
        direct = 100 * (spearmanr(arm[ids], gold[ids])[0] - spearmanr(base[ids], gold[ids])[0])
        assert stat(counts) == pytest.approx(direct, abs=1e-9)
        assert arms_report._jsd(arm, base, counts) == pytest.approx(lengthwise.js_distance(arm[ids], base[ids]))
        assert arms_report._spearman(arm, gold, counts) == pytest.approx(100 * spearmanr(arm[ids], gold[ids])[0])
    edges = np.array([-1.0, -0.98, 0.0, 0.02, 0.98, 1.0, 1.5, -3.0])  # bin edges, the ends, clipped values
    assert arms_report._jsd(edges, edges[::-1]) == pytest.approx(lengthwise.js_distance(edges, edges[::-1]))


def test_report_on_synthetic_records(arms_report, tmp_path, capsys):
    """Intervals and verdicts from synthetic records whose differences are known; missing runs are listed, not fatal."""
    out, results = tmp_path / "study", tmp_path / "results"
    _write_study(out)
    assert arms_report.report(out, check=True) == 1
    listed = capsys.readouterr().out
    assert "start: not evaluated" in listed and "simde seed 2: not trained" in listed and "hicl" not in listed
    assert arms_report.report(out, results=results, resamples=200) == 0
    payload = json.loads((results / "vanilla_arms.json").read_text(encoding="utf-8"))
    hicl, cc = payload["arms"]["hicl"]["diff"], payload["arms"]["copy-concat"]["diff"]
    assert hicl["stsb"]["low"] > 0 and hicl["sts7_avg"]["low"] > 0 and len(hicl["stsb"]["per_seed"]) == 3
    assert hicl["long_sts"]["diff"] == 0 == hicl["long_sts"]["low"] == hicl["long_sts"]["high"]
    assert hicl["s_per_step_ratio"]["per_seed"] == pytest.approx([-0.19, -0.18])  # seed 3: SimCSE timed elsewhere
    assert hicl["s_per_step_ratio"]["seeds"] == [1, 2] and "3" in hicl["s_per_step_ratio"]["not_comparable"]
    assert cc["attack_jsd"]["high"] < 0 and cc["attack_shift"]["high"] < 0 and cc["first_k_jsd"]["high"] < 0
    assert set(cc["first_k_mean"]) == {"16", "32", "64", "128"}
    verdicts = {(c["arm"], c["metric"]): c["verdict"] for c in payload["claims"]}
    assert verdicts[("hicl", "sts7_avg")].startswith("reproduced")
    assert verdicts[("hicl", "long_sts")] == "inconclusive at this scale"
    assert verdicts[("hicl", "s_per_step_ratio")] == "reproduced in direction (2 of 3 seeds)"
    assert verdicts[("copy-concat", "attack_jsd")] == "reproduced in direction"
    assert verdicts[("copy-concat", "first_k_jsd")] == "reproduced in direction"
    assert verdicts[("simde", "long_sts")] == verdicts[("laser-self", "scifact")] == "not measured"
    assert any(m.startswith("laser-self seed 1") for m in payload["missing"])
    assert payload["scale"]["seeds"] == [1, 2, 3] and payload["verdict_rule"].startswith("(written before")
    markdown = (results / "vanilla_arms.md").read_text(encoding="utf-8")
    assert "| copy-concat |" in markdown and "reproduced in direction" in markdown and "Missing runs:" in markdown
    for claim in arms_report.CLAIMS:
        assert {"paper", "claim", "paper_figure", "source", "our_metric", "arm", "metric", "relation"} <= set(claim)
        assert claim["metric"] in arms_report.LABELS and claim["arm"] in arms_report.ARMS


def test_report_without_simcse_says_what_is_missing(arms_report, tmp_path, capsys):
    assert arms_report.report(tmp_path / "empty", results=tmp_path / "r") == 1
    assert "no SimCSE run is evaluated yet" in capsys.readouterr().out
    assert not (tmp_path / "r").exists()


def test_queue_skips_finished_stages_and_waits_for_the_model(arms, tmp_path, capsys):
    """run-all's bookkeeping: the plan's order (subset by --arms/--seeds), what counts as done, and a start model
    that is still pretraining (its summary says so) or absent."""
    out, model = tmp_path / "study", tmp_path / "vanilla" / "model"
    args = arms.build_parser().parse_args(["run-all", "--out", str(out), "--model", str(model), "--arms",
                                           "hicl,simcse", "--seeds", "2"])  # fmt: skip
    assert arms.steps(args) == [("data", None, None), ("eval", "start", None), ("train", "simcse", 2),
                                ("eval", "simcse", 2), ("train", "hicl", 2), ("eval", "hicl", 2),
                                ("report", None, None)]  # fmt: skip
    folder = out / "simcse" / "seed2"
    folder.mkdir(parents=True)
    assert not arms.is_done("train", "simcse", 2, args)
    (folder / "train_record.json").write_text("{}", encoding="utf-8")
    (folder / "record.json").write_text(json.dumps({"sts": 1, "stsb_attack": 1, "first_k": 1}), encoding="utf-8")
    assert arms.is_done("train", "simcse", 2, args) and not arms.is_done("eval", "simcse", 2, args)
    (folder / "record.json").write_text(json.dumps(dict.fromkeys(arms.EVAL_PARTS, 1)), encoding="utf-8")
    assert arms.is_done("eval", "simcse", 2, args) and not arms.is_done("report", None, None, args)
    assert not arms.is_done(
        "eval", "simcse", 2, arms.build_parser().parse_args(["eval", "--scifact", "--out", str(out)])
    )
    assert "no sentence-transformers model" in arms.model_ready(model)
    model.mkdir(parents=True)
    (model / "modules.json").write_text("[]", encoding="utf-8")
    (model.parent / "summary.json").write_text(json.dumps({"status": "running"}), encoding="utf-8")
    assert "pretraining not finished" in arms.model_ready(model)
    assert arms.run_all(args) == 1 and "start with --wait" in capsys.readouterr().out
    (model.parent / "summary.json").write_text(json.dumps({"status": "done"}), encoding="utf-8")
    assert arms.model_ready(model) is None
    with pytest.raises(SystemExit, match="unknown: bert"):
        arms.steps(arms.build_parser().parse_args(["plan", "--arms", "bert"]))
    report = arms.command("report", None, None, arms.build_parser().parse_args(["run-all", "--results", "/r"]))
    assert report[:3] == ["report", "--results", "/r"]


def test_training_speed_is_compared_only_within_one_timing_session(arms_report) -> None:
    """A ratio of seconds per step across two queue sessions measures the hosts as much as the arms (this machine
    ran the same benchmark 2.8x slower one day than another): such seeds, and records without a session, are left
    out and said, and with none left the claim is not measured."""
    runs = {"steps": 10, "steps_run": 10}
    base = {1: {**runs, "train_runtime_s": 100.0, "timing_session": "a"}, 2: {**runs, "train_runtime_s": 100.0}}
    arm = {1: {**runs, "train_runtime_s": 50.0, "timing_session": "b"}, 2: {**runs, "train_runtime_s": 50.0}}
    out = arms_report.differences({}, {}, arm, base, resamples=10)
    assert "s_per_step_ratio" not in out and out["s_per_step_ratio_not_comparable"] == "seeds 1, 2"
    arm[1]["timing_session"] = "a"
    out = arms_report.differences({}, {}, arm, base, resamples=10)
    assert out["s_per_step_ratio"]["per_seed"] == pytest.approx([-0.5]) and out["s_per_step_ratio"]["seeds"] == [1]


def test_seconds_per_step_counts_only_the_steps_a_resumed_run_timed(arms_report, tmp_path: Path) -> None:
    """A run resumed from checkpoint-225 of 250 timed 25 steps, not 250: its s/step was 10x too small."""
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "train.json").write_text(json.dumps({"resumed_from": str(run / "checkpoints" / "checkpoint-225")}))
    old = {"steps": 250, "train_runtime_s": 75.0, "model_dir": str(run / "model")}
    assert arms_report.seconds_per_step(old) == pytest.approx(3.0)
    assert arms_report.seconds_per_step({**old, "steps_run": 50}) == pytest.approx(1.5)
    (run / "train.json").write_text(json.dumps({"resumed_from": None}))
    assert arms_report.seconds_per_step(old) == pytest.approx(0.3)
