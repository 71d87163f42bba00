"""The query model of an index: the model its documents were embedded with, loaded as recorded, checked against the
recorded weights and TempScale, at the precision asked for, around the long-document method that made the windows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lengthwise.core.errors import SettingError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.models import ModelLoader
    from lengthwise.search.protocols import WindowMethod
    from lengthwise.search.types import EncodeSettings, ModelRecord, TokenSettings

__all__ = ["QUERY_MODEL_KEYS", "QueryModel", "check_query_model", "given_name"]

# what of the query model's fingerprint an index records and checks: the weights (their hash covers the precision's
# cast) and a TempScale set by hooks, which leaves the weights alone but changes every vector
QUERY_MODEL_KEYS = ("weights_sha256_16", "tempscale")


@dataclass(eq=False)
class QueryModel:
    """Queries embedded as an index's documents were.

    Args:
        recorded: The index's ``model`` settings (its name, weight hash and TempScale).
        made: The index's ``encode_settings`` (the model's name, ``long`` settings, ``precision``).
        method: How the windows were made (`WindowMethod`): the query encoder around the loaded model.
        load_model: How the model is loaded by name (None: the hall's plain load).
        model: The loaded model (None: loaded on the first query).
    """

    recorded: ModelRecord
    made: EncodeSettings
    method: WindowMethod
    load_model: ModelLoader | None = None
    model: SentenceTransformer | None = None
    query_precision: str | None = None  # what queries are embedded at when asked otherwise (`set_query_precision`)
    _as_recorded: SentenceTransformer | None = None  # the checked model as loaded, when a copy of it was changed

    def load(self, name: str | None = None) -> SentenceTransformer:
        """The recorded model (or the one `name` names in its place), loaded at the recorded precision."""
        from lengthwise.core.models import load_plain_model

        loader = self.load_model or load_plain_model
        return loader(name or self.made["model"], precision=self.recorded_precision)

    def check(self, model: SentenceTransformer, given: str | None = None) -> None:
        """`check_query_model` on `model`: the recorded one loaded here, or one `given` in its place."""
        check_query_model(self.recorded, model, given=given, precision=self.recorded_precision,
                          as_saved=self.load_model is not None)  # fmt: skip

    def embed(self, queries: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """The queries as the index's documents were made: the recorded model (checked by its weights and
        TempScale) and long-document settings."""
        encoder = self.method.query_encoder(self.loaded(), self.made["long"])
        return encoder.encode_queries(list(queries), batch_size=batch_size)

    def loaded(self) -> SentenceTransformer:
        """The query model: loaded (as recorded, checked by its weights and TempScale, at the query precision) on
        the first call."""
        if self.model is None:
            model = self.load()
            self.check(model)
            self.model = self._at_query_precision(model)
        return self.model

    def tokens(self, queries: Sequence[str], settings: TokenSettings) -> list[np.ndarray]:
        """Each query's token vectors, read as a token folder's `settings` say (the token side's queries)."""
        return self.method.query_tokens(self.loaded(), queries, settings)

    @property
    def recorded_precision(self) -> str:
        """The precision the index's documents were embedded at, as `lengthwise encode` recorded it (fp32 for an
        index built before it was recorded)."""
        return str(self.made.get("precision", "fp32"))

    @property
    def queries_embedded_at(self) -> str:
        """The precision queries are embedded at: the one `set_query_precision` asked for, else the recorded one."""
        return self.query_precision or self.recorded_precision

    def set_query_precision(self, precision: str | None) -> None:
        """Embed the queries at `precision` (``auto``, ``fp32``, ``bf16``, ``fp16`` or ``int8``;
        `lengthwise.core.precision`) rather than at the precision the documents were embedded at (None: as
        recorded, the default). ``auto`` is the recorded precision on a CPU and bf16 (else fp16) on a GPU
        (`resolve_query_precision`: a half-precision query on a CPU is its own forward, slower than fp32 batches).

        The query model is loaded as recorded and checked against the index's weights, then cast (bf16, fp16) or
        quantized (int8), as `lengthwise.load_model(precision=)` would load it: a query vector then differs from the
        recorded precision's by what the precision changes (bf16 on all-MiniLM-L6-v2: mean cosine 0.99995 to fp32's,
        docs/benchmarks.md "Half precision"), and the query encoder runs faster on a GPU. Only an index embedded in
        fp32 can change: half or int8 weights do not give back the fp32 ones.
        A model already loaded is copied before it changes, so a model given to `open` is left as it was.

        Raises:
            SettingError: on ``precision``: an unknown name, a precision the query model's device runs slowly or
                not at all (`resolve_query_precision`), or another precision than recorded for an index not embedded in
                fp32.
        """
        import copy

        from lengthwise.core.precision import Precision, device_type, resolve_query_precision

        wanted: str | None = None
        if precision is not None:
            recorded = Precision.parse(self.recorded_precision)
            device = None if self.model is None else self.model.device
            concrete = resolve_query_precision(precision, recorded, device)
            if concrete is not recorded and recorded is not Precision.FP32:
                problem = f"the index's documents were embedded in {recorded.value} and its queries can be only so"
                if Precision.parse(precision) is Precision.AUTO:  # what auto meant, or the refusal reads as a riddle
                    problem = f"auto means {concrete.value} on this device ({device_type(device)}); {problem}"
                raise SettingError("precision", precision, f"{problem}; leave it out or give {recorded.value}")
            wanted = None if concrete is recorded else concrete.value
        # the checked model as recorded: the one loaded, or the one kept when a copy of it was changed (None: a
        # model loaded and changed in place, loaded again at the next query)
        as_recorded = self.model if self.query_precision is None else self._as_recorded
        self.query_precision = wanted
        if as_recorded is None or wanted is None:
            self.model = as_recorded
            return
        self._as_recorded = as_recorded
        self.model = self._at_query_precision(copy.deepcopy(as_recorded))  # a copy changes, not the model given

    def _at_query_precision(self, model: SentenceTransformer) -> SentenceTransformer:
        """`model`, loaded as recorded and checked, at the query precision asked for (`set_query_precision`)."""
        from lengthwise.core.precision import HALF_DTYPES, Precision, cast_half
        from lengthwise.core.quantize import quantize_int8

        if self.query_precision is None:
            return model
        wanted = Precision.parse(self.query_precision)
        if wanted in HALF_DTYPES:
            return cast_half(model, wanted)
        quantize_int8(model)  # set_query_precision let through nothing else
        return model


def check_query_model(
    recorded: ModelRecord,
    model: SentenceTransformer,
    *,
    given: str | None = None,
    precision: str = "fp32",
    as_saved: bool = False,
) -> None:
    """Refuse a query model that would embed queries otherwise than an index's documents (`SettingError` naming the
    model): other weights than `recorded` (an index's ``model`` settings; the hash covers the precision's cast), or
    another TempScale than the build recorded (one set by hooks leaves the weights alone). An index built before the
    TempScale was recorded is checked by its weights only.

    Args:
        recorded: The index's ``model`` settings.
        model: The query model loaded.
        given: The model's name when it was given in place of the recorded one (named in the refusal); None: the
            recorded model, loaded by the index.
        precision: What the index's documents were embedded at (a model computing in another is refused as such).
        as_saved: Whether the index loaded the recorded model as saved (`lengthwise.load_model`).
    """
    from lengthwise.core.models import model_fingerprint

    fingerprint = model_fingerprint(model, recorded["name"])
    name = given or recorded["name"]
    if fingerprint["weights_sha256_16"] != recorded["weights_sha256_16"]:
        raise SettingError("model", name, _other_weights(recorded, fingerprint, precision))
    if "tempscale" in recorded and fingerprint["tempscale"] != recorded["tempscale"]:
        raise SettingError("model", name, _other_tempscale(recorded, fingerprint, given, as_saved))


def given_name(model: SentenceTransformer) -> str:
    """A loaded model as a refusal names it: the folder or hub id its transformer was loaded from, when it says."""
    config = getattr(getattr(model[0], "auto_model", None), "config", None)
    return str(getattr(config, "_name_or_path", "") or "the model given")


def _other_tempscale(
    recorded: ModelRecord, fingerprint: Mapping[str, object], given: str | None, as_saved: bool
) -> str:
    """Why another TempScale is refused, with the advice that fits how the model came: given in place of the
    recorded one, the recorded one loaded as saved, or loaded plain."""
    built, found = _tempscale(recorded["tempscale"]), _tempscale(fingerprint["tempscale"])
    if given is not None:  # the advice is about which model to give
        return (f"this model has TempScale {found}, the index was built with {built}; give the model the index was "
                f"built with ({recorded['name']}, with its TempScale), or leave the model out to query with it, or "
                "build the index again with this one")  # fmt: skip
    if as_saved:  # the recorded model has another TempScale saved beside it now
        return (f"the index was built with TempScale {built}, and the model now loads with {found} (its saved "
                "TempScale changed since the build); save it back as it was, or build the index again")  # fmt: skip
    return (f"the index was built with TempScale {built}, this model has {found}; load it as saved (open the index "
            "with load_model=lengthwise.load_model), or build the index again")  # fmt: skip


def _other_weights(recorded: ModelRecord, fingerprint: Mapping[str, object], precision: str) -> str:
    """Why other weights are refused: the same model at another precision (say so, and how to query at the index's),
    or other weights."""
    hashes = f"weights {fingerprint['weights_sha256_16']}, the index's {recorded['weights_sha256_16']}"
    found = fingerprint["precision"]
    if found == precision:
        return (f"the index was built with weights {recorded['weights_sha256_16']}, this model has "
                f"{fingerprint['weights_sha256_16']}; query with the model the corpus was encoded with, or build the "
                "index again")  # fmt: skip
    other = (f"; to embed the queries in {found} instead, leave the model out and set the queries' precision "
             f"(set_query_precision('{found}'))" if precision == "fp32" else "")  # fmt: skip
    return (f"this model computes in {found} and the index's documents were embedded in {precision} ({hashes}: the "
            f"hash covers the precision); load it at {precision}, or leave the model out: the index loads its own "
            f"at {precision}{other}")  # fmt: skip


def _tempscale(patch: object) -> str:
    """A recorded TempScale (`lengthwise.core.models.ModelPatch.describe`) in a message: its settings, or none."""
    return "none" if patch is None else json.dumps(patch, sort_keys=True)
