"""Whole jobs as one call each: where the rooms meet for what the command line does.

Every `lengthwise` command parses its flags, makes one call here (or to a room's own one-call entry point)
and prints. A Python user makes the same call and gets the same record:

    >>> import lengthwise as lw
    >>> from lengthwise.evaluation.config import EvalConfig
    >>> record = lw.evaluate(EvalConfig(task="sts", data="sts-test.csv.gz"), tempscale=0.8, long="chunk-mean",
    ...                      out="out/eval")  # = lengthwise eval --task sts -d sts-test.csv.gz --tempscale 0.8 \\
    ...                                       #   --long chunk-mean -o out/eval

Rooms never import each other; this module (like `facade.py`) may.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import SettingError
from lengthwise.core.scoring import WindowScoring

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from lengthwise.audit.config import AuditJob
    from lengthwise.audit.retrieval.config import RetrievalRequest
    from lengthwise.audit.schema import AuditPayload
    from lengthwise.core.encoder import TextEncoder
    from lengthwise.evaluation.config import EvalConfig, Task
    from lengthwise.evaluation.schema import EvalRecord
    from lengthwise.longdoc.config import LongDocConfig
    from lengthwise.longdoc.hybrid import Hit
    from lengthwise.longdoc.synthetic import SyntheticSet
    from lengthwise.longdoc.tune import LongTuneResult
    from lengthwise.tempscale.config import TempScaleConfig
    from lengthwise.tempscale.schema import TuneRecord
    from lengthwise.tempscale.tune import TuneSpec

__all__ = [
    "BakeResult",
    "EncoderSetup",
    "LongIndex",
    "audit_model",
    "bake",
    "build_encoder",
    "encode",
    "evaluate",
    "save_long_documents",
    "save_tempscaled",
    "score_long_task",
    "synthesize",
    "tune_long_documents",
    "tune_tempscale",
]

TUNE_FILES = ("tune.json", "tune.png")  # what `tune_tempscale` writes, as one output set


def _check_out(out: Path, check: Callable[[Path], None]) -> None:
    """Make the folder an output set is staged in (the parent of `out`) and run the output set's own `check`; any
    problem is a `SettingError` on ``out``, raised before the model loads."""
    import tempfile

    try:
        parent = Path(out).resolve().parent
        parent.mkdir(parents=True, exist_ok=True)
        check(out)
        Path(tempfile.mkdtemp(prefix=".lengthwise-probe-", dir=parent)).rmdir()  # the set is staged there
    except OSError as error:
        raise SettingError(
            "out", str(out), f"cannot write there ({error.strerror}); pass a writable directory"
        ) from None
    except ValueError as error:
        raise SettingError("out", str(out), str(error).removeprefix(f"{out}: ")) from None


def _writable_folder(out: Path) -> None:
    """Make `out` a folder now (ValueError naming it if that fails), so nothing computed is lost at the end."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a directory; pass a directory path")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"{out}: cannot write there ({error.strerror}); pass a writable directory") from None


def _tempscale_config(value: float | TempScaleConfig | None) -> TempScaleConfig | None:
    """A temperature as a `TempScaleConfig`; a bad one is a `SettingError` on the job's ``tempscale`` setting."""
    from lengthwise.tempscale.config import TempScaleConfig, TempScaleError

    if value is None or isinstance(value, TempScaleConfig):
        return value
    try:
        return TempScaleConfig(t=value)
    except TempScaleError as error:
        raise SettingError("tempscale", value, error.problem) from None


