"""The audit report: plots and the self-contained HTML page, from hand-built audit payloads (no model)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.patches import StepPatch

from lengthwise.audit.config import HistogramSpec
from lengthwise.audit.pairs.shift import js_distance, similarity_histogram, similarity_shift
from lengthwise.audit.report._attack import plot_attack, plot_first_k_curve, plot_word_shuffle
from lengthwise.audit.report.page import load_payload, render_html, write_report

SPEC = HistogramSpec(bins=100, low=-1.0, high=1.0)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EMBEDDED_PNG = re.compile(r"data:image/png;base64,([A-Za-z0-9+/=]+)")


def _counts(values: np.ndarray) -> list[int]:
    return [int(c) for c in similarity_histogram(values, SPEC)]


def make_payload(
    model_name: str = "tiny-test-model",
    *,
    before: np.ndarray | None = None,
    after: np.ndarray | None = None,
    curve: bool = True,
    shuffle: bool = True,
    kinds: bool = True,
    m_used: tuple[int, int] = (8, 8),
) -> dict[str, Any]:
    """An audit.json-shaped dict built from synthetic similarities with the same code the audit uses."""
    rng = np.random.default_rng(0)
    if before is None:
        before = np.clip(rng.normal(0.45, 0.15, 200), -1.0, 1.0)
    if after is None:
        after = np.clip(before + rng.normal(0.08, 0.05, before.size), -1.0, 1.0)
    attack: dict[str, Any] = dict(similarity_shift(before, after, SPEC))
    attack.update(
        elongation="8",
        histogram={
            "bins": SPEC.bins,
            "range": [SPEC.low, SPEC.high],
            "before": _counts(before),
            "after": _counts(after),
        },
    )
    curve_rows = []
    for k in (16, 32, 64, 128) if curve else ():
        sims = np.clip(before + rng.normal(0.0, 2.0 / k, before.size), -1.0, 1.0)
        curve_rows.append(
            {
                "k": k,
                "mean": float(sims.mean()),
                "median": float(np.median(sims)),
                "std": float(sims.std()),
                "js_distance_vs_full": js_distance(before, sims, SPEC),
                "histogram": _counts(sims),
            }
        )
    shuffle_section: dict[str, Any] | None = None
    if shuffle:
        shuffled = np.clip(before - 0.05 + rng.normal(0.0, 0.04, before.size), -1.0, 1.0)
        shuffle_section = {**similarity_shift(before, shuffled, SPEC), "histogram": _counts(shuffled)}
    half = before.size // 2
    by_kind = (
        {
            "negation": similarity_shift(before[:half], after[:half], SPEC),
            "paraphrase": similarity_shift(before[half:], after[half:], SPEC),
        }
        if kinds
        else {}
    )
    return {
        "attack": attack,
        "tokens": {
            "max_length": 256,
            "special_tokens": 2,
            "content_mean": 11.5,
            "m_mean": float(np.mean(m_used)),
            "m_min": m_used[0],
            "m_max": m_used[1],
        },
        "first_k_curve": curve_rows,
        "word_shuffle": shuffle_section,
        "attack_by_kind": by_kind,
        "similarities": {
            "before": [round(float(x), 6) for x in before],
            "after": [round(float(x), 6) for x in after],
        },
        "settings": {
            "elongation": "8",
            "curve_ks": [16, 32, 64, 128],
            "word_shuffle": shuffle,
            "histogram": {"bins": SPEC.bins, "range": [SPEC.low, SPEC.high]},
            "seed": 0,
        },
        "model": {"name": model_name, "architecture": "BertModel", "pooling": {"pooling_mode": "mean"}},
        "data": {"source": "synthetic.jsonl", "format": "jsonl", "n_pairs": int(before.size), "kinds": {}},
        "meta": {
            "created": "2026-01-02T03:04:05+00:00",
            "seconds": 1.5,
            "environment": {"python": "3.11.7", "platform": "test", "packages": {"lengthwise": "9.8.7"}},
        },
    }


def _legend_labels(ax: Axes) -> list[str]:
    legend = ax.get_legend()
    assert legend is not None
    return [text.get_text() for text in legend.get_texts()]


def _integrals(ax: Axes) -> list[float]:
    """The area under each step histogram drawn on `ax` (1 for a density)."""
    steps = [patch.get_data()[:2] for patch in ax.patches if isinstance(patch, StepPatch)]
    return [float(np.sum(values * np.diff(edges))) for values, edges in steps]


def _embedded_pngs(page: str) -> list[bytes]:
    return [base64.b64decode(data) for data in EMBEDDED_PNG.findall(page)]


def test_write_report_writes_three_pngs_and_a_self_contained_page(tmp_path: Path) -> None:
    payload = make_payload()
    written = write_report(payload, tmp_path / "report")

    assert set(written) == {"attack", "first_k_curve", "word_shuffle", "html", "json"}
    names = {key: path.name for key, path in written.items()}
    assert names == {
        "attack": "attack_hist.png",
        "first_k_curve": "first_k_curve.png",
        "word_shuffle": "word_shuffle.png",
        "html": "report.html",
        "json": "audit.json",
    }
    pngs = [written[key].read_bytes() for key in ("attack", "first_k_curve", "word_shuffle")]
    for png in pngs:
        assert png.startswith(PNG_SIGNATURE)
        assert len(png) > 10_000

    page = written["html"].read_text(encoding="utf-8")
    assert "<title>lengthwise audit — tiny-test-model</title>" in page
    assert "<h1>lengthwise audit — tiny-test-model</h1>" in page
    assert f"{payload['attack']['js_distance']:.3f}" in page
    assert _embedded_pngs(page) == pngs  # each plot embedded once, byte for byte, in order
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # no external assets


def test_page_has_verdict_tables_and_footer(tmp_path: Path) -> None:
    payload = make_payload()
    attack = payload["attack"]
    page = write_report(payload, tmp_path)["html"].read_text(encoding="utf-8")

    verdict = (
        f"Elongation raised the similarity of {attack['frac_increased']:.0%} of pairs; mean cosine "
        f"{attack['mean_before']:.3f} → {attack['mean_after']:.3f} (JSD {attack['js_distance']:.3f})."
    )
    assert verdict in page
    for row in payload["first_k_curve"]:
        assert f'<td>{row["k"]}</td><td class="num">{row["mean"]:.3f}</td>' in page
    assert f"{payload['word_shuffle']['mean_after']:.3f}" in page
    assert "<td>negation</td>" in page and "<td>paraphrase</td>" in page
    assert "pooling.pooling_mode" in page and "packages.lengthwise" in page
    assert "lengthwise 9.8.7 on 2026-01-02T03:04:05+00:00" in page


def test_strings_from_the_model_and_data_are_escaped(tmp_path: Path) -> None:
    payload = make_payload('<script>alert("x")</script>')
    payload["data"]["source"] = "<img src=x onerror=alert(1)>"
    page = write_report(payload, tmp_path)["html"].read_text(encoding="utf-8")

    assert "<script" not in page.lower()
    assert "<img src=x" not in page
    assert "lengthwise audit — &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_optional_sections_missing_still_make_a_report(tmp_path: Path) -> None:
    payload = make_payload(curve=False, shuffle=False, kinds=False)
    assert plot_first_k_curve(payload) is None
    assert plot_word_shuffle(payload) is None

    write_report(make_payload(), tmp_path)  # an earlier, complete report in the same directory
    assert (tmp_path / "first_k_curve.png").exists()
    written = write_report(payload, tmp_path)
    assert set(written) == {"attack", "html", "json"}
    assert not (tmp_path / "first_k_curve.png").exists()
    assert not (tmp_path / "word_shuffle.png").exists()
    page = written["html"].read_text(encoding="utf-8")
    assert _embedded_pngs(page) == [written["attack"].read_bytes()]
    assert "by kind" not in page


def test_attack_section_alone_is_enough(tmp_path: Path) -> None:
    payload = {"attack": make_payload()["attack"]}
    written = write_report(payload, tmp_path)
    page = written["html"].read_text(encoding="utf-8")
    assert "lengthwise audit — unknown model" in page
    assert len(_embedded_pngs(page)) == 1


def test_write_report_rejects_a_payload_without_attack(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"payload: field attack is missing"):
        write_report({"tokens": {}}, tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_attack_plot_zooms_to_the_mass_and_labels_the_legend() -> None:
    rng = np.random.default_rng(1)
    before = rng.uniform(0.30, 0.60, 150)
    figure = plot_attack(make_payload(before=before, after=before + 0.25))
    ax = figure.axes[0]

    low, high = ax.get_xlim()
    assert -1.0 < low <= before.min() and (before + 0.25).max() <= high < 1.0
    assert high - low < 1.0
    assert _legend_labels(ax) == ["original", "elongated (m=8)"]
    assert ax.get_xlabel() == "cosine similarity"
    assert "JSD" in ax.get_title() and "mean shift" in ax.get_title()
    dashed = sorted(float(np.asarray(line.get_xdata())[0]) for line in ax.get_lines() if line.get_linestyle() == "--")
    assert dashed == pytest.approx(sorted([before.mean(), (before + 0.25).mean()]))


def test_attack_plot_never_zooms_outside_the_histogram_range() -> None:
    before = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    figure = plot_attack(make_payload(before=before, after=before[::-1].copy(), m_used=(3, 12)))
    ax = figure.axes[0]
    assert ax.get_xlim() == pytest.approx((-1.0, 1.0))
    assert _legend_labels(ax)[1] == "elongated (m=8, used 3–12)"


def test_histograms_are_drawn_as_densities() -> None:
    figure = plot_attack(make_payload())
    assert len([patch for patch in figure.axes[0].patches if patch.get_fill()]) == 2
    assert _integrals(figure.axes[0]) == pytest.approx([1.0] * 4)  # filled + outline, per distribution


def test_first_k_curve_has_one_histogram_per_k_and_a_log2_mean_axis() -> None:
    payload = make_payload()
    figure = plot_first_k_curve(payload)
    assert figure is not None
    ax_hist, ax_mean = figure.axes
    assert _legend_labels(ax_hist) == ["full text", "k=16", "k=32", "k=64", "k=128"]
    assert _integrals(ax_hist) == pytest.approx([1.0] * 5)  # still densities after merging bins
    assert ax_mean.get_xscale() == "log"
    assert [tick.get_text() for tick in ax_mean.get_xticklabels()] == ["16", "32", "64", "128"]


def test_word_shuffle_plot_compares_original_with_shuffled() -> None:
    figure = plot_word_shuffle(make_payload())
    assert figure is not None
    labels = _legend_labels(figure.axes[0])
    assert labels[0] == "original" and "shuffled" in labels[1]


def test_report_is_deterministic(tmp_path: Path) -> None:
    payload = make_payload()
    first = write_report(payload, tmp_path / "a")
    second = write_report(payload, tmp_path / "b")
    for key in first:
        assert first[key].read_bytes() == second[key].read_bytes(), key
    assert render_html(payload, {}) == render_html(payload, {})


def test_load_payload_reads_a_directory_or_its_audit_json(tmp_path: Path) -> None:
    payload = make_payload()
    (tmp_path / "audit.json").write_text(json.dumps(payload), encoding="utf-8")
    assert load_payload(tmp_path) == payload
    assert load_payload(str(tmp_path / "audit.json")) == payload


def test_load_payload_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-run"
    with pytest.raises(ValueError, match=f"^no audit at {re.escape(str(missing))}: pass an audit output directory"):
        load_payload(missing)
    empty_run = tmp_path / "empty-run"
    empty_run.mkdir()
    with pytest.raises(ValueError, match=re.escape(str(empty_run / "audit.json"))):
        load_payload(empty_run)

    not_audit = tmp_path / "other.json"
    not_audit.write_text(json.dumps({"results": []}), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(str(not_audit)) + r": field attack is missing"):
        load_payload(not_audit)

    broken = tmp_path / "broken" / "audit.json"
    broken.parent.mkdir()
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(str(broken)) + r" is not valid JSON"):
        load_payload(broken.parent)
