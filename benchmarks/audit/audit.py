#!/usr/bin/env python
"""Benchmark: `lengthwise audit` wall time against plain `SentenceTransformer.encode` of the same tokens.

The audit embeds a deduplicated set of token sequences (originals, elongated `f(S, m)`, first-k prefixes,
word-shuffled side A). The baseline is `model.encode(strings, batch_size=B)` over strings built so that
ST tokenizes each one to the same length as one of those sequences; the token totals of both sides are
checked and reported. Audit and encode runs alternate (A B A B ...) after one untimed warm-up of each (on
the first --warmup-pairs pairs), and the result is ratio = median(audit) / median(encode) in wall time,
measured in one process, next to the same ratio in process CPU time. Target: ratio ≤ 1.3.

    python -m benchmarks.audit.audit                      # STS-B test sample + the embedded probe set
    python -m benchmarks.audit.audit --repeats 3 --out /tmp/bench.json
    python -m benchmarks.audit.audit --profile            # cProfile one audit per workload instead

Model loading is never timed. The "cli" column adds what `lengthwise audit` does after `run_audit`
(`to_dict`, write audit.json, `lengthwise.report.write_report`) to each timed audit run; it is skipped
when `lengthwise.audit.report.page` cannot be imported.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT_PAIRS = REPO.parent / "shared" / "data" / "stsb" / "original" / "sts-test.csv.gz"
DEFAULT_OUT = REPO / "docs" / "results" / "bench_audit.json"
TARGET_RATIO = 1.3

# Before importing torch/transformers: the default model comes from the packaged copy, no hub round trip.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

from benchmarks._measure import command_line  # noqa: E402
from lengthwise.audit.config import AuditConfig  # noqa: E402
from lengthwise.audit.pairs.attack import AuditResult, run_audit  # noqa: E402
from lengthwise.core.data import PairSet, default_probe_pairs, read_pairs  # noqa: E402
from lengthwise.core.defaults import DEFAULT_MODEL  # noqa: E402
from lengthwise.core.embed import TokenView  # noqa: E402
from lengthwise.core.models import load_plain_model  # noqa: E402
from lengthwise.core.results import environment, write_json_atomic  # noqa: E402
from lengthwise.core.tokens import elongate, elongation_factor, first_k, shuffle_words  # noqa: E402

try:
    from lengthwise.audit.report.page import write_report
except ImportError:  # the report module is optional for this benchmark
    write_report = None  # type: ignore[assignment]


# ------------------------------------------------------------------------------------------- baseline inputs


@dataclass(frozen=True)
class Baseline:
    """The audit's distinct sequences and, for each, a string ST tokenizes to the same length."""

    sequences: list[tuple[int, ...]]
    texts: list[str]
    text_tokens: list[int]  # ST's token count (special tokens included, truncated to N) of each text

    @property
    def sequence_tokens(self) -> int:
        return sum(len(s) for s in self.sequences)

    def agreement(self) -> dict[str, Any]:
        diffs = [t - len(s) for t, s in zip(self.text_tokens, self.sequences, strict=True)]
        total = sum(self.text_tokens)
        return {
            "audit_tokens": self.sequence_tokens,
            "encode_tokens": total,
            "relative_difference": round(total / self.sequence_tokens - 1.0, 5),
            "sequences_with_other_length": sum(d != 0 for d in diffs),
            "max_abs_length_difference": max(abs(d) for d in diffs),
        }


