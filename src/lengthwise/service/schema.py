"""The request bodies of `POST /search`, `POST /embed` and `POST /v1/embeddings` (OpenAI's schema) as pydantic models,
built from the service's `Limits`.

Every cap is a constraint on a field, so a request beyond it is refused with a 422 whose error names the field. The
models are strict (``"10"`` is not a number) and refuse unknown fields (a misspelt ``passage`` is an error, not a
silent default).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from lengthwise.core.errors import SettingError
from lengthwise.service.config import Limits

__all__ = ["request_models"]


def _not_blank(text: str) -> str:
    """`text` unless it is blank; pydantic turns the `SettingError` (a `ValueError`) into the field's 422."""
    if not text.strip():
        raise SettingError(None, None, "a query is empty; give the text to search for")
    return text


def _distinct_ids(queries: list[Any]) -> list[Any]:
    """`queries` unless two share an id (their answers could not be told apart, as `lengthwise search --queries`
    refuses them); queries without an id may repeat."""
    seen: dict[str, int] = {}
    for n, query in enumerate(queries):
        if query.id is not None and seen.setdefault(query.id, n) != n:
            raise SettingError(None, None, f"queries[{n}].id {query.id!r} is queries[{seen[query.id]}]'s too; give "
                               "every query its own id")  # fmt: skip
    return queries


def _as_query(item: Any) -> Any:
    """A bare string is a query without an id."""
    return {"text": item} if isinstance(item, str) else item


def _texts_only(value: Any) -> Any:
    """OpenAI's ``input``: a string is one text; token ids (a list of ints, or of lists) are refused in words."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and any(isinstance(item, int | list) for item in value):
        raise SettingError(None, None, "token ids are not taken: the index's own tokenizer reads text; send strings")
    return value


def request_models(limits: Limits) -> tuple[type[BaseModel], type[BaseModel], type[BaseModel]]:
    """(SearchRequest, EmbedRequest, EmbeddingsRequest) with `limits` as field constraints."""
    Text = Annotated[
        str, StringConstraints(min_length=1, max_length=limits.max_query_chars), AfterValidator(_not_blank)
    ]
    strict = ConfigDict(extra="forbid", strict=True)

    class Query(BaseModel):
        """A query with an id, echoed back as the result's ``query_id``."""

        model_config = strict
        id: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = None
        text: Text

    Queries = Annotated[
        list[Annotated[Query, BeforeValidator(_as_query, json_schema_input_type=str | Query)]],
        Field(min_length=1, max_length=limits.max_queries, description="Query texts, or {id, text} objects (each id "
              "once)."),
        AfterValidator(_distinct_ids),
    ]  # fmt: skip
    Count = Annotated[int | None, Field(ge=1, le=limits.max_candidates)]

    class SearchRequest(BaseModel):
        """Queries and what to return for each: `lengthwise search`'s settings."""

        model_config = strict
        queries: Queries
        top_k: Annotated[int, Field(ge=1, le=limits.max_k)] = Field(
            10,
            # `k` is the spelling before 0.2, deprecated and accepted until 0.4 (docs/serving.md); both are refused
            validation_alias=AliasChoices("top_k", "k"),
            description="Documents per query (`--top-k`). Deprecated: `k`, its name before 0.2, is accepted until 0.4.",
        )
        mode: Literal["dense", "lexical", "hybrid"] | None = Field(
            None, description="dense, lexical (BM25) or hybrid; default: the index's recorded mode."
        )
        passages: Annotated[int, Field(ge=0, le=limits.max_passages, description="Best windows per hit.")] = 0
        context: Annotated[
            int, Field(ge=0, le=limits.max_context, description="Characters of text either side of a passage.")
        ] = 0
        document: bool = Field(False, description="Each hit carries its document's whole text (`text`).")
        candidates: Count = Field(
            None,
            # `windows` is the spelling before 0.2, accepted until 0.4 (docs/serving.md); giving both is refused
            validation_alias=AliasChoices("candidates", "windows"),
            description="The dense side's candidate windows per query (`windows` until 0.4).",
        )
        probes: Count = Field(None, description="FAISS lists probed or USearch expansion.")
        depth: Count = Field(None, description="Hybrid: documents each side proposes (default: the index's, 100).")

    class EmbedRequest(BaseModel):
        """Queries to embed as the index's documents were: the recorded model and long-document settings."""

        model_config = strict
        queries: Queries

    Input = Annotated[
        str, StringConstraints(min_length=1, max_length=limits.max_input_chars), AfterValidator(_not_blank)
    ]

    class EmbeddingsRequest(BaseModel):
        """OpenAI's embeddings request: texts embedded as the index's queries are (the recorded model, long-document
        settings and precision; a long text read whole). ``model`` is taken as given (the answer names the index's
        model); ``dimensions``, if given, must be the model's own."""

        model_config = ConfigDict(extra="forbid", strict=True)
        input: Annotated[
            list[Input],
            BeforeValidator(_texts_only, json_schema_input_type=str | list[str]),
            Field(min_length=1, max_length=limits.max_inputs, description="A text, or a list of texts."),
        ]
        model: str = Field(description="Any name: the index's model answers (its name is in the reply).")
        encoding_format: Literal["float", "base64"] = Field(
            "float", description="float: lists of numbers; base64: little-endian float32 bytes, as OpenAI's."
        )
        dimensions: Annotated[int, Field(ge=1)] | None = Field(
            None, description="The vectors' length: only the model's own (they are not cut)."
        )
        user: str | None = Field(None, description="Accepted and ignored.")

    return SearchRequest, EmbedRequest, EmbeddingsRequest
