"""The synthetic tasks' word lists live in a data file (`longdoc/tasks/words.json`), not in code: the generated tasks
are byte for byte what they were when the lists were Python literals.

The digest below was computed on the code before the move (commit 4c26cd2, the lists in `synthetic.py`) over the lists
themselves; a changed word, order or template changes it. (Seeded sets of both tasks were also byte-identical at the
move, but their digest depends on the installed `regex` release — 2026.5.9 and 2026.11.19 give different sets — so
it is not a test a fresh install can pass.)
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import lengthwise.longdoc.tasks.synthetic as synthetic

HERE = Path(__file__).parent
LISTS = ("_NAMES", "_CITIES", "_ACTIVITIES", "_PASSKEY_NEEDLES", "_PASSKEY_QUERIES", "_NEEDLE_PAIRS", "_NOT_NAMES",
         "_COMMON", "_ADJECTIVE_ENDINGS")  # fmt: skip
LISTS_SHA256 = "e26601195c6cb5a0f4aa44b91b8d237779f858a44db2d3c6e97f9c2d4b011e23"


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
