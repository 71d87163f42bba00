"""docs/integrations.md's examples, and the README's, run as written: each Python block, in the folder that holds the
tests' index as ``idx/`` and its Milvus Lite database as ``milvus.db``, with the service's address replaced by the
running one's."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")
pytest.importorskip("haystack")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)
INSTALLS = re.findall(r"```bash\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)
README = PAGE.parents[1] / "README.md"
QUICKSTART = re.findall(r"### In LangChain, LlamaIndex or Haystack\n.*?```python\n(.*?)```", README.read_text("utf-8"),
                        flags=re.DOTALL)  # fmt: skip
DOCUMENTED_URL = "http://127.0.0.1:8000"

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_page_has_an_example_per_framework_within_five_lines_of_its_install() -> None:
    for framework in ("langchain", "llamaindex", "haystack"):
        assert f"pip install 'lengthwise[{framework}]'\n" in INSTALLS
        assert any(f"lengthwise.integrations.{framework} import" in block for block in BLOCKS), framework
    first = BLOCKS[0].strip().splitlines()  # the install, then these: hybrid retrieval in a chain
    assert len(first) <= 4 and "chain" in first[2]


@pytest.mark.parametrize("number", range(len(BLOCKS) + 1))
def test_each_example_runs(number: int, index_dir: Path, monkeypatch: pytest.MonkeyPatch, request: Any) -> None:
    assert len(QUICKSTART) == 1, "the README's quickstart shows a retriever"
    code = BLOCKS[number] if number < len(BLOCKS) else QUICKSTART[0]
    if "milvus_uri=" in code:
        assert Path(request.getfixturevalue("milvus")[0]).parent == index_dir.parent
    if DOCUMENTED_URL in code:
        code = code.replace(DOCUMENTED_URL, request.getfixturevalue("server").url)
    monkeypatch.chdir(index_dir.parent)  # idx/ and milvus.db
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"{PAGE.name}[{number}]", "exec"), {"__name__": "__docs__"})
    assert printed.getvalue().strip() or "assert" in code
