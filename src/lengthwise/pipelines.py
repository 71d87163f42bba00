"""The jobs that join two rooms, one call each: ``audit``, ``eval`` and the three ``tune`` commands.

The audit with the evaluation room's BEIR reader and TempScale; an evaluation through TempScale and long documents,
or through a long-document index; a tuner (TempScale, long documents, an index's fusion) with the evaluation room's
score. A job of one room and a model loaded as saved lives in that room (`lengthwise.facade` binds the loader, and
opens an index a job is handed: `opened_index`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import SettingError
from lengthwise.core.fusion import TUNED_WEIGHTS
from lengthwise.facade import LongIndex, build_encoder, load_model, opened_index
from lengthwise.search.types import TokenChoice

if TYPE_CHECKING:
    from lengthwise.audit.config import AuditJob
    from lengthwise.audit.schema import AuditPayload
    from lengthwise.evaluation.config import EvalConfig, Task
    from lengthwise.evaluation.schema import EvalRecord
    from lengthwise.longdoc.config import LongDocConfig
    from lengthwise.longdoc.tune import LongTuneResult
    from lengthwise.search.backend import Backend
    from lengthwise.tempscale.config import TempScaleConfig
    from lengthwise.tempscale.schema import TuneRecord
    from lengthwise.tempscale.tune import TuneSpec

__all__ = ["audit_model", "evaluate", "evaluate_through_index", "tune_hybrid", "tune_long_documents", "tune_tempscale"]


def audit_model(
    job: AuditJob,
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    device: str | None = None,
    max_length: int | None = None,
    trust_remote_code: bool = False,
    precision: str = "fp32",
    tempscale: float | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> AuditPayload:
    """`lengthwise audit` as one call: read and check every input, load the model, run the elongation attack (and
    the document diagnostics and retrieval length-bias audit `job` asks for), write the output set; returns the
    payload written as ``audit.json``. `tempscale`: audit under TempScale at this t (every part sees it); the rest
    as for `lengthwise.load_model`. `on_progress` is called with (stage, done, total).

    Example:
        >>> payload = lw.audit_model(AuditJob(out=Path("out/audit")))  # = lengthwise audit -o out/audit
    """
    from contextlib import nullcontext

    from lengthwise.audit.retrieval.config import RetrievalRequest
    from lengthwise.audit.run import check_output, read_inputs, run_full_audit
    from lengthwise.core.output_set import prepare_out
    from lengthwise.evaluation.data import read_beir
    from lengthwise.search.lexical.scorer import BM25Scorer
    from lengthwise.tempscale import TempScaleConfig
    from lengthwise.tempscale.apply import tempscale as tempscale_patch

    ts_config = TempScaleConfig.of(tempscale)  # everything is checked before the model loads
    inputs = read_inputs(job)
    note = None if tempscale is None else f"TempScale t={tempscale:g}"
    data = None if job.retrieval_data is None else read_beir(job.retrieval_data, job.retrieval_split)
    request = None if data is None else RetrievalRequest.of(data, job.retrieval, encoder_note=note, lexical=BM25Scorer)
    prepare_out(job.out, check_output)
    encoder = load_model(model, device=device, trust_remote_code=trust_remote_code, max_seq_length=max_length,
                         precision=precision)  # fmt: skip
    patched: Any = nullcontext() if ts_config is None else tempscale_patch(encoder, ts_config)
    name = str(model) if tempscale is None else f"{model} (TempScale t={tempscale:g})"
    with patched:
        return run_full_audit(encoder, job, inputs, model_name=name, on_progress=on_progress, retrieval=request)


def evaluate(
    config: EvalConfig,
    model: str | os.PathLike[str] | None = None,
    *,
    out: str | os.PathLike[str] | None = None,
    device: str | None = None,
    max_length: int | None = None,
    trust_remote_code: bool = False,
    precision: str | None = None,
    tempscale: float | TempScaleConfig | None = None,
    long: str | LongDocConfig | None = None,
    window: int | None = None,
    stride: int | None = None,
    index: str | os.PathLike[str] | None = None,
    mode: str | None = None,
    backend: Backend | None = None,
    tokens: TokenChoice | str | os.PathLike[str] | None = None,
    show_progress: bool = False,
) -> EvalRecord:
    """`lengthwise eval` as one call: read the data, load the model, build its encoder, score, write `out`.

    Args:
        config: The task, its data and settings (`EvalConfig`).
        model: A model folder, an installed model package's name or a Hugging Face id (None: `DEFAULT_MODEL`).
        out: Where ``results.json`` and its plots go as one set, checked before any compute; None writes nothing.
        device, max_length, trust_remote_code, precision: As for `lengthwise.load_model` (precision None: fp32).
        tempscale, long, window, stride: As for `build_encoder`.
        index, mode: Rank through this index (`evaluate_through_index`) in this mode; the model and how it embeds
            are then the index's, and the settings above that set them are refused (`SettingError`), but for
            `precision`: the queries' (an index embedded in fp32 may take another; None: as recorded).
        backend: Where the index is (`lengthwise.search.backend.Backend`): a Milvus backend ranks through
            the index served there (no `index` folder then).
        tokens: Through an index in hybrid mode: rescore its best documents by their tokens (a `TokenChoice`: the
            folder of `lengthwise encode-tokens`, the weight and windows read; a folder alone: the defaults).
        show_progress: Show progress bars while encoding.

    Returns:
        The record ``results.json`` holds (overall and per-length-bin scores, settings, provenance).
    """
    from lengthwise.evaluation.run import check_output, evaluate_task, load_data, resolve, write_record

    started = time.perf_counter()
    searched = index is not None or (backend is not None and backend.kind != "local")
    given = {"model": model, "max_length": max_length, "tempscale": tempscale, "long": long, "window": window,
             "stride": stride}  # fmt: skip
    for name, value in given.items() if searched else ():
        if value is not None:  # the index fixes the model and how it embeds
            raise SettingError(name, value if isinstance(value, (str, int, float)) else str(value), "the index fixes "
                               "the model and how it embeds (its queries are embedded as its documents were); leave "
                               "it out when ranking through an index")  # fmt: skip
    if out is not None:
        check_output(Path(out))  # a folder holding other files is refused now, not after the compute
    if searched:
        return evaluate_through_index(config, index, out=out, mode=mode, backend=backend, precision=precision,
                                      tokens=tokens)  # fmt: skip
    for name, wanted in {"mode": mode, **TokenChoice.of(tokens).given()}.items():
        if wanted is not None:
            raise SettingError(name, str(wanted), "ranks through an index; give the index to search")
    config, model = resolve(config), DEFAULT_MODEL if model is None else model
    data = load_data(config)
    loaded = load_model(model, device=device, trust_remote_code=trust_remote_code, max_seq_length=max_length,
                        precision=precision or "fp32")  # fmt: skip
    setup = build_encoder(loaded, tempscale=tempscale, long=long, window=window, stride=stride)
    record = evaluate_task(config, loaded, model_name=str(model), data=data, encoder=setup.encoder,
                           extra_settings=setup.settings, show_progress=show_progress, started=started)  # fmt: skip
    if out is not None:
        write_record(record, Path(out))
    return record


def evaluate_through_index(
    config: EvalConfig,
    index: str | os.PathLike[str] | LongIndex | None,
    *,
    out: str | os.PathLike[str] | None = None,
    mode: str | None = None,
    backend: Backend | None = None,
    precision: str | None = None,
    tokens: TokenChoice | str | os.PathLike[str] | None = None,
) -> EvalRecord:
    """`lengthwise eval --task retrieval --index INDEX`: the BEIR task ranked through the index (candidates from
    its ANN engine, rescored exactly) and, on the same query vectors, by the exact scan of every window.

    The record's ``scores`` are the index's, ``exact_scores`` the exact scan's, ``index.overlap`` the mean share of
    the exact top-k (k = ``config.retrieval.top_k``) the index also returns. `config.data` must be the indexed corpus
    (same ids and texts, by encode's digest); only the queries are encoded. `mode` (default: the index's recorded
    one) searches dense, lexical or hybrid, and the exact scan is that mode's over every document. `backend`: the
    index served in Milvus instead (`index` None), recorded as ``milvus:URI#NAME``. `precision`: the queries'
    (`QueryModel.set_query_precision`; None: the precision the documents were embedded at), recorded as
    ``query_precision``. `tokens`: a hybrid search rescored by the token side (`TokenChoice`), its exact scan's
    best documents rescored the same way; recorded as ``tokens``.
    """
    from lengthwise.evaluation.rankings import index_record, index_task

    started = time.perf_counter()
    milvus = backend is not None and backend.kind == "milvus"
    where = backend.where if milvus else str(index)  # type: ignore[union-attr]  # milvus: a backend
    opened = opened_index(index, backend)
    opened.set_query_precision(precision)
    TokenChoice.of(tokens).apply(opened)
    config, data = index_task(config, where)
    opened.check_corpus(config.data)
    chosen, k = opened.search_mode(mode), config.retrieval.top_k + (1 if config.retrieval.drop_self_hits else 0)
    described = {"engine": "milvus" if milvus else opened.settings["engine"], **opened.searched_with(chosen)}
    runs = opened.ranked_with_exact(list(data.query_texts), k, chosen)  # k: room for the self-hit that is dropped
    return index_record(config, data, runs, index=where, described=described, model=dict(opened.settings["model"]),
                        out=out, started=started)  # fmt: skip


def tune_tempscale(
    task: Task | str,
    data: str | os.PathLike[str],
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    spec: TuneSpec | None = None,
    out: str | os.PathLike[str] | None = None,
    split: str = "dev",
    max_items: int | None = None,
    batch_size: int = 32,
    seed: int = 0,
    device: str | None = None,
    max_length: int | None = None,
    trust_remote_code: bool = False,
    precision: str = "fp32",
    on_eval: Callable[[float, float], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> TuneRecord:
    """`lengthwise tempscale tune` as one call: pick the attention temperature t on a dev split
    (`lengthwise.tempscale.tune.tune_model`, scored by `lengthwise.evaluation.objectives.dev_objective`).

    Args:
        task, data, split: ``sts`` (Spearman on an STS dev file), ``retrieval`` (nDCG@10 on a BEIR folder's
            `split`) or ``classification`` (accuracy on a stratified half of train, fit on the other half).
        model: A model folder, package or hub id; a TempScale saved with it is set aside (`on_note` is told).
        spec: The grid and the bounded 1-D search (`TuneSpec`; default: its defaults).
        out: Where ``tune.json`` and ``tune.png`` go as one set, checked before any compute; None writes nothing.
        max_items, batch_size, seed: A seeded sample size, texts per forward pass, the seed.
        device, max_length, trust_remote_code, precision: As for `lengthwise.load_model`.
        on_eval, on_note: Called with (t, score) after each evaluation; with a line the user should see.

    Returns:
        The record written to ``tune.json``.
    """
    from lengthwise.core.output_set import check_output_target
    from lengthwise.evaluation.config import Task
    from lengthwise.evaluation.objectives import dev_objective
    from lengthwise.tempscale import remove_tempscale
    from lengthwise.tempscale.tune import TUNE_FILES, tune_model

    started, task = time.perf_counter(), Task(task)
    if out is not None:
        check_output_target(Path(out), TUNE_FILES, what="a TempScale tuning", field="out")  # before the model loads
    loaded = load_model(model, device=device, max_seq_length=max_length, trust_remote_code=trust_remote_code,
                        precision=precision)  # fmt: skip
    previous = remove_tempscale(loaded)  # start from the untouched model
    if previous is not None and on_note is not None:
        on_note(f"note: ignoring the TempScale settings saved with {model} ({previous})")
    opts: dict[str, Any] = {"batch_size": batch_size, "max_items": max_items, "seed": seed}
    score, described = dev_objective(task, data, split, **opts)
    return tune_model(loaded, score, spec, name=model, task=task.value, metric=task.metric, data=described,
                      settings={"split": split, **opts}, out=out, on_eval=on_eval, started=started)  # fmt: skip


def tune_long_documents(
    data: str | os.PathLike[str],
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    strategies: Sequence[str] = ("chunk-mean", "chunk-weighted", "multi-vector", "late-chunking"),
    windows: Sequence[int] = (64, 128, 256),
    overlaps: Sequence[float] = (0.0, 0.5),
    best_windows: int | Sequence[int] = 1,
    scales: Sequence[Sequence[int]] = ((),),
    fuse_means: Sequence[float] = (0.0,),
    out: str | os.PathLike[str] | None = None,
    split: str = "dev",
    save: str | os.PathLike[str] | None = None,
    batch_size: int = 32,
    device: str | None = None,
    precision: str = "fp32",
    on_eval: Callable[[LongDocConfig, float], None] | None = None,
) -> tuple[LongTuneResult, dict[str, Any]]:
    """`lengthwise longdoc tune` as one call: choose strategy, window and stride on a dev split
    (`lengthwise.longdoc.tune.tune_model`; a BEIR folder is scored by the evaluation room's nDCG@10).

    Args:
        data, split: A BEIR folder (nDCG@10 on `split`) or a folder written by `lengthwise longdoc synth` (Acc@1).
        model: A model folder, an installed model package's name or a Hugging Face id.
        strategies, windows, overlaps, best_windows, scales, fuse_means: The candidates
            (`lengthwise.longdoc.tune.candidates`; the last three for multi-vector); truncation at the model's own
            window is always the baseline.
        out: Where ``tune.json`` and ``tune.png`` go as one set, checked before any compute; None writes nothing.
        save: Also save the model with the best choice here; `lengthwise.load_model` then picks it up.
        batch_size, device, precision, on_eval: Windows per forward pass; the device; auto, fp32, bf16, fp16 or
            int8; called with (config, score) after each candidate.

    Returns:
        The tuning result and the record written to ``tune.json``.
    """
    from lengthwise.evaluation.config import RetrievalConfig, Task
    from lengthwise.evaluation.objectives import dev_objective
    from lengthwise.longdoc.tune import check_targets, plan_candidates, synthetic_score, tune_model

    started = time.perf_counter()
    check_targets(out, save)  # before the model loads, as the candidates are
    configs, settings = plan_candidates(strategies, windows, overlaps, best_windows=best_windows,
                                        scales=scales, fuse_means=fuse_means)  # fmt: skip
    loaded = load_model(model, device=device, precision=precision)
    score, described, metric = synthetic_score(data, batch_size) or (  # else a BEIR folder, every document kept
        *dev_objective(Task.retrieval, data, split, batch_size=batch_size, retrieval=RetrievalConfig()),
        "ndcg@10",
    )
    return tune_model(loaded, configs, score, name=model, metric=metric, data=described, settings={**settings,
                      "split": split}, out=out, save=save, on_eval=on_eval, started=started)  # fmt: skip


def tune_hybrid(
    index: str | os.PathLike[str] | LongIndex,
    data: str | os.PathLike[str],
    *,
    split: str = "dev",
    weights: Sequence[float] = TUNED_WEIGHTS,
    save: bool = True,
    on_eval: Callable[[str, float], None] | None = None,
    tokens: TokenChoice | str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """`lengthwise index tune`: choose an index's search mode and fusion by nDCG@10 through the index on a BEIR dev
    split of its corpus (`LongIndex.tune_fusion`, scored by `qrels_objective`) and, with `save`, record them in it
    for `LongIndex.search` and `lengthwise search`; `split` is the one tuned on, never the one reported. `tokens`:
    the token stage among the arms, its weight tuned (`LongIndex.tune_fusion`).

    Returns:
        ``{"split", "scores": {arm: nDCG@10}, "mode", "fusion"}`` (and the ``"tokens"`` weight chosen, with tokens).
    """
    from lengthwise.evaluation.objectives import qrels_objective

    opened = opened_index(index)
    from lengthwise.search.index import LongIndex as LocalIndex

    if not isinstance(opened, LocalIndex):  # a tuning is recorded in the index's own folder
        raise SettingError("index", opened.name, "is served in Milvus, and a tuning is recorded in the index's own "
                           "folder: tune the local index, then load it into Milvus again")  # fmt: skip
    opened.check_corpus(data)  # the same ids and texts, as `evaluate_through_index` checks
    texts, ndcg = qrels_objective(data, split, opened.doc_ids)
    tuned = {"data": str(data), "split": split} if save else None
    return {"split": split, **opened.tune_fusion(texts, ndcg, weights=weights, on_eval=on_eval, record=tuned,
                                                 tokens=TokenChoice.of(tokens))}  # fmt: skip
