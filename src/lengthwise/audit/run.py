"""The whole `lengthwise audit` pipeline as one library call: read and check the inputs, run the attack and the
document diagnostics, and write the output set (``audit.json``, plots, ``report.html``) as one unit.

    job = AuditJob(out=Path("out"), pairs=Path("sts.tsv"))
    inputs = read_inputs(job)            # every text checked before any model work
    check_output(job.out)                # before computing: an unwritable --out costs nothing
    payload = run_full_audit(model, job, inputs, model_name="all-MiniLM-L6-v2")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentence_transformers import SentenceTransformer

from lengthwise.audit.config import AuditJob
from lengthwise.audit.documents.corpus import DocSet, read_docs
from lengthwise.audit.documents.documents import run_doc_audit
from lengthwise.audit.pairs.attack import run_audit
from lengthwise.audit.report.page import OUTPUT_NAMES, report_files
from lengthwise.audit.retrieval.config import RetrievalRequest
from lengthwise.audit.schema import AuditPayload, check_payload
from lengthwise.core.data import PairSet, default_probe_pairs, read_pairs
from lengthwise.core.output_set import InterruptGuard, check_output_target, write_output_set

__all__ = ["AuditInputs", "check_output", "read_inputs", "run_full_audit"]

Progress = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass(frozen=True)
class AuditInputs:
    """The checked inputs of one audit: the pairs (sampled) and the documents (sampled), or None."""

    pairs: PairSet
    docs: DocSet | None


def read_inputs(job: AuditJob) -> AuditInputs:
    """Read and check every pair text and document before any model work (`DataFormatError` names the line)."""
    seed = job.attack.seed
    pairs = read_pairs(job.pairs, max_pairs=job.max_pairs or 2000, seed=seed) if job.pairs else default_probe_pairs()
    if job.max_pairs is not None:
        pairs = pairs.sample(job.max_pairs, seed)
    docs = read_docs(job.docs, max_docs=job.max_docs, seed=seed) if job.docs is not None else None
    return AuditInputs(pairs, docs)


def check_output(out: Path) -> None:
    """A `SettingError` on ``out`` unless `out` can take an audit's output set (see `lengthwise.core.output_set`)."""
    check_output_target(Path(out), OUTPUT_NAMES, what="an audit", field="out")


def run_full_audit(
    model: SentenceTransformer,
    job: AuditJob,
    inputs: AuditInputs,
    *,
    model_name: str | None = None,
    on_progress: Progress | None = None,
    retrieval: RetrievalRequest | None = None,
) -> AuditPayload:
    """Run the attack (the document diagnostics when `job.diagnostics` is set, the retrieval length-bias audit
    when `retrieval` is given) and write the output set into
    `job.out` at once; return the payload written as ``audit.json``.

    A Ctrl-C stops the run and leaves the earlier output set as it was; it is never swallowed.
    """
    check_output(job.out)
    with InterruptGuard() as guard:

        def report(stage: str, done: int, total: int) -> None:
            guard.check()
            if on_progress is not None:
                on_progress(stage, done, total)

        pairs_stage = f"embedding {len(inputs.pairs)} pairs"
        result = run_audit(
            model,
            inputs.pairs,
            job.attack,
            model_name=model_name,
            on_progress=lambda done, total: report(pairs_stage, done, total),
        )
        payload = result.to_dict()
        if job.diagnostics is not None:
            section = run_doc_audit(
                model, inputs.docs, job.diagnostics, on_progress=lambda s, d, t: report(f"diagnostics: {s}", d, t)
            )
            payload["diagnostics"] = section  # type: ignore[typeddict-item]
        if retrieval is not None:
            payload["retrieval_bias"] = _retrieval_bias(model, retrieval, report)
        check_payload(payload, "the audit")  # what is written can be read back
        guard.check()
        write_output_set(job.out, dict(report_files(payload).values()), OUTPUT_NAMES, what="an audit")
    return payload


def _retrieval_bias(model: SentenceTransformer, request: RetrievalRequest, report: Progress) -> Any:
    """The ``retrieval_bias`` section (METHODS §6) for `request`, with the model itself as the default encoder."""
    from lengthwise.audit.retrieval.natural import audit_retrieval
    from lengthwise.core.embed import TokenView
    from lengthwise.core.encoder import as_encoder

    return audit_retrieval(
        request.encoder or as_encoder(model),
        request.data,
        TokenView(model),
        request.config,
        encoder_note=request.encoder_note,
        on_progress=lambda stage, done, total: report(f"retrieval: {stage}", done, total),
        lexical=request.lexical,
    )
