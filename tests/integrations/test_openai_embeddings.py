"""`POST /v1/embeddings` on a running `lengthwise serve`, through OpenAI's own client and the LangChain and LlamaIndex
OpenAI embedding classes pointed at it: each text's vector is the library's query vector for it, to the bit (a long
text read whole), in float and base64; usage counts its tokens; what is not supported is refused naming the field."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

openai = pytest.importorskip("openai", reason="needs the openai client: pip install openai")

TEXTS = ["the river and the old bridge", "apples and honey at the autumn market", "where was zanzibarite found"]
LONG = " ".join(["the miller spoke of the flood that took the road by the old mill"] * 12)  # many windows


@pytest.fixture(scope="module")
def client(server: Any) -> Any:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def _expected(library: Any, texts: list[str]) -> np.ndarray:
    return np.asarray(library.embed_queries(texts), dtype=np.float32)


@pytest.mark.parametrize("encoding_format", ["float", "base64"])
def test_the_openai_client_gets_the_librarys_vectors(client: Any, library: Any, encoding_format: str) -> None:
    answer = client.embeddings.create(model="any-name", input=[*TEXTS, LONG], encoding_format=encoding_format)
    if encoding_format == "base64":  # the client hands base64 back as it came
        got = np.stack(
            [np.frombuffer(__import__("base64").b64decode(row.embedding), dtype="<f4") for row in answer.data]
        )
    else:
        got = np.asarray([row.embedding for row in answer.data], dtype=np.float32)
    np.testing.assert_array_equal(got, _expected(library, [*TEXTS, LONG]))
    assert [row.index for row in answer.data] == [0, 1, 2, 3]
    assert answer.model == library.settings["model"]["name"]
    tokenizer = library.model.tokenizer
    tokens = sum(len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in [*TEXTS, LONG])
    assert answer.usage.prompt_tokens == answer.usage.total_tokens == tokens > 64  # the long text: past one window


def test_the_clients_default_and_a_single_string(client: Any, library: Any) -> None:
    answer = client.embeddings.create(model="m", input=TEXTS[0])  # the client asks for base64 and decodes it
    np.testing.assert_array_equal(
        np.asarray(answer.data[0].embedding, dtype=np.float32), _expected(library, TEXTS[:1])[0]
    )


def test_the_models_own_dimensions_are_taken_and_others_refused(client: Any, library: Any) -> None:
    width = _expected(library, TEXTS[:1]).shape[1]
    assert (
        len(client.embeddings.create(model="m", input="a", dimensions=width, encoding_format="float").data[0].embedding)
        == width
    )
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        client.embeddings.create(model="m", input="a", dimensions=width // 2)
    error = refused.value.body
    assert error["param"] == "dimensions" and f"give {width}" in error["message"], error


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "m", "input": [[101, 2023]]}, "input"),
        ({"model": "m", "input": [1, 2, 3]}, "input"),
        ({"model": "m", "input": []}, "input"),
        ({"model": "m", "input": ["fine", "  "]}, "input[1]"),
        ({"input": ["a"]}, "model"),
        ({"model": "m", "input": ["a"], "encoding_format": "int8"}, "encoding_format"),
    ],
)
def test_what_is_not_taken_is_refused_naming_the_field(server: Any, body: dict[str, Any], field: str) -> None:
    import httpx

    answer = httpx.post(f"{server.url}/v1/embeddings", json=body, timeout=60)
    assert answer.status_code == 422, answer.text
    found = answer.json()
    assert found["field"] == field and found["error"]["param"] == field, found
    assert found["error"]["type"] == "invalid_request_error" and "\n" not in found["error"]["message"]


def test_langchains_openai_embeddings_pointed_at_the_service(server: Any, library: Any) -> None:
    langchain_openai = pytest.importorskip("langchain_openai", reason="needs langchain-openai")
    # check_embedding_ctx_length=False: LangChain would otherwise cut texts into tiktoken ids (fetched from the web)
    embeddings = langchain_openai.OpenAIEmbeddings(model="lengthwise", base_url=f"{server.url}/v1", api_key="unused",
                                                   check_embedding_ctx_length=False, max_retries=0)  # fmt: skip
    np.testing.assert_array_equal(np.asarray(embeddings.embed_documents([*TEXTS, LONG]), dtype=np.float32),
                                  _expected(library, [*TEXTS, LONG]))  # fmt: skip
    np.testing.assert_array_equal(np.asarray(embeddings.embed_query(TEXTS[1]), dtype=np.float32),
                                  _expected(library, TEXTS[1:2])[0])  # fmt: skip


def test_llamaindexs_openai_embedding_pointed_at_the_service(server: Any, library: Any) -> None:
    module = pytest.importorskip("llama_index.embeddings.openai", reason="needs llama-index-embeddings-openai")
    embedding = module.OpenAIEmbedding(api_base=f"{server.url}/v1", api_key="unused", max_retries=0)
    np.testing.assert_array_equal(np.asarray(embedding.get_text_embedding(LONG), dtype=np.float32),
                                  _expected(library, [LONG])[0])  # fmt: skip
    np.testing.assert_array_equal(np.asarray(embedding.get_query_embedding(TEXTS[2]), dtype=np.float32),
                                  _expected(library, TEXTS[2:])[0])  # fmt: skip
