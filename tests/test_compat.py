"""The old 0.1 import paths (`lengthwise._compat`): every old module still gives every name users imported from it.

`OLD_NAMES` is each 0.1 flat module's `__all__` (public definitions where it had none), read from the last commit
before the layout refactor (91cfee9^), plus the names the 0.1 modules imported from one another (the report's
plotting and HTML helpers). Before this test, `lengthwise.diagnostics.LengthBins` and `lengthwise.report`'s
helpers (`new_figure`, `html_table`, …) raised AttributeError: they moved to other modules than the alias's target.
"""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

from lengthwise._compat import MOVED

OLD_NAMES: dict[str, tuple[str, ...]] = {
    "lengthwise.tokens": (
        "Elongation", "SpecialTokens", "content_ids", "elongate", "elongation_factor", "first_k", "segments",
        "shuffle_words", "special_tokens", "split_sentences", "MAX_TEXT_CHARS",
    ),
    "lengthwise.embed": ("TokenView", "batch_features", "embed_ids", "embed_texts"),
    "lengthwise.models": (
        "DEFAULT_MODEL", "ModelLoadError", "load_model", "model_fingerprint", "resolve_model_path", "set_max_length",
    ),
    "lengthwise.encoder": ("SentenceTransformerEncoder", "TextEncoder", "as_encoder"),
    "lengthwise.pairs": (
        "DataFormatError", "PairSet", "TextPair", "beir_documents", "checked_text", "default_probe_pairs",
        "jsonl_objects", "open_text", "read_pairs",
    ),
    "lengthwise.results": ("environment", "write_bytes_atomic", "write_json_atomic"),
    "lengthwise.evaluation.bins": ("LengthBins", "per_bin", "token_lengths"),
    "lengthwise.shift": (
        "HistogramSpec", "JSDNull", "ShiftStats", "js_distance", "js_distance_null", "paired_cosine",
        "similarity_histogram", "similarity_shift",
    ),
    "lengthwise.diagnostics": (
        "CosineMoments", "LayerTokenStats", "LengthBins", "ProbeScore", "adjusted_intra_similarity", "alignment",
        "anisotropy", "attention_filter_rate", "batch_filter_rates", "elongation_isotropy",
        "intra_document_similarity", "length_collapse", "length_probe_r2", "pooled_isotropy", "token_unit_sums",
        "uniformity",
    ),
    "lengthwise.doc_audit": (
        "DIAGNOSTICS", "DocAuditConfig", "DocSet", "read_docs", "repeated_words_curve", "run_doc_audit",
    ),
    "lengthwise.report": (
        "load_payload", "plot_attack", "plot_first_k_curve", "plot_word_shuffle", "render_html", "write_report",
        "ELONGATED_COLOR", "ORIGINAL_COLOR", "REPORT_CSS", "escape_html", "finish_axes", "histogram_density",
        "histogram_edges", "html_image", "html_kv_table", "html_table", "lengthwise_version", "mass_limits",
        "new_figure", "png_bytes", "rebin_counts", "FIGSIZE", "DPI",
    ),
    "lengthwise.report_docs": (
        "EXPLANATIONS", "PLOTTERS", "PNG_NAMES", "TITLES", "figures", "html_sections", "plot_attention",
        "plot_collapse", "plot_intra", "plot_isotropy", "plot_probe", "plot_words_curve", "summary_rows", "Series",
    ),
    "lengthwise.compare": (
        "comparison_labels", "headline_rows", "plot_attack_overlay", "render_comparison", "write_comparison",
    ),
    "lengthwise.tempscale_config": ("LengthSchedule", "Role", "TempScaleConfig", "TempScaleError"),
    "lengthwise.tempscale_families": ("FAMILIES", "Family", "detect_family", "query_rows"),
    "lengthwise.tempscale_patch": ("TempScalePatch",),
    "lengthwise.tempscale_tune": (
        "Objective", "TuneResult", "TuneSpec", "config_for", "plot_tune_curve", "tune_temperature",
    ),
    "lengthwise.cli_console": ("console", "fail"),
    "lengthwise.eval_cli": ("Task", "evaluate", "HF_PREFIX"),
    "lengthwise.tempscale_cli": ("Task", "Side", "families", "bake", "save", "tune"),
    "lengthwise.train_cli": ("train", "METHOD_HELP"),
}  # fmt: skip


def test_every_old_path_is_listed() -> None:
    assert set(OLD_NAMES) == set(MOVED)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_gives_every_name_users_imported(old: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {MOVED[old]}"):
        module = importlib.import_module(old)
    missing = [name for name in OLD_NAMES[old] if not hasattr(module, name)]
    assert not missing, f"{old} → {MOVED[old]} lacks {missing}"
    assert set(OLD_NAMES[old]) <= set(dir(module))


def test_a_name_that_never_existed_is_an_attribute_error() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module("lengthwise.report")
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018
