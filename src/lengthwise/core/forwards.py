"""One forward pass read twice: a query's dense vector and its token vectors from the same model call.

A hybrid search with the token stage reads each query twice with the same model: pooled into its dense vector, and
token by token for late interaction. Inside `shared_forwards()` a model call whose inputs are exactly those of an
earlier call in the block (the same model, the same tensors bit for bit, the same keywords) returns that call's
outputs instead of running the model again: the outputs are the ones the second call would compute, so what is read
from them is unchanged, and the second pass costs nothing. Outside the block, and in other threads (a context
variable), every call runs the model.

Importing this module loads neither numpy nor torch.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["forward_once", "shared_forwards", "sharing"]

_SHARED: contextvars.ContextVar[dict[tuple[object, ...], Any] | None] = contextvars.ContextVar(
    "lengthwise_shared_forwards", default=None
)


@contextlib.contextmanager
def shared_forwards() -> Iterator[None]:
    """A block in which `forward_once` runs each distinct model call once (see the module docstring); the outputs
    kept are dropped when it ends."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def sharing() -> bool:
    """Whether this thread is inside `shared_forwards` (a caller may then batch as the second pass will)."""
    return _SHARED.get() is not None


def forward_once(model: Callable[..., Any], features: Mapping[str, Any], **keywords: Any) -> Any:
    """``model(features, **keywords)``, or inside `shared_forwards` the outputs of an earlier call with the same
    model and exactly the same inputs. The outputs are shared, not copied: read them, do not write into them."""
    kept = _SHARED.get()
    if kept is None:
        return model(features, **keywords)
    key = (id(model), *sorted(keywords.items()), *sorted(_fingerprint(name, value) for name, value in
                                                        features.items()))  # fmt: skip
    if key not in kept:
        kept[key] = model(features, **keywords)
    return kept[key]


def _fingerprint(name: str, value: Any) -> tuple[object, ...]:
    """An input as a key: a tensor by its dtype, shape and bytes; anything else as it is."""
    if hasattr(value, "detach") and hasattr(value, "shape"):
        held = value.detach().cpu().contiguous()
        exact = held.float() if str(held.dtype) == "torch.bfloat16" else held  # numpy has no bf16; fp32 holds it
        return (name, str(value.dtype), tuple(value.shape), exact.numpy().tobytes())
    return (name, repr(value))
