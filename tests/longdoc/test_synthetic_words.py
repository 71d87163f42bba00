"""The synthetic tasks' word lists live in a data file (`longdoc/tasks/words.json`), not in code: the generated tasks
are byte for byte what they were when the lists were Python literals.

The digests below were computed on the code before the move (commit 4c26cd2, the lists in `synthetic.py`), over the
lists themselves and over seeded sets of both tasks in both styles; a changed word, order or template changes them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from importlib import resources
from pathlib import Path

import lengthwise.longdoc.tasks.synthetic as synthetic
from lengthwise.longdoc.tasks.synthetic import _sentences, haystack_names, make_synthetic

HERE = Path(__file__).parent
LISTS = ("_NAMES", "_CITIES", "_ACTIVITIES", "_PASSKEY_NEEDLES", "_PASSKEY_QUERIES", "_NEEDLE_PAIRS", "_NOT_NAMES",
         "_COMMON", "_ADJECTIVE_ENDINGS")  # fmt: skip
LISTS_SHA256 = "e26601195c6cb5a0f4aa44b91b8d237779f858a44db2d3c6e97f9c2d4b011e23"
SETS_SHA256 = "5a82429518f7a14e576a6dcbd3f80e18004ba93c6c8afa64cfb19da29ac7dd72"


def test_the_word_lists_are_read_from_the_package_data() -> None:
    words = json.loads(resources.files("lengthwise.longdoc.tasks").joinpath("words.json").read_text("utf-8"))
    assert words["names"] == synthetic._NAMES
    assert frozenset(words["common"]) == synthetic._COMMON
    source = Path(synthetic.__file__).read_text(encoding="utf-8")
    assert '"Nairobi"' not in source and '"wednesday"' not in source  # no second copy left in code


def test_the_lists_are_the_ones_before_the_move() -> None:
    lists = {}
    for name in LISTS:
        value = getattr(synthetic, name)
        lists[name] = sorted(value) if isinstance(value, frozenset) else [list(v) if isinstance(v, tuple) else v
                                                                         for v in value]  # fmt: skip
    # tuples of pairs serialise as lists either way: the digest sees the words and their order
    assert hashlib.sha256(json.dumps(lists).encode()).hexdigest() == LISTS_SHA256


def test_seeded_sets_are_byte_identical_to_the_ones_before_the_move(minilm_path: str) -> None:
    from transformers import AutoTokenizer

    haystack = (HERE / "haystack.txt").read_text().splitlines()
    prose = (HERE / "prose.txt").read_text().splitlines()
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    digest = hashlib.sha256(json.dumps(haystack_names(_sentences(prose), minimum=1)).encode())
    for task in ("passkey", "needle"):
        simple = make_synthetic(task, haystack, tokenizer, style="simple", lengths=(64, 200), per_length=6, seed=3)
        real = make_synthetic(task, prose * 3, tokenizer, style="realistic", lengths=(64, 200), per_length=2, seed=5)
        for data in (simple, real):
            digest.update(json.dumps([asdict(item) for item in data.items]).encode())
            digest.update(json.dumps(data.meta, sort_keys=True).encode())
    assert digest.hexdigest() == SETS_SHA256