def baseline_inputs(
    model: SentenceTransformer, pairs: PairSet, config: AuditConfig, *, count_tokens: bool = True
) -> Baseline:
    """Rebuild `run_audit`'s sequence bank (same order, same dedup) and a same-length string for each entry.

    Strings: the text itself for originals; the text repeated m times with spaces for `f(S, m)`; the decoded
    first-k ids for prefixes; the shuffled text for the word-shuffle probe. Under `config.first_k` every
    base text is the decoded truncated ids instead.
    """
    rng = random.Random(config.seed)
    view = TokenView(model)
    tokenizer = view.tokenizer
    max_content = view.max_content
    if config.first_k is not None:
        max_content = min(max_content, config.first_k - view.specials.count)
    texts1 = [p.text1 for p in pairs.pairs]
    texts2 = [p.text2 for p in pairs.pairs]
    ids1 = [ids[:max_content] for ids in view.content(texts1)]
    ids2 = [ids[:max_content] for ids in view.content(texts2)]
    factors1 = [elongation_factor(len(ids), view.max_content, config.elongation, rng) for ids in ids1]
    factors2 = [elongation_factor(len(ids), view.max_content, config.elongation, rng) for ids in ids2]

    bank: dict[tuple[int, ...], Callable[[], str]] = {}

    def add(content: Sequence[int], make_text: Callable[[], str]) -> None:
        bank.setdefault(tuple(view.wrap(content)), make_text)

    def base(text: str, ids: list[int]) -> str:
        return text if config.first_k is None else tokenizer.decode(ids)

    def decoded(ids: list[int]) -> Callable[[], str]:
        return lambda: tokenizer.decode(ids)

    def repeated(text: str, ids: list[int], m: int) -> Callable[[], str]:
        return lambda: " ".join([base(text, ids)] * m)

    for texts, ids_side in ((texts1, ids1), (texts2, ids2)):
        for text, ids in zip(texts, ids_side, strict=True):
            add(ids, repeated(text, ids, 1))
    for texts, ids_side, factors in ((texts1, ids1, factors1), (texts2, ids2, factors2)):
        for text, ids, m in zip(texts, ids_side, factors, strict=True):
            long = elongate(ids, m, view.max_content)
            add(long, repeated(text, ids, max(1, len(long) // len(ids))))
    for k in (k for k in config.curve_ks if k <= view.max_length):
        for ids_side in (ids1, ids2):
            for ids in ids_side:
                prefix = first_k(ids, k - view.specials.count)
                add(prefix, decoded(prefix))
    if config.word_shuffle:
        shuffle_rng = random.Random(config.seed + 1)
        shuffled = [shuffle_words(t, shuffle_rng) for t in texts1]
        for text, ids in zip(shuffled, (ids[:max_content] for ids in view.content(shuffled)), strict=True):
            add(ids, repeated(text, ids, 1))

    sequences = list(bank)
    texts = [make() for make in bank.values()]
    return Baseline(sequences, texts, st_token_counts(model, texts) if count_tokens else [])


def st_token_counts(model: SentenceTransformer, texts: Sequence[str], chunk: int = 64) -> list[int]:
    """How many tokens `model.encode` feeds the model for each text (special tokens in, truncated to N)."""
    preprocess = getattr(model, "preprocess", None) or model.tokenize
    counts: list[int] = []
    for start in range(0, len(texts), chunk):
        features = preprocess(list(texts[start : start + chunk]))
        counts.extend(int(n) for n in features["attention_mask"].sum(dim=1))
    return counts


# ------------------------------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timing:
    """One timed call: wall seconds, this process's CPU seconds (all threads) and the CPU-pressure share.

    `stall` is the share of the wall time in which some runnable task waited for a CPU (Linux PSI,
    /proc/pressure/cpu "some"); well above 0.05 means other work competed for the cores during the run.
    """

    wall: float
    cpu: float
    stall: float | None

    def to_dict(self) -> dict[str, float | None]:
        return {
            "wall": round(self.wall, 4),
            "cpu": round(self.cpu, 4),
            "stall": None if self.stall is None else round(self.stall, 4),
        }


def _cpu_pressure_us() -> int | None:
    try:
        first = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return int(first.rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None


def _timed(fn: Callable[[], Any]) -> tuple[Timing, Any]:
    gc.collect()
    pressure = _cpu_pressure_us()
    cpu = time.process_time()
    start = time.perf_counter()
    value = fn()
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    after = _cpu_pressure_us()
    stall = None if pressure is None or after is None else (after - pressure) / 1e6 / wall
    return Timing(wall, cpu, stall), value


def _post_audit(result: AuditResult, out_dir: Path) -> dict[str, float]:
    """What the CLI does after `run_audit`, timed per step (wall seconds)."""
    steps: dict[str, float] = {}
    start = time.perf_counter()
    payload = result.to_dict()
    steps["to_dict"] = time.perf_counter() - start
    start = time.perf_counter()
    write_json_atomic(out_dir / "audit.json", payload)
    steps["write_json"] = time.perf_counter() - start
    if write_report is not None:
        start = time.perf_counter()
        write_report(payload, out_dir)
        steps["write_report"] = time.perf_counter() - start
    return steps


def _check_bank(result: AuditResult, baseline: Baseline) -> None:
    """The rebuilt sequence bank must be the audit's: same number of sequences and tokens."""
    tokens = result.tokens
    if (tokens["sequences_embedded"], tokens["tokens_embedded"]) != (len(baseline.sequences), baseline.sequence_tokens):
        raise RuntimeError(
            f"rebuilt sequence bank ({len(baseline.sequences)} sequences, {baseline.sequence_tokens} tokens) does "
            f"not match the audit's ({tokens['sequences_embedded']}, {tokens['tokens_embedded']}); "
            "update baseline_inputs() to follow run_audit()"
        )


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def bench_workload(
    name: str,
    model: SentenceTransformer,
    pairs: PairSet,
    config: AuditConfig,
    *,
    repeats: int,
    batch_size: int,
    warmup_pairs: int,
) -> dict[str, Any]:
    baseline = baseline_inputs(model, pairs, config)
    agreement = baseline.agreement()
    print(
        f"[{name}] {len(pairs)} pairs, {len(baseline.sequences)} distinct sequences; tokens audit "
        f"{agreement['audit_tokens']} vs encode {agreement['encode_tokens']} "
        f"({agreement['relative_difference']:+.2%})",
        flush=True,
    )

    def audit() -> AuditResult:
        return run_audit(model, pairs, config)

    def encode() -> Any:
        return model.encode(baseline.texts, batch_size=batch_size, show_progress_bar=False)

    # Warm-up (untimed): one audit and one encode, on the first `warmup_pairs` pairs (0: the whole workload).
    if 0 < warmup_pairs < len(pairs):
        warm_set = PairSet(pairs.pairs[:warmup_pairs], f"{pairs.source} (first {warmup_pairs})", pairs.fmt)
        warm_texts = baseline_inputs(model, warm_set, config, count_tokens=False).texts
    else:
        warm_set, warm_texts = pairs, baseline.texts
    warm_audit, _ = _timed(lambda: run_audit(model, warm_set, config))
    warm_encode, _ = _timed(lambda: model.encode(warm_texts, batch_size=batch_size, show_progress_bar=False))
    print(
        f"[{name}] warm-up on {len(warm_set)} pairs: audit {warm_audit.wall:.2f}s, encode {warm_encode.wall:.2f}s",
        flush=True,
    )

    audits: list[Timing] = []
    encodes: list[Timing] = []
    post: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        for run in range(repeats):  # A B A B ...: slow drifts of the machine hit both sides alike
            timing, result = _timed(audit)
            audits.append(timing)
            post.append(_post_audit(result, Path(tmp)))
            if run == 0:
                _check_bank(result, baseline)
            timing, _ = _timed(encode)
            encodes.append(timing)
            print(
                f"[{name}] run {run + 1}/{repeats}: audit {audits[-1].wall:.2f}s wall / {audits[-1].cpu:.2f}s cpu "
                f"(+{sum(post[-1].values()):.2f}s writing), encode {encodes[-1].wall:.2f}s wall / "
                f"{encodes[-1].cpu:.2f}s cpu; cpu pressure {_stall_text([audits[-1], encodes[-1]])}",
                flush=True,
            )

    with_report = write_report is not None
    cli = [a.wall + sum(p.values()) for a, p in zip(audits, post, strict=True)]
    audit_med, encode_med, cli_med = (
        _median([t.wall for t in audits]),
        _median([t.wall for t in encodes]),
        _median(cli),
    )
    audit_cpu, encode_cpu = _median([t.cpu for t in audits]), _median([t.cpu for t in encodes])
    stalls = [t.stall for t in audits + encodes if t.stall is not None]
    ratio = audit_med / encode_med
    return {
        "workload": name,
        "data": pairs.describe(),
        "sequences": len(baseline.sequences),
        "tokens": agreement,
        "audit_tokens_summary": {k: result.tokens[k] for k in ("content_mean", "elongated_mean", "m_mean")},
        "warmup": {"pairs": len(warm_set), "audit": warm_audit.to_dict(), "encode": warm_encode.to_dict()},
        "runs": [
            {
                "audit": a.to_dict(),
                "encode": e.to_dict(),
                "post_audit": {k: round(v, 4) for k, v in p.items()},
                "cli_wall": round(c, 4) if with_report else None,
            }
            for a, e, p, c in zip(audits, encodes, post, cli, strict=True)
        ],
        "median_seconds": {
            "audit": round(audit_med, 4),
            "encode": round(encode_med, 4),
            "cli": round(cli_med, 4) if with_report else None,
        },
        "median_cpu_seconds": {"audit": round(audit_cpu, 4), "encode": round(encode_cpu, 4)},
        "tokens_per_second": {
            "audit": round(agreement["audit_tokens"] / audit_med, 1),
            "encode": round(agreement["encode_tokens"] / encode_med, 1),
        },
        "ratio": round(ratio, 4),
        "ratio_per_run_median": round(_median([a.wall / e.wall for a, e in zip(audits, encodes, strict=True)]), 4),
        "ratio_cpu": round(audit_cpu / encode_cpu, 4),
        "ratio_cli": round(cli_med / encode_med, 4) if with_report else None,
        "median_cpu_pressure": round(_median(stalls), 4) if stalls else None,
        "meets_target": ratio <= TARGET_RATIO,
    }


def _stall_text(timings: Sequence[Timing]) -> str:
    stalls = [t.stall for t in timings if t.stall is not None]
    return f"{max(stalls):.0%}" if stalls else "n/a"


# ---------------------------------------------------------------------------------------------- profiling

# (label, file suffix, function name): where the audit's time goes, read from cProfile's cumulative times.
_PROFILE_PARTS = (
    ("run_audit (total)", "lengthwise/audit.py", "run_audit"),
    ("tokenize texts (TokenView.content)", "lengthwise/embed.py", "content"),
    ("embed_ids (total)", "lengthwise/embed.py", "embed_ids"),
    ("  model forward", "sentence_transformers/base/model.py", "forward"),
    ("  batch tensors (_features)", "lengthwise/embed.py", "_features"),
    ("dedup (_SequenceBank.add)", "lengthwise/audit.py", "add"),
    ("elongate / first_k / wrap", "lengthwise/tokens.py", ("elongate", "first_k", "wrap", "elongation_factor")),
    ("word shuffle", "lengthwise/tokens.py", "shuffle_words"),
    ("statistics (lengthwise.audit.pairs.shift)", "lengthwise/shift.py", None),
    ("model_fingerprint (weight hash)", "lengthwise/models.py", "model_fingerprint"),
    ("environment()", "lengthwise/results.py", "environment"),
)


def _profile_breakdown(stats: Any) -> list[tuple[str, float]]:
    """Cumulative seconds per part; shift.py counts only calls made from audit.py (no double counting)."""
    rows = []
    for label, suffix, names in _PROFILE_PARTS:
        wanted = (names,) if isinstance(names, str) else names
        total = 0.0
        for (file, _line, func), (_cc, _nc, _tt, cumulative, callers) in stats.stats.items():
            if not file.replace(os.sep, "/").endswith(suffix):
                continue
            if wanted is None:  # everything in the module, as called from the audit
                total += sum(c[3] for key, c in callers.items() if key[0].replace(os.sep, "/").endswith("audit.py"))
            elif func in wanted:
                total += cumulative
        rows.append((label, total))
    return rows


def profile_workload(name: str, model: SentenceTransformer, pairs: PairSet, config: AuditConfig, top: int) -> None:
    """One audit under cProfile: the breakdown by part, then the top functions by cumulative time."""
    import cProfile
    import io
    import pstats

    run_audit(model, PairSet(pairs.pairs[:16], pairs.source, pairs.fmt), config)  # warm-up
    profiler = cProfile.Profile()
    profiler.runcall(run_audit, model, pairs, config)
    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer)
    breakdown = _profile_breakdown(stats)
    total = breakdown[0][1]
    print(f"\n[{name}] cProfile of one run_audit on {len(pairs)} pairs ({total:.2f}s under the profiler)")
    for label, seconds in breakdown:
        print(f"  {label:<38} {seconds:>8.3f}s {seconds / total:>7.1%}")
    stats.sort_stats("cumulative").print_stats(top)
    print(buffer.getvalue().split("\n", 4)[-1] if "\n" in buffer.getvalue() else buffer.getvalue())


# ---------------------------------------------------------------------------------------------- reporting


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    info: dict[str, Any] = {
        "cpu": cpu,
        "cores": cores,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    info.update(environment())
    return info


def print_table(results: Sequence[dict[str, Any]]) -> None:
    header = (
        f"{'workload':<9} {'seqs':>5} {'tokens':>7} {'audit s':>8} {'encode s':>9} {'cli s':>7} {'audit tok/s':>11} "
        f"{'encode tok/s':>12} {'ratio':>6} {'cli ratio':>9} {'cpu ratio':>9} {'cpu pressure':>12}"
    )
    print()
    print(header)
    print("-" * len(header))
    for row in results:
        med, tps = row["median_seconds"], row["tokens_per_second"]
        cli = f"{med['cli']:.2f}" if med["cli"] is not None else "-"
        cli_ratio = f"{row['ratio_cli']:.3f}" if row["ratio_cli"] is not None else "-"
        pressure = f"{row['median_cpu_pressure']:.0%}" if row["median_cpu_pressure"] is not None else "n/a"
        print(
            f"{row['workload']:<9} {row['sequences']:>5} {row['tokens']['audit_tokens']:>7} {med['audit']:>8.2f} "
            f"{med['encode']:>9.2f} {cli:>7} {tps['audit']:>11.0f} {tps['encode']:>12.0f} {row['ratio']:>6.3f} "
            f"{cli_ratio:>9} {row['ratio_cpu']:>9.3f} {pressure:>12}"
        )
    print(f"target: ratio ≤ {TARGET_RATIO} (median audit wall / median encode wall over the same tokens)")
    if any((row["median_cpu_pressure"] or 0) > 0.1 for row in results):
        print("warning: other work competed for the CPU during the runs; wall times are noisy, see the cpu ratio")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help=f"model directory or hub id (default: packaged {DEFAULT_MODEL})")
    parser.add_argument("--pairs", type=Path, default=DEFAULT_PAIRS, help="pairs file (default: STS-B test)")
    parser.add_argument("--max-pairs", type=int, default=300, help="sample this many pairs (seed 0) from --pairs")
    parser.add_argument("--repeats", type=int, default=5, help="timed audit/encode runs per workload")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size of both the audit and encode")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: the usable cores)")
    parser.add_argument("--no-probe", action="store_true", help="skip the embedded probe-set workload")
    parser.add_argument(
        "--warmup-pairs", type=int, default=32, help="pairs in the untimed warm-up audit/encode (0: whole workload)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="instead of timing: cProfile one audit per workload and print it"
    )
    parser.add_argument("--top", type=int, default=25, help="functions listed by --profile")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results file")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.max_pairs < 1:
        parser.error("--repeats and --max-pairs must be ≥ 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    torch.set_num_threads(args.threads or cores)

    load_at_start = os.getloadavg()
    model = load_plain_model(args.model) if args.model else load_plain_model()
    config = AuditConfig(batch_size=args.batch_size)
    workloads = [("stsb", read_pairs(args.pairs).sample(args.max_pairs, seed=0))]
    if not args.no_probe:
        workloads.append(("probes", default_probe_pairs().sample(args.max_pairs, seed=0)))
    print(
        f"model {args.model or DEFAULT_MODEL} on {model.device}, torch threads {torch.get_num_threads()}, "
        f"repeats {args.repeats}, batch size {args.batch_size}",
        flush=True,
    )

    if args.profile:
        for name, pairs in workloads:
            profile_workload(name, model, pairs, config, args.top)
        return 0

    results = [
        bench_workload(
            name, model, pairs, config, repeats=args.repeats, batch_size=args.batch_size, warmup_pairs=args.warmup_pairs
        )
        for name, pairs in workloads
    ]
    print_table(results)

    payload = {
        "benchmark": "audit_vs_encode",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command_line("benchmarks.audit.audit", None if argv is None else list(argv)),
        "target_ratio": TARGET_RATIO,
        "machine": {**machine(), "load_average": {"start": load_at_start, "end": os.getloadavg()}},
        "settings": {
            "model": args.model or DEFAULT_MODEL,
            "device": str(model.device),
            "max_seq_length": model.max_seq_length,
            "pairs": str(args.pairs),
            "max_pairs": args.max_pairs,
            "repeats": args.repeats,
            "warmup_pairs": args.warmup_pairs,
            "batch_size": args.batch_size,
            "audit_config": config.to_dict(),
            "report_columns": write_report is not None,
        },
        "results": results,
    }
    write_json_atomic(args.out, payload)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