def _retrieval_request(job: AuditJob, tempscale: float | None) -> RetrievalRequest | None:
    """The retrieval audit's request: `job.retrieval_data` read as BEIR (the evaluation room's reader)."""
    if job.retrieval_data is None:
        return None
    from lengthwise.audit.retrieval.config import RetrievalRequest
    from lengthwise.evaluation.data import read_beir

    note = None if tempscale is None else f"TempScale t={tempscale:g}"
    return RetrievalRequest(read_beir(job.retrieval_data, job.retrieval_split), job.retrieval, encoder_note=note)


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
    the document diagnostics and the retrieval length-bias audit the job asks for), write the output set.

    Args:
        job: What to read, what to measure and where to write (`AuditJob`).
        model: A model folder, an installed model package's name or a Hugging Face id.
        device, max_length, trust_remote_code, precision: As for `lengthwise.load_model` (``"int8"``: int8 Linear
            layers on the CPU).
        tempscale: Audit the model under TempScale at this attention temperature t (every part sees it).
        on_progress: Called with (stage, done, total) as the work goes on.

    Returns:
        The payload written as ``audit.json``.

    Example:
        >>> payload = lw.audit_model(AuditJob(out=Path("out/audit")))  # = lengthwise audit -o out/audit
    """
    from contextlib import nullcontext

    from lengthwise.audit.run import check_output, read_inputs, run_full_audit
    from lengthwise.facade import load_model

    ts_config = _tempscale_config(tempscale)  # everything is checked before the model loads
    inputs = read_inputs(job)
    request = _retrieval_request(job, tempscale)
    _check_out(job.out, check_output)
    encoder = load_model(model, device=device, trust_remote_code=trust_remote_code, max_seq_length=max_length,
                         precision=precision)  # fmt: skip
    if ts_config is None:
        patched: Any = nullcontext()
    else:
        from lengthwise.tempscale.apply import tempscale as tempscale_patch

        patched = tempscale_patch(encoder, ts_config)
    name = str(model) if tempscale is None else f"{model} (TempScale t={tempscale:g})"
    with patched:
        return run_full_audit(encoder, job, inputs, model_name=name, on_progress=on_progress, retrieval=request)


@dataclass(frozen=True)
class EncoderSetup:
    """What `build_encoder` made: the encoder (None = the plain model) and the settings it adds to a record."""

    encoder: TextEncoder | None
    settings: dict[str, Any] = field(default_factory=dict)


def build_encoder(
    model: SentenceTransformer,
    *,
    tempscale: float | TempScaleConfig | None = None,
    long: str | LongDocConfig | None = None,
    window: int | None = None,
    stride: int | None = None,
) -> EncoderSetup:
    """The encoder a job runs `model` through: TempScale, long documents, both, or neither.

    Args:
        model: A loaded model (`lengthwise.load_model`, which keeps a saved long-document choice).
        tempscale: An attention temperature t, or a full `TempScaleConfig` (replaces one saved with the model).
        long: A long-document strategy name, ``"default"`` (`lengthwise.longdoc.RECOMMENDED`) or a
            `LongDocConfig`; None keeps the choice saved with the model, if any, else the model's own truncation.
        window: Tokens per window (special tokens included), over the strategy's.
        stride: Step between window starts, over the strategy's.

    Returns:
        The encoder and the settings (``tempscale``, ``long``) that a result record should carry.

    With both TempScale and long documents, the model stays patched with the temperature after the call: the
    long encoder passes each call's role to the model, so query and document temperatures apply per window.
    """
    from lengthwise.longdoc import RECOMMENDED, LongDocConfig, LongEncoder
    from lengthwise.longdoc.persist import saved_longdoc
    from lengthwise.tempscale import TempScaleEncoder, apply_tempscale, remove_tempscale

    ts_config = _tempscale_config(tempscale)
    settings: dict[str, Any] = {}
    encoder: TextEncoder | None = None
    if ts_config is not None:
        encoder = TempScaleEncoder(model, ts_config)
        settings["tempscale"] = ts_config.to_dict()
    saved = saved_longdoc(model)
    if long is None and saved is None:
        if window is not None or stride is not None:
            raise SettingError("strategy", None, "a window or stride needs a long-document strategy, e.g. chunk-mean")
        return EncoderSetup(encoder, settings)
    base = long if isinstance(long, LongDocConfig) else saved if long is None else LongDocConfig.named(long)
    changes = {key: value for key, value in {"window": window, "stride": stride}.items() if value is not None}
    config = (base or RECOMMENDED).updated(**changes)  # base is set here; `or` only narrows the type
    if ts_config is not None:
        remove_tempscale(model)
        apply_tempscale(model, ts_config)
    long_encoder = LongEncoder(model, config)
    settings["long"] = long_encoder.config.to_dict()
    return EncoderSetup(long_encoder, settings)


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
    show_progress: bool = False,
) -> EvalRecord:
    """`lengthwise eval` as one call: read the data, load the model, build its encoder, score, write `out`.

    Args:
        config: The task, its data and settings (`EvalConfig`).
        model: A model folder, an installed model package's name or a Hugging Face id (None: `DEFAULT_MODEL`).
        out: Where ``results.json`` and its plots are written as one set (new, empty, or an earlier eval's);
            checked before any compute. None writes nothing.
        device, max_length, trust_remote_code, precision: As for `lengthwise.load_model` (precision None: fp32).
        tempscale, long, window, stride: As for `build_encoder`.
        index: Retrieval only: rank through this index (`lengthwise index build`) instead of encoding the corpus;
            see `evaluate_through_index`. The model and how it embeds are the index's own: `model`, `max_length`,
            `precision`, `tempscale`, `long`, `window` and `stride` are refused with it (`SettingError`).
        mode: With `index`: ``dense``, ``lexical`` or ``hybrid`` (default: the index's recorded mode).
        show_progress: Show progress bars while encoding.

    Returns:
        The record that ``results.json`` holds (overall and per-length-bin scores, settings, provenance).
    """
    from lengthwise.evaluation.run import check_output, evaluate_task, load_data, resolve, write_record
    from lengthwise.facade import load_model

    started = time.perf_counter()
    if index is not None:
        _refuse_with_index(model=model, max_length=max_length, precision=precision, tempscale=tempscale, long=long,
                           window=window, stride=stride)  # fmt: skip
    out = None if out is None else Path(out)
    if out is not None:
        check_output(out)  # a folder holding other files is refused now, not after the compute
    if index is not None:
        return evaluate_through_index(config, index, out=out, mode=mode)
    if mode is not None:
        raise SettingError("mode", mode, "ranks through an index; give the index to search")
    model = DEFAULT_MODEL if model is None else model
    config = resolve(config)
    data = load_data(config)
    loaded = load_model(model, device=device, trust_remote_code=trust_remote_code, max_seq_length=max_length,
                        precision=precision or "fp32")  # fmt: skip
    setup = build_encoder(loaded, tempscale=tempscale, long=long, window=window, stride=stride)
    record = evaluate_task(
        config,
        loaded,
        model_name=str(model),
        data=data,
        encoder=setup.encoder,
        extra_settings=setup.settings,
        show_progress=show_progress,
        started=started,
    )
    if out is not None:
        write_record(record, out)
    return record


def _refuse_with_index(**given: Any) -> None:
    """A `SettingError` on the first of `given` that is set: an index fixes the model and how it embeds."""
    for name, value in given.items():
        if value is not None:
            shown = value if isinstance(value, (str, int, float)) else str(value)
            raise SettingError(name, shown, "the index fixes the model and how it embeds (its queries are embedded "
                               "as its documents were); leave it out when ranking through an index")  # fmt: skip


def _check_index_texts(index: Any, opened: LongIndex, data: str | os.PathLike[str]) -> None:
    """A `SettingError` on ``index`` unless it holds the texts of the corpus at `data` (the digest `lengthwise
    encode` recorded against the corpus read now): the same ids with other texts would score as if they were it."""
    from lengthwise.longdoc.store import TEXTS, corpus_digests, texts_sha256

    recorded = opened.windows.settings["encode_settings"].get(TEXTS)
    if recorded is None:
        raise SettingError("index", str(index), "records no digest of the texts it holds (built by an older "
                           f"lengthwise, or from an unfinished encode), so it cannot be checked against {data}; "
                           "encode the corpus and build the index again")  # fmt: skip
    if texts_sha256(corpus_digests(_corpus_file(Path(data)))) != recorded:
        raise SettingError("index", str(index), f"holds the ids of {data} with other texts (it was built from "
                           "another version of the corpus); build the index from this corpus")  # fmt: skip


def evaluate_through_index(
    config: EvalConfig,
    index: str | os.PathLike[str] | LongIndex,
    *,
    out: str | os.PathLike[str] | None = None,
    mode: str | None = None,
) -> EvalRecord:
    """`lengthwise eval --task retrieval --index INDEX`: the BEIR task ranked through the index (candidates from
    its ANN engine, rescored exactly) and, on the same query vectors, by the exact scan of every window.

    The record's ``scores`` are the index's; ``exact_scores`` the exact scan's; ``index.overlap`` the share of the
    exact top-k documents the index also returns (k = ``config.retrieval.top_k``), averaged over the queries. The
    corpus of `config.data` must be the one the index holds (same ids, and the same texts by the digest `lengthwise
    encode` recorded). Nothing is encoded but the queries. `mode` (default: the index's recorded mode) searches
    dense, lexical or hybrid; the exact scan is then the same mode's over every document (for hybrid: both sides'
    exact scores of every document, fused).
    """

    from lengthwise.core.output_set import write_output_set
    from lengthwise.core.results import json_bytes, provenance
    from lengthwise.evaluation.config import Task
    from lengthwise.evaluation.data import read_beir
    from lengthwise.evaluation.run import OUTPUT_NAMES, resolve

    started = time.perf_counter()
    if config.task is not Task.retrieval:
        raise SettingError("index", str(index), f"ranks retrieval only, not {config.task.value}; use --task retrieval")
    config = resolve(config)
    opened = index if isinstance(index, LongIndex) else LongIndex.open(index)
    data = read_beir(config.data, config.split)
    held = set(opened.windows.doc_ids)
    if held != set(data.doc_ids):
        missing = len(set(data.doc_ids) - held)
        raise SettingError("index", str(index), f"holds {len(held)} documents, {missing} of the {len(data.doc_ids)} "
                           f"in {config.data} are not among them; build the index from this corpus")  # fmt: skip
    _check_index_texts(index, opened, config.data)
    settings = config.retrieval
    k = settings.top_k + (1 if settings.drop_self_hits else 0)  # room for the self-hit that is dropped
    chosen = opened._mode(mode)
    runs = _index_runs(opened, chosen, list(data.query_texts), k)
    scores, overlap = _index_scores(runs, data, config.retrieval)
    made = provenance(opened.windows.settings["model"], dict(data.describe()),
                      {"retrieval": settings.to_dict(), "index": str(index)}, started=started)  # fmt: skip
    record: dict[str, Any] = {
        "task": "retrieval", "model": opened.windows.settings["model"], "scores": scores["index"],
        "exact_scores": scores["exact"], "bins": {"queries": [], "documents": []},
        "index": {"engine": opened.windows.settings["engine"], "quantize": opened.windows.settings["quantize"],
                  "overlap": round(overlap, 4), "k": settings.top_k, "mode": chosen.value,
                  **({"fusion": opened.fusion.to_dict()} if chosen.value == "hybrid" else {})}, **made,
    }  # fmt: skip
    if out is not None:
        write_output_set(Path(out), {"results.json": json_bytes(record)}, OUTPUT_NAMES, what="an evaluation")
    return record  # type: ignore[return-value]


def _index_runs(opened: LongIndex, mode: Any, texts: list[str], k: int) -> dict[str, list]:
    """(id, score) rankings of the `k` best documents per query: through the index in `mode`, and by the same
    mode's exact scan of every document."""
    import numpy as np

    from lengthwise.longdoc.hybrid import HybridSearch, Mode

    vectors = None if mode is Mode.LEXICAL else np.asarray(opened.embed_queries(texts), dtype=np.float32)
    candidates = max(opened.windows.default_windows(), 10 * k)
    if mode is Mode.DENSE:
        assert vectors is not None
        return {"index": opened.windows.search_vectors(vectors, k, scoring=opened.scoring, windows=candidates),
                "exact": opened.windows.exact_vectors(vectors, k, scoring=opened.scoring)}  # fmt: skip
    searcher = HybridSearch(opened.windows, opened.lexical, opened.scoring, opened.fusion)
    found = searcher.search(vectors, texts, k, mode, windows=candidates)
    exact = [searcher.exact_ranked(None if vectors is None else vectors[n], text, k, mode)
             for n, text in enumerate(texts)]  # fmt: skip
    return {"index": [[(hit.id, hit.score) for hit in row] for row in found], "exact": exact}


def _index_scores(runs: dict[str, list], data: Any, settings: Any) -> tuple[dict[str, dict[str, float]], float]:
    """Headline scores (×100) of each ranking in `runs` and the index's mean share of the exact top-k."""
    import numpy as np

    from lengthwise.evaluation.retrieval import trec_scores

    scores, tops = {}, {}
    for name, hits in runs.items():
        run = {qid: {doc: score for doc, score in row if not (settings.drop_self_hits and doc == qid)}
               for qid, row in zip(data.query_ids, hits, strict=True) if qid in data.qrels}  # fmt: skip
        per_query = trec_scores({qid: data.qrels[qid] for qid in run}, run, settings)
        names = list(next(iter(per_query.values())))
        scores[name] = {m: round(100 * float(np.mean([row[m] for row in per_query.values()])), 4) for m in names}
        tops[name] = {q: sorted(docs, key=docs.__getitem__, reverse=True)[: settings.top_k] for q, docs in run.items()}
    shares = [len(set(tops["index"][q]) & set(top)) / max(1, len(top)) for q, top in tops["exact"].items()]
    return scores, float(np.mean(shares))


def _tune_objective(
    task: Task, data: str | os.PathLike[str], split: str, model: SentenceTransformer, opts: dict[str, Any]
) -> tuple[Callable[[TempScaleConfig], float], dict[str, Any]]:
    """(objective, data description) for a task on its dev data, scored through `lengthwise.evaluation`.

    STS: Spearman on the (sampled) pairs; retrieval: nDCG@10 on the BEIR `split`; classification: accuracy of a
    classifier fit on one stratified half of train and scored on the other (the test split is never read).
    """
    from lengthwise import evaluation as ev
    from lengthwise.evaluation.config import RetrievalConfig, Task
    from lengthwise.evaluation.tasks import drops_self_hits
    from lengthwise.tempscale import TempScaleEncoder

    batch = opts["batch_size"]
    if task is Task.sts:
        pairs = ev.read_sts(data)
        pairs = pairs.sample(opts["max_items"], opts["seed"]) if opts["max_items"] else pairs

        def sts(config: TempScaleConfig) -> float:
            score = ev.evaluate_sts(TempScaleEncoder(model, config), pairs, batch_size=batch).scores["spearman"]
            return float("nan") if score is None else score

        return sts, {"source": pairs.source, "n_pairs": len(pairs), "sha256": pairs.sha256}
    if task is Task.retrieval:
        beir = ev.read_beir(data, split)
        settings = RetrievalConfig(drop_self_hits=drops_self_hits("auto", Path(data)))  # as MTEB does for this task

        def retrieval(config: TempScaleConfig) -> float:
            encoder = TempScaleEncoder(model, config)
            return ev.evaluate_retrieval(encoder, beir, settings, batch_size=batch).scores["ndcg@10"]

        return retrieval, beir.describe()
    from sklearn.model_selection import train_test_split

    train, _ = ev.read_classification(data)  # the test split is never looked at while tuning
    train = train.stratified_sample(opts["max_items"], opts["seed"]) if opts["max_items"] else train
    fit, dev = train_test_split(range(len(train)), test_size=0.5, random_state=opts["seed"], stratify=train.labels)
    fit_set, dev_set = train.subset(sorted(fit), "tune: fit half"), train.subset(sorted(dev), "tune: dev half")
    classifier = ev.ClassificationConfig(few_shot=(), seed=opts["seed"])

    def classification(config: TempScaleConfig) -> float:
        encoder = TempScaleEncoder(model, config)
        return ev.evaluate_classification(encoder, fit_set, dev_set, classifier, batch_size=batch).scores["accuracy"]

    return classification, {"train": train.describe(), "dev": "a stratified half of train (the other half fits)"}


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
    """`lengthwise tempscale tune` as one call: pick the attention temperature t on a dev split.

    Args:
        task: ``sts`` (Spearman), ``retrieval`` (nDCG@10 on `split`) or ``classification`` (accuracy on a
            stratified half of train, fit on the other half).
        data: STS dev file or SentEval folder; BEIR folder; folder with train/test JSONL.
        model: A model folder, an installed model package's name or a Hugging Face id. TempScale settings saved
            with it are set aside (`on_note` is told): tuning starts from the untouched model.
        spec: The grid and the bounded 1-D search (`TuneSpec`; default: its defaults).
        out: Where ``tune.json`` (curve, best t, settings, provenance) and ``tune.png`` are written as one set;
            checked before any compute. None writes nothing.
        split, max_items, batch_size, seed: The qrels split, a seeded sample size, texts per forward pass, seed.
        device, max_length, trust_remote_code, precision: As for `lengthwise.load_model`.
        on_eval: Called with (t, score) after each evaluation.
        on_note: Called with a one-line note the user should see.

    Returns:
        The record written to ``tune.json``.
    """
    import io

    from lengthwise.core.models import model_fingerprint
    from lengthwise.core.output_set import check_output_target, write_output_set
    from lengthwise.core.results import json_bytes, provenance
    from lengthwise.evaluation.config import Task
    from lengthwise.facade import load_model
    from lengthwise.tempscale import remove_tempscale
    from lengthwise.tempscale.schema import TuneRecord
    from lengthwise.tempscale.tune import TuneSpec, plot_tune_curve, tune_temperature

    started = time.perf_counter()
    task, spec = Task(task), spec or TuneSpec()
    out = None if out is None else Path(out)
    if out is not None:
        check_output_target(out, TUNE_FILES, what="a TempScale tuning")  # before the model loads
    loaded = load_model(model, device=device, max_seq_length=max_length, trust_remote_code=trust_remote_code,
                        precision=precision)  # fmt: skip
    previous = remove_tempscale(loaded)  # start from the untouched model
    if previous is not None and on_note is not None:
        on_note(f"note: ignoring the TempScale settings saved with {model} ({previous})")
    opts: dict[str, Any] = {"batch_size": batch_size, "max_items": max_items, "seed": seed}
    objective, described = _tune_objective(task, data, split, loaded, opts)
    result = tune_temperature(objective, spec, on_eval=on_eval)
    bounds = list(spec.bounds) if spec.bounds else None
    settings = {"grid": list(spec.grid), "search": spec.search, "bounds": bounds, "xatol": spec.xatol,
                "max_evals": spec.max_evals, "side": spec.side.value, "split": split} | opts  # fmt: skip
    record = TuneRecord(
        **provenance(model_fingerprint(loaded, model), described, settings, started=started),
        task=task.value,
        metric=task.metric,
        result=result.to_dict(),
    )
    if out is not None:
        figure = io.BytesIO()
        plot_tune_curve(result, task.metric).savefig(figure, format="png", dpi=120)
        files = {"tune.json": json_bytes(record), "tune.png": figure.getvalue()}
        write_output_set(out, files, TUNE_FILES, what="a TempScale tuning")
    return record


@dataclass(frozen=True)
class BakeResult:
    """What `bake` wrote: the folder, the t its weights carry (the product of `steps` after a rebake), the note on
    TempScale settings saved with the source that were set aside, and the largest difference between the baked
    model's embeddings and the run-time patch's over the probe texts (None: not verified)."""

    out: Path
    t: float
    steps: tuple[float, ...]
    ignored: str | None
    max_difference: float | None


def _untouched_model(
    model: str | os.PathLike[str], out: Path, device: str | None, trust_remote_code: bool
) -> tuple[Any, str | None]:
    """Check `out` (before anything loads), then the model without any TempScale saved beside it, and the note on
    those settings (None when there were none)."""
    from lengthwise.facade import load_model
    from lengthwise.tempscale import remove_tempscale

    _check_out(out, _writable_folder)
    loaded = load_model(model, device=device, trust_remote_code=trust_remote_code)
    ignored = remove_tempscale(loaded)
    return loaded, None if ignored is None else str(ignored)


def bake(
    model: str | os.PathLike[str],
    t: float | TempScaleConfig,
    out: str | os.PathLike[str],
    *,
    rebake: bool = False,
    verify: bool = True,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> BakeResult:
    """Fold TempScale's t into the weights and save a plain sentence-transformers model (= ``lengthwise tempscale
    bake``): the query projections (and MPNet's relative position bias) are divided by t. With `verify`, the saved
    model's embeddings of the probe texts must equal the run-time patch's (within 1e-5), else `TempScaleError`.
    Schedules and query ≠ document temperatures cannot be baked; `out` must not be the model itself, and an already
    baked model needs `rebake` (the record then holds the product of the t's). Refusals come before the model loads.
    """
    from lengthwise.core.models import resolve_model_path
    from lengthwise.tempscale import TempScaleError, bake_tempscale
    from lengthwise.tempscale.persist import bake_plan

    config = _tempscale_config(t)
    assert config is not None
    out = Path(out)
    source = Path(resolve_model_path(model))
    folder = source if source.is_dir() else None
    total, steps = bake_plan(config, out, folder, stack=rebake)
    loaded, ignored = _untouched_model(model, out, device, trust_remote_code)
    bake_tempscale(loaded, config, out, source=folder, stack=rebake)
    difference = _bake_difference(loaded, config, out) if verify else None
    if difference is not None and difference > 1e-5:
        raise TempScaleError(f"baked weights differ from the run-time patch by {difference:.2e} (> 1e-5); do not "
                             f"use {out}")  # fmt: skip
    return BakeResult(out, total.t, tuple(steps), ignored, difference)


def _bake_difference(model: SentenceTransformer, config: TempScaleConfig, out: Path) -> float:
    """Largest |baked − run-time| over the embeddings of the probe texts."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.data import default_probe_pairs
    from lengthwise.tempscale import tempscale

    texts = sorted({p.text1 for p in default_probe_pairs().pairs})[:64]
    with tempscale(model, config):
        patched = model.encode(texts, convert_to_numpy=True)
    baked = SentenceTransformer(str(out), device=str(model.device)).encode(texts, convert_to_numpy=True)
    return float(np.abs(baked - patched).max())


def save_tempscaled(
    model: str | os.PathLike[str],
    t: float | TempScaleConfig,
    out: str | os.PathLike[str],
    *,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> str | None:
    """Save the model with its TempScale settings beside the original weights (= ``lengthwise tempscale save``);
    lengthwise's `load_model` re-applies them, a plain sentence-transformers load gives the untouched model. Any
    configuration can be saved, schedules included. Returns the note on TempScale settings the source already had
    (set aside), or None."""
    from lengthwise.tempscale import save_tempscale, tempscale

    config = _tempscale_config(t)
    out = Path(out)
    loaded, ignored = _untouched_model(model, out, device, trust_remote_code)
    with tempscale(loaded, config):
        save_tempscale(loaded, out)
    return ignored


def save_long_documents(
    model: str | os.PathLike[str],
    long: str | LongDocConfig,
    out: str | os.PathLike[str],
    *,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> Path:
    """Save the model with a long-document choice (= ``lengthwise longdoc save``): lengthwise's `load_model` and
    `LongEncoder(model)` then use it. The window and stride are checked against this model before anything is
    written."""
    from lengthwise.facade import load_model
    from lengthwise.longdoc import LongDocConfig, LongEncoder
    from lengthwise.longdoc.persist import save_longdoc

    config = long if isinstance(long, LongDocConfig) else LongDocConfig.named(long)
    out = Path(out)
    _check_out(out, _writable_folder)
    loaded = load_model(model, device=device, trust_remote_code=trust_remote_code)
    LongEncoder(loaded, config).spans([1] * 8)  # checks the window and stride against this model
    save_longdoc(loaded, config, out)
    return out


def _long_objective(
    data: Path, split: str, model: SentenceTransformer, batch_size: int
) -> tuple[Callable[[LongDocConfig], float], str, dict[str, Any]]:
    """(objective, metric, data description): a synthetic folder's mean Acc@1, else nDCG@10 on a BEIR split."""
    from lengthwise.longdoc import LongEncoder
    from lengthwise.longdoc._cache import WindowCache
    from lengthwise.longdoc.synthetic import META_FILE, read_synthetic

    cache = WindowCache(2**30)  # one for every candidate: a window pooled or scored another way is embedded once
    if (data / META_FILE).is_file():
        from lengthwise.longdoc.scoring import evaluate_synthetic

        synthetic = read_synthetic(data)

        def accuracy(config: LongDocConfig) -> float:
            return evaluate_synthetic(LongEncoder(model, config, cache=cache), synthetic, batch_size=batch_size).mean

        return accuracy, "mean acc@1", synthetic.meta
    from lengthwise.evaluation.data import read_beir
    from lengthwise.evaluation.retrieval import evaluate_retrieval

    beir = read_beir(data, split)

    def ndcg(config: LongDocConfig) -> float:
        return evaluate_retrieval(LongEncoder(model, config, cache=cache), beir, batch_size=batch_size).scores[
            "ndcg@10"
        ]

    return ndcg, "ndcg@10", dict(beir.describe())


def tune_long_documents(
    data: str | os.PathLike[str],
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    strategies: Sequence[str] = ("chunk-mean", "chunk-weighted", "multi-vector", "late-chunking"),
    windows: Sequence[int] = (64, 128, 256),
    overlaps: Sequence[float] = (0.0, 0.5),
    top_k: int | Sequence[int] = 1,
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
    """`lengthwise longdoc tune` as one call: choose strategy, window and stride on a dev split.

    Args:
        data: A BEIR folder (tuned on `split`, nDCG@10) or a folder written by `lengthwise longdoc synth`
            (mean Acc@1).
        model: A model folder, an installed model package's name or a Hugging Face id.
        strategies, windows, overlaps, top_k, scales, fuse_means: The candidates
            (`lengthwise.longdoc.tune.candidates`; the last three apply to multi-vector); truncation at the model's
            own window is always scored as the baseline. One window cache serves every candidate.
        out: Where ``tune.json`` and ``tune.png`` are written as one set (checked before any compute); None
            writes nothing.
        save: Also save the model with the best choice here; `lengthwise.load_model` then picks it up.
        batch_size, device, precision: Windows per forward pass; the torch device; fp32 or int8 (CPU).
        on_eval: Called with (config, score) after each candidate.

    Returns:
        The tuning result and the record written to ``tune.json``.
    """
    import io

    from lengthwise.core.models import model_fingerprint
    from lengthwise.core.output_set import check_model_target, check_output_target, write_output_set
    from lengthwise.core.results import json_bytes, provenance
    from lengthwise.facade import load_model
    from lengthwise.longdoc.tune import candidates, plot_long_tune, tune_long

    started = time.perf_counter()
    out = None if out is None else Path(out)
    if out is not None:
        check_output_target(out, TUNE_FILES, what="a long-document tuning")  # before the model loads
    if save is not None:
        try:
            check_model_target(Path(save), beside=[out] if out is not None else [])
        except ValueError as error:
            raise SettingError("save", str(save), str(error).removeprefix(f"{save}: ")) from None
    configs = candidates(list(strategies), list(windows), list(overlaps), top_k=top_k, scales=scales,
                         fuse_means=fuse_means)  # fmt: skip
    loaded = load_model(model, device=device, precision=precision)
    objective, metric, described = _long_objective(Path(data), split, loaded, batch_size)
    result = tune_long(objective, configs, on_eval=on_eval)
    if save is not None:
        from lengthwise.longdoc.persist import save_longdoc

        save_longdoc(loaded, result.best, Path(save))
    settings = {"strategies": ",".join(strategies), "windows": ",".join(map(str, windows)),
                "overlaps": ",".join(f"{x:g}" for x in overlaps), "split": split,
                "top_k": top_k if isinstance(top_k, int) else list(top_k),
                "scales": [list(s) for s in scales], "fuse_means": list(fuse_means)}  # fmt: skip
    record = {
        "metric": metric,
        "result": result.to_dict(),
        "provenance": provenance(model_fingerprint(loaded, model), described, settings, started=started),
    }
    if out is not None:
        figure = io.BytesIO()
        plot_long_tune(result, metric).savefig(figure, format="png", dpi=120)
        write_output_set(out, {"tune.json": json_bytes(record), "tune.png": figure.getvalue()}, TUNE_FILES,
                         what="a long-document tuning")  # fmt: skip
    return result, record


def tune_hybrid(
    index: str | os.PathLike[str] | LongIndex,
    data: str | os.PathLike[str],
    *,
    split: str = "dev",
    weights: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    save: bool = True,
    on_eval: Callable[[str, float], None] | None = None,
) -> dict[str, Any]:
    """`lengthwise index tune`: choose an index's search mode and fusion on a BEIR dev split (nDCG@10 through the
    index) and record them in it, so that `LongIndex.search` and `lengthwise search` use them by default.

    The arms are dense, lexical, RRF and convex fusion at each of `weights`. A fusion becomes the mode only if its
    nDCG@10 is above both sides'; ties go to the lower weight. The corpus of `data` must be the index's (same ids).

    Args:
        index: The index (folder or `LongIndex`); it must hold its documents' text.
        data: A BEIR folder with a `split` qrels file.
        split: The split tuned on (never the one reported).
        weights: The lexical weights of the convex fusion tried.
        save: Record the choice in the index.
        on_eval: Called with (arm, nDCG@10) after each arm.

    Returns:
        ``{"split", "scores": {arm: nDCG@10}, "mode", "fusion"}``.
    """
    from lengthwise.evaluation.config import RetrievalConfig
    from lengthwise.evaluation.data import read_beir
    from lengthwise.evaluation.retrieval import trec_scores
    from lengthwise.longdoc.hybrid import Fusion, FusionSettings, HybridSearch, Mode

    opened = index if isinstance(index, LongIndex) else LongIndex.open(index)
    if opened.lexical is None:
        raise SettingError("index", str(opened.windows.folder), "holds no text to tune a fusion on; build it again "
                           "with the corpus")  # fmt: skip
    corpus = read_beir(Path(data), split)
    if set(corpus.doc_ids) != set(opened.windows.doc_ids):
        raise SettingError("data", str(data), "holds other documents than the index; tune on the indexed corpus")
    asked = [(q, t) for q, t in zip(corpus.query_ids, corpus.query_texts, strict=True) if q in corpus.qrels]
    texts = [t for _, t in asked]
    vectors = opened.embed_queries(texts)
    arms: dict[str, tuple[Mode, FusionSettings]] = {"dense": (Mode.DENSE, FusionSettings()),
                                                    "lexical": (Mode.LEXICAL, FusionSettings()),
                                                    "rrf": (Mode.HYBRID, FusionSettings(Fusion.RRF))}  # fmt: skip
    arms.update({f"convex-{w:g}": (Mode.HYBRID, FusionSettings(Fusion.CONVEX, float(w))) for w in weights})
    scores = {}
    for name, (mode, fusion) in arms.items():
        found = HybridSearch(opened.windows, opened.lexical, opened.scoring, fusion).search(vectors, texts, 10, mode)
        run = {q: {hit.id: hit.score for hit in hits} for (q, _), hits in zip(asked, found, strict=True)}
        per_query = trec_scores({q: corpus.qrels[q] for q in run}, run, RetrievalConfig())
        scores[name] = round(100 * sum(r["ndcg@10"] for r in per_query.values()) / len(asked), 4)  # none found: 0
        if on_eval is not None:
            on_eval(name, scores[name])
    best = max(arms, key=lambda name: (scores[name], -list(arms).index(name)))
    if arms[best][0] is Mode.HYBRID and scores[best] <= max(scores["dense"], scores["lexical"]):
        best = "dense" if scores["dense"] >= scores["lexical"] else "lexical"
    mode, fusion = arms[best]
    if save:
        opened.lexical.record(mode=mode.value, fusion=fusion.to_dict(), tuned={"data": str(data), "split": split})
    return {"split": split, "scores": scores, "mode": mode.value, "fusion": fusion.to_dict()}


def haystack_files(haystack: Path) -> list[Path]:
    """The haystack's text files: the file itself, or a folder's ``*.txt`` and ``*.txt.gz`` in name order."""
    if haystack.is_dir():
        files = sorted(p for p in haystack.iterdir() if p.is_file() and p.name.endswith((".txt", ".txt.gz")))
        if not files:
            raise SettingError("haystack", str(haystack), "the folder holds no .txt or .txt.gz file; pass prose")
        return files
    if not haystack.is_file():
        raise SettingError("haystack", str(haystack), "no such file or folder; pass prose, one paragraph per line")
    return [haystack]


def synthesize(
    task: str,
    haystack: str | os.PathLike[str],
    out: str | os.PathLike[str],
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    style: str = "realistic",
    lengths: Sequence[int] = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768),
    per_length: int = 50,
    seed: int = 0,
) -> SyntheticSet:
    """`lengthwise longdoc synth` as one call: write a seeded passkey or needle task as a BEIR folder.

    Args:
        task: ``passkey`` or ``needle``.
        haystack: A text file (plain or .gz) of natural prose, one paragraph (or sentence) per line, or a folder of
            such ``*.txt`` / ``*.txt.gz`` files (read in name order), e.g. the repository's ``data/essays``.
        style: ``realistic`` (each document its own prose, needles about names the haystack mentions, paraphrased
            queries) or ``simple`` (LongEmbed's layout); see `lengthwise.longdoc.synthetic`.
        out: The folder to write (new, empty, or one this wrote earlier).
        model: The model whose tokenizer measures the lengths (only the tokenizer is loaded).
        lengths, per_length, seed: Document lengths in tokens, documents per length, the seed.
    """
    from transformers import AutoTokenizer

    from lengthwise.core._textio import open_text
    from lengthwise.core.models import resolve_model_path
    from lengthwise.longdoc.config import LongDocError
    from lengthwise.longdoc.synthetic import check_target, make_synthetic, write_synthetic

    haystack = Path(haystack)
    files = haystack_files(haystack)
    sentences: list[str] = []
    for file in files:
        with open_text(file) as handle:
            sentences.extend(line for _, line in handle.lines())
    if not any(sentence.strip() for sentence in sentences):
        raise SettingError("haystack", str(haystack), "holds no text; pass prose, one paragraph per line")
    check_target(Path(out))  # before any work: a folder of the user's own files is refused first
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(model))
    try:
        data = make_synthetic(
            task,  # type: ignore[arg-type]  # checked inside: a bad task or style is a LongDocError naming it
            sentences,
            tokenizer,
            style=style,  # type: ignore[arg-type]
            lengths=lengths,
            per_length=per_length,
            seed=seed,
        )
    except LongDocError as err:
        if err.field != "haystack":
            raise
        raise LongDocError(err.problem, field="haystack", value=str(haystack)) from None  # name the file, not its size
    write_synthetic(data, Path(out))
    return data


def score_long_task(
    data: str | os.PathLike[str],
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    long: str | LongDocConfig = "default",
    out: str | os.PathLike[str] | None = None,
    batch_size: int = 32,
    device: str | None = None,
    precision: str = "fp32",
    show_progress: bool = False,
) -> tuple[Any, dict[str, Any]]:
    """`lengthwise longdoc eval` as one call: score a synthetic task LongEmbed-style (Acc@1 per length group).

    Returns the `SyntheticResult` and the record written to ``out/results.json`` (None writes nothing).
    """
    from lengthwise.core.models import model_fingerprint
    from lengthwise.core.results import provenance, write_json_atomic
    from lengthwise.facade import load_model
    from lengthwise.longdoc import LongDocConfig, LongEncoder
    from lengthwise.longdoc.scoring import evaluate_synthetic
    from lengthwise.longdoc.synthetic import read_synthetic

    started = time.perf_counter()
    config = long if isinstance(long, LongDocConfig) else LongDocConfig.named(long)
    if batch_size < 1:
        raise SettingError("batch_size", batch_size, "must be ≥ 1")
    if out is not None:
        _check_out(Path(out), _writable_folder)  # before the model loads
    dataset = read_synthetic(Path(data))
    loaded = load_model(model, device=device, precision=precision)
    result = evaluate_synthetic(LongEncoder(loaded, config), dataset, batch_size=batch_size,
                                show_progress=show_progress)  # fmt: skip
    made = provenance(model_fingerprint(loaded, model), dataset.meta, {"long": config.to_dict()}, started=started)
    record = {"result": result.to_dict(), "provenance": made}
    if out is not None:
        write_json_atomic(Path(out) / "results.json", record)
    return result, record


def _encode_worker(model: str, device: str | None, config: LongDocConfig, data: Path, out: Path, job: dict) -> int:
    """Encode one worker's share (documents ``k, k + n, …``), in a spawned process or in this one."""
    from transformers.utils import logging as hf_logging

    from lengthwise.facade import load_model
    from lengthwise.longdoc import LongEncoder
    from lengthwise.longdoc.store import EmbeddingStore, encode_corpus

    hf_logging.disable_progress_bar()
    if job["threads"]:
        import torch

        torch.set_num_threads(job["threads"])
    encoder = LongEncoder(load_model(model, device=device, precision=job["precision"]), config)
    store = EmbeddingStore(out, job["settings"])
    return encode_corpus(encoder, data, store, shard_docs=job["shard_docs"], batch_size=job["batch_size"],
                         worker=(job["index"], job["count"]), show_progress=job["progress"],
                         repair=False, parquet=job["parquet"])  # fmt: skip


def encode(
    data: str | os.PathLike[str],
    out: str | os.PathLike[str],
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    long: str | LongDocConfig = "default",
    devices: Sequence[str | None] = (None,),
    shard_docs: int = 1000,
    batch_size: int = 32,
    threads: int | None = None,
    precision: str = "fp32",
    engine: str = "local",
    address: str | None = None,
    workers: int | None = None,
    format: str | None = None,
    show_progress: bool = False,
    on_note: Callable[[str], None] | None = None,
) -> int:
    """`lengthwise encode` as one call: embed a corpus into `out` as resumable, checked shards.

    Args:
        data: ``corpus.jsonl`` (``_id``, ``text``, ``title``), a BEIR folder holding one, or a ``.txt`` file, one
            document per line. Read once
            before any compute: a row without text or a repeated id stops the run, naming the file and the line.
        out: The shard folder; an existing one made with the same settings is resumed, and a damaged or unfinished
            shard in it is removed and its documents embedded again (`on_note` is told).
        model: A model folder, an installed model package's name or a Hugging Face id.
        long: The long-document strategy (name or `LongDocConfig`).
        devices: One process per entry (None = the best device), each taking documents k, k + n, … by position.
        shard_docs, batch_size, threads: Documents per shard, windows per forward pass, torch threads per process.
        precision: fp32, or int8 Linear layers on the CPU (recorded in the folder's settings).
        engine: ``"local"`` (this process, or one per entry of `devices`) or ``"ray"``: the same encoder as a Ray
            Data actor pool (`lengthwise.longdoc._raydata`; the ``lengthwise[ray]`` extra), one actor per GPU, else
            `workers` CPU actors. A folder keeps the engine that made it.
        address: The Ray cluster to join (``ray.init(address)``); None: the one this process runs, else a new
            local one.
        workers: CPU actors for the Ray engine (default: one per 4 CPUs of the cluster; ignored with GPUs).
        format: ``"npy"`` (the shards) or ``"parquet"`` (the shards and one Parquet row per window under
            ``out/parquet``: doc_id, window, start, end, vector; `lengthwise.longdoc._parquet`). None: npy locally,
            parquet on Ray. The shards are always written: resuming and `LongIndex.build` read them. A folder keeps
            its format.
        show_progress: A progress bar (one process only).

    Returns:
        The number of documents embedded by this call.
    """
    from lengthwise.core.quantize import Precision
    from lengthwise.longdoc import LongDocConfig, LongDocError
    from lengthwise.longdoc.store import EmbeddingStore, corpus_digests

    config = long if isinstance(long, LongDocConfig) else LongDocConfig.named(long)
    _check_engine(engine, devices, workers, address)
    parquet = _check_format(format, engine)
    precision = Precision.parse(precision).value  # "INT8" is int8: the folder records one spelling
    for name, value in (("shard_docs", shard_docs), ("batch_size", batch_size), ("threads", threads)):
        if value is not None and value < 1:
            raise SettingError(name, value, "must be ≥ 1")
    if not devices:
        raise SettingError("devices", list(devices), "name at least one device, e.g. cpu or cuda:0,cuda:1")
    data, out = _corpus_file(Path(data)), Path(out)
    digests = corpus_digests(data)  # every text and id before any compute
    if not digests:
        raise LongDocError(f"{data}: holds no documents; pass a corpus.jsonl with one _id and text per line")
    settings = {"model": str(model), "data": str(data.resolve()), "long": config.to_dict(), "workers": len(devices),
                "precision": precision}  # fmt: skip
    if parquet != (engine == "ray"):  # recorded only when not the engine's default, so older folders still resume
        settings["format"] = "parquet" if parquet else "npy"
    if engine == "ray":  # the actor count does not change the vectors; the engine decides the files (Parquet)
        from lengthwise.facade import load_model
        from lengthwise.longdoc._raydata import encode_on_ray

        settings = {**{k: v for k, v in settings.items() if k != "workers"}, "engine": "ray"}
        job = {"model": str(model), "precision": precision, "threads": threads, "shard_docs": shard_docs,
               "batch_size": batch_size, "parquet": parquet}  # fmt: skip
        store = EmbeddingStore(out, settings)
        written = encode_on_ray(load_model, data, store, config, job, address=address, workers=workers,
                                show_progress=show_progress, on_note=on_note, corpus=digests)  # fmt: skip
        store.finish()
        return written
    store = EmbeddingStore(out, settings)  # checks the folder; the manifest is written with the first shard
    for line in store.repair(digests)[1]:
        if on_note is not None:
            on_note(line)
    jobs = [
        {"index": k, "count": len(devices), "settings": settings, "shard_docs": shard_docs, "batch_size": batch_size,
         "threads": threads, "progress": show_progress and len(devices) == 1, "precision": precision,
         "parquet": parquet}
        for k in range(len(devices))
    ]  # fmt: skip
    if len(devices) == 1:
        written = _encode_worker(str(model), devices[0], config, data, out, jobs[0])
    else:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(len(devices)) as pool:
            args = [(str(model), device, config, data, out, job) for device, job in zip(devices, jobs, strict=True)]
            written = sum(pool.starmap(_encode_worker, args))
    store.finish()  # the digest of the texts embedded: an index built from the folder carries it
    return written


def _corpus_file(data: Path) -> Path:
    """A corpus file as given, or the ``corpus.jsonl`` of a BEIR folder."""
    from lengthwise.longdoc import LongDocError

    if not data.is_dir():
        return data
    for name in ("corpus.jsonl", "corpus.jsonl.gz"):
        if (data / name).is_file():
            return data / name
    raise LongDocError(f"{data}: a folder without corpus.jsonl; pass a corpus.jsonl, a BEIR folder or a .txt file")


def _check_format(format: str | None, engine: str) -> bool:
    """`encode`'s ``format``, checked before any compute: True when the Parquet window rows are written (pyarrow
    must then be installed)."""
    from lengthwise.longdoc._parquet import FORMATS, require_pyarrow

    if format is not None and format not in FORMATS:
        raise SettingError("format", format, "use npy (the shards) or parquet (the shards and their window rows)")
    parquet = format == "parquet" if format is not None else engine == "ray"
    if parquet:
        require_pyarrow()
    return parquet


def _check_engine(engine: str, devices: Sequence[str | None], workers: int | None, address: str | None = None) -> None:
    """`encode`'s engine settings, checked before anything is read: Ray must be installed for ``"ray"``, and a
    cluster `address` must answer."""
    if engine not in ("local", "ray"):
        raise SettingError("engine", engine, "use local (this machine) or ray (a Ray cluster)")
    if engine == "local":
        if workers is not None:
            raise SettingError("workers", workers, "is for --engine ray; the local engine takes --devices")
        if address is not None:
            raise SettingError("address", address, "is for --engine ray; the local engine runs on this machine")
        return
    if tuple(devices) != (None,):
        raise SettingError("devices", list(devices), "is for --engine local; Ray places one actor per GPU")
    if workers is not None and workers < 1:
        raise SettingError("workers", workers, "must be ≥ 1")
    from lengthwise.longdoc._raydata import check_address, require_ray

    require_ray()
    if address is not None:
        check_address(address)


class LongIndex:
    """Document search over the window vectors `lengthwise encode` wrote, on a real ANN engine, with queries
    embedded by the settings recorded in the index (model, long-document strategy, precision; a TempScale saved
    with the model is applied by `lengthwise.load_model`).

    Example:
        >>> LongIndex.build("out/encoded", "out/index", quantize="int8")   # = lengthwise index build …
        >>> hits = LongIndex.open("out/index").search(["who wrote the report?"], k=10)
    """

    def __init__(self, windows: Any, model: SentenceTransformer | None = None) -> None:
        from lengthwise.longdoc.index import WindowIndex

        self.windows: WindowIndex = windows
        self._model = model
        if model is not None:
            self._check_model(model)

    @classmethod
    def build(
        cls,
        encoded: str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        quantize: str = "int8",
        engine: str = "usearch",
        text: str | os.PathLike[str] | None = None,
        granularity: str = "document",
        on_progress: Callable[[int, int], None] | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> LongIndex:
        """`lengthwise index build`: index `encoded` into `out`, recording the query model's fingerprint, and the
        documents' text beside it for lexical and hybrid search (`lengthwise.longdoc.lexical`).

        Args:
            encoded: A folder written by `lengthwise encode`.
            out: The index folder.
            quantize, engine: The dense side's candidate vectors and ANN engine (`WindowIndex.build`).
            text: The corpus the folder was encoded from (default: the path `encode` recorded); checked against
                the encoded ids and text digests before anything is built. Without it, and with the recorded file
                gone, the index is dense only (`on_note` says so).
            granularity: What BM25 ranks: ``document`` (whole documents) or ``window`` (the dense windows).
            on_progress: Called with (windows added, windows) as the engine is filled.
            on_note: Told, in one line, when the index is built without text.
        """
        from lengthwise.core.models import model_fingerprint
        from lengthwise.longdoc.index import WindowIndex
        from lengthwise.longdoc.lexical import check_corpus_digest
        from lengthwise.longdoc.store import TEXTS

        made = WindowIndex.check_build(encoded, out, quantize=quantize, engine=engine)["settings"]  # before the model
        corpus = check_corpus_digest(text, made.get("data"), made.get(TEXTS), granularity)  # before any model load
        model = cls._load(made)
        fingerprint = model_fingerprint(model, made["model"])
        name = str(Path(made["model"]).resolve()) if Path(made["model"]).is_dir() else made["model"]  # any cwd
        extra = {"model": {"name": name, "weights_sha256_16": fingerprint["weights_sha256_16"]},
                 "encode_settings": {**made, "model": name}}  # fmt: skip
        windows = WindowIndex.build(
            encoded, out, quantize=quantize, engine=engine, extra=extra, on_progress=on_progress
        )
        index = cls(windows, model)
        if corpus is None:
            if on_note is not None:
                on_note(f"built without text ({made.get('data')} is gone): dense search only; pass the corpus as "
                        "text to search it lexically")  # fmt: skip
            return index
        index._build_text(corpus, made, granularity, on_progress)
        return index

    def _build_text(
        self, corpus: Path, made: dict[str, Any], granularity: str, on_progress: Callable[[int, int], None] | None
    ) -> None:
        from lengthwise.longdoc import LongDocConfig, LongEncoder
        from lengthwise.longdoc.lexical import build_text_side
        from lengthwise.longdoc.store import TEXTS

        assert self._model is not None
        encoder = LongEncoder(self._model, LongDocConfig.from_dict(made["long"]))
        build_text_side(self.windows, encoder, corpus, recorded=made.get(TEXTS), granularity=granularity,
                        on_progress=on_progress)  # fmt: skip

    @classmethod
    def open(
        cls, folder: str | os.PathLike[str], *, model: SentenceTransformer | str | os.PathLike[str] | None = None
    ) -> LongIndex:
        """Open an index; `model` (optional, else loaded from the recorded name on first search: a loaded model, or
        a folder / package / hub id to load in its place, e.g. when the recorded path moved) must be the one the
        index was built with, checked by its weight hash."""
        from lengthwise.longdoc.index import WindowIndex

        windows = WindowIndex.open(folder)
        if isinstance(model, (str, os.PathLike)):
            model = cls._load({**windows.settings["encode_settings"], "model": str(model)})
        return cls(windows, model)

    @staticmethod
    def _load(made: dict[str, Any]) -> SentenceTransformer:
        from lengthwise.facade import load_model

        return load_model(made["model"], precision=made.get("precision", "fp32"))

    def _check_model(self, model: SentenceTransformer) -> None:
        from lengthwise.core.models import model_fingerprint

        recorded = self.windows.settings["model"]
        found = model_fingerprint(model, recorded["name"])["weights_sha256_16"]
        if found != recorded["weights_sha256_16"]:
            raise SettingError(
                "model", recorded["name"], f"the index was built with weights {recorded['weights_sha256_16']}, "
                f"this model has {found}; query with the model the corpus was encoded with, or build the index again"
            )  # fmt: skip

    def embed_queries(self, queries: Sequence[str], batch_size: int = 32) -> Any:
        """The queries as the index's documents were made: the recorded model and long-document settings."""
        from lengthwise.longdoc import LongDocConfig, LongEncoder

        made = self.windows.settings["encode_settings"]
        if self._model is None:
            self._model = self._load(made)
            self._check_model(self._model)
        encoder = LongEncoder(self._model, LongDocConfig.from_dict(made["long"]))
        return encoder.encode_queries(list(queries), batch_size=batch_size)

    @property
    def lexical(self) -> Any:
        """The index's lexical side (`lengthwise.longdoc.lexical.LexicalIndex`), or None when built without text."""
        from lengthwise.longdoc.lexical import LEXICAL, SETTINGS_FILE, LexicalIndex

        if not hasattr(self, "_lexical"):
            folder = Path(self.windows.folder) / LEXICAL
            self._lexical = LexicalIndex.open(folder) if (folder / SETTINGS_FILE).is_file() else None
        return self._lexical

    def search(
        self,
        queries: str | Sequence[str],
        k: int = 10,
        *,
        mode: str | None = None,
        passages: int = 0,
        windows: int | None = None,
        probes: int | None = None,
    ) -> list[list[Hit]]:
        """The `k` best documents for each query, best first, as `Hit`s (id, score, each side's exact score, and the
        `passages` best windows of each with their character spans and text).

        Args:
            queries: One query or several.
            k: Documents per query.
            mode: ``dense`` (the window vectors), ``lexical`` (BM25) or ``hybrid`` (both, fused by the settings
                recorded in the index); default: the index's recorded mode (hybrid when it holds text).
            passages: Best windows returned with each hit (0: none).
            windows, probes: The dense side's candidate windows and probes (`WindowIndex.search_vectors`).
        """
        from lengthwise.longdoc.hybrid import HybridSearch, Mode

        texts = [queries] if isinstance(queries, str) else list(queries)
        for name, value in (("k", k), ("windows", windows), ("probes", probes)):
            if value is not None and value < 1:
                raise SettingError(name, value, "must be ≥ 1")
        if passages < 0:
            raise SettingError("passages", passages, "must be ≥ 0")
        if not texts or any(not text.strip() for text in texts):
            raise SettingError("query", queries, "a query is empty; give the text to search for")
        chosen = self._mode(mode)
        if chosen is Mode.LEXICAL:
            for text in texts:
                if not self.lexical.query_tokens(text):
                    raise SettingError("query", text, "holds no word the documents hold (stop words only, or "
                                       "unknown words): nothing to search lexically; use dense or hybrid")  # fmt: skip
        vectors = None if chosen is Mode.LEXICAL else self.embed_queries(texts)
        searcher = HybridSearch(self.windows, self.lexical, self.scoring, self.fusion)
        return searcher.search(vectors, texts, k, chosen, passages=passages, windows=windows, probes=probes)

    @property
    def fusion(self) -> Any:
        """The hybrid fusion settings recorded in the index (`FusionSettings`; the defaults before any tuning)."""
        from lengthwise.longdoc.hybrid import FusionSettings

        recorded = self.lexical.settings.get("fusion") if self.lexical is not None else None
        return FusionSettings.from_dict(recorded) if recorded else FusionSettings()

    def _mode(self, mode: str | None) -> Any:
        from lengthwise.longdoc.hybrid import Mode

        if mode is None:
            recorded = self.lexical.settings.get("mode") if self.lexical is not None else None
            return Mode(recorded) if recorded else (Mode.HYBRID if self.lexical is not None else Mode.DENSE)
        try:
            chosen = Mode(mode)
        except ValueError:
            raise SettingError("mode", mode, "use dense, lexical or hybrid") from None
        if chosen is not Mode.DENSE and self.lexical is None:
            raise SettingError("mode", mode, f"{self.windows.folder} was built without its documents' text; build it "
                               "again with the corpus, or search dense")  # fmt: skip
        return chosen

    @property
    def scoring(self) -> WindowScoring:
        """How a document scores from its windows, as it was encoded (max or top-k mean, fused with the mean)."""
        from lengthwise.longdoc import LongDocConfig

        return LongDocConfig.from_dict(self.windows.settings["encode_settings"]["long"]).scoring
