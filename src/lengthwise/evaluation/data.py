"""Evaluation data: STS pairs, BEIR retrieval folders and labelled texts, local (plain or ``.gz``) or from the hub.

STS files go through `lengthwise.core.data.read_pairs` (STS-B, SICK, ``s1<TAB>s2<TAB>score``, JSONL, headed CSV);
SentEval / SemEval folders (``STS.input.X.txt`` + ``STS.gs.X.txt``, as in STS12–16) are read here. Every reader
names the file and line of a malformed row (`DataFormatError`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lengthwise.core._textio import jsonl_objects, open_text, row_id
from lengthwise.core.data import PairSet, TextPair, read_pairs, read_qrels
from lengthwise.core.errors import DataFormatError, SettingError

__all__ = [
    "LabelledTexts",
    "RetrievalData",
    "read_beir",
    "read_classification",
    "read_labelled",
    "read_senteval_sts",
    "read_sts",
]


def _sha256(parts: list[str]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _existing(folder: Path, *names: str) -> Path | None:
    for name in names:
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.exists():
                return candidate
    return None


# --- STS -----------------------------------------------------------------------------------------------------------


def read_senteval_sts(folder: str | Path) -> PairSet:
    """All scored pairs of a SemEval/SentEval STS folder (``*.input.X.txt`` with ``*.gs.X.txt``), subsets in name
    order; a pair's `kind` is its subset. Unscored pairs (empty gold line) are skipped, as SentEval and MTEB do.
    Input lines may carry extra columns (STS16 adds the two sources); only the first two are read.
    """
    folder = Path(folder)
    inputs = sorted(p for p in folder.iterdir() if re.search(r"\.input\..+\.txt(\.gz)?$", p.name))
    if not inputs:
        raise DataFormatError(
            None, None, f"{folder}: no *.input.*.txt files; expected a SentEval STS folder (e.g. STS12-en-test)"
        )
    pairs: list[TextPair] = []
    for input_path in inputs:
        gold_path = input_path.with_name(input_path.name.replace(".input.", ".gs."))
        if not gold_path.exists():
            raise DataFormatError(None, None, f"{input_path}: no gold file {gold_path.name} beside it")
        subset = re.sub(r"^.*\.input\.|\.txt(\.gz)?$", "", input_path.name)
        with open_text(input_path) as texts, open_text(gold_path) as golds:
            text_lines = texts.read().split("\n")
            gold_lines = golds.read().split("\n")
        while text_lines and not text_lines[-1].strip():
            text_lines.pop()
        if len(gold_lines) < len(text_lines):
            gold_lines += [""] * (len(text_lines) - len(gold_lines))
        for line_no, (text_line, gold_line) in enumerate(zip(text_lines, gold_lines, strict=False), start=1):
            if not gold_line.strip():
                continue
            try:
                score = float(gold_line)
            except ValueError:
                raise DataFormatError(
                    None, None, f"{gold_path}:{line_no}: gold score {gold_line!r} is not a number"
                ) from None
            cells = text_line.rstrip("\r").split("\t")
            if len(cells) < 2 or not cells[0].strip() or not cells[1].strip():
                raise DataFormatError(
                    None,
                    None,
                    f"{input_path}:{line_no}: expected `sentence1<TAB>sentence2` with both sentences non-empty",
                )
            pairs.append(TextPair(cells[0].strip(), cells[1].strip(), score, subset))
    return PairSet(tuple(pairs), str(folder), "senteval-sts")


def read_sts(path: str | Path) -> PairSet:
    """STS pairs with gold scores from a file (`lengthwise.core.data.read_pairs` formats) or a SentEval folder."""
    path = Path(path)
    if path.is_dir():
        return read_senteval_sts(path)
    pair_set = read_pairs(path)
    missing = sum(pair.score is None for pair in pair_set.pairs)
    if missing:
        raise DataFormatError(
            None, None, f"{path}: {missing} of {len(pair_set)} pairs have no gold score; STS needs a score column"
        )
    return pair_set


# --- retrieval -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetrievalData:
    """A BEIR split: documents (``title + " " + text`` when a title exists, as MTEB/BEIR embed them), the queries
    judged in the split, and graded qrels ``{query_id: {doc_id: relevance}}``."""

    doc_ids: tuple[str, ...]
    doc_texts: tuple[str, ...]
    query_ids: tuple[str, ...]
    query_texts: tuple[str, ...]
    qrels: dict[str, dict[str, int]]
    source: str
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        if not self.doc_ids or not self.query_ids:
            raise DataFormatError(None, None, f"{self.source}: empty corpus or no judged queries")
        if len(self.doc_ids) != len(self.doc_texts) or len(self.query_ids) != len(self.query_texts):
            problem = "doc_ids and doc_texts (or query_ids and query_texts) differ in length; give one text per id"
            raise SettingError(None, None, problem)
        parts = [f"{i}\t{t}" for i, t in zip(self.doc_ids, self.doc_texts, strict=True)]
        parts += [f"{i}\t{t}" for i, t in zip(self.query_ids, self.query_texts, strict=True)]
        parts += [f"{q}\t{d}\t{r}" for q in sorted(self.qrels) for d, r in sorted(self.qrels[q].items())]
        object.__setattr__(self, "sha256", _sha256(parts))

    def describe(self) -> dict[str, object]:
        return {
            "source": self.source,
            "format": "beir",
            "n_documents": len(self.doc_ids),
            "n_queries": len(self.query_ids),
            "n_judgements": sum(len(docs) for docs in self.qrels.values()),
            "sha256": self.sha256,
        }


def document_text(title: object, text: object) -> str:
    """MTEB's document string: ``(title + " " + text).strip()`` when the title is non-empty, else ``text.strip()``."""
    title = "" if title is None else str(title)
    text = "" if text is None else str(text)
    return f"{title} {text}".strip() if title else text.strip()


def _read_jsonl_objects(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    rows: list[tuple[int, dict]] = []
    for line_no, row in jsonl_objects(path, f"a JSON object with fields {', '.join(required)}"):
        if any(key not in row for key in required):
            raise DataFormatError(
                None, None, f"{path}:{line_no}: expected a JSON object with fields {', '.join(required)}"
            )
        rows.append((line_no, row))
    return rows


def read_beir(folder: str | Path, split: str = "test") -> RetrievalData:
    """Read a BEIR folder: ``corpus.jsonl``, ``queries.jsonl`` (plain or ``.gz``) and ``qrels/<split>.tsv``."""
    folder = Path(folder)
    corpus_path = _existing(folder, "corpus.jsonl")
    queries_path = _existing(folder, "queries.jsonl")
    qrels_path = _existing(folder / "qrels", f"{split}.tsv")
    for found, what in (
        (corpus_path, "corpus.jsonl"),
        (queries_path, "queries.jsonl"),
        (qrels_path, f"qrels/{split}.tsv"),
    ):
        if found is None:
            raise DataFormatError(
                None, None, f"{folder}: no {what}(.gz); a BEIR folder holds corpus, queries and qrels/<split>.tsv"
            )
    assert corpus_path and queries_path and qrels_path
    documents: dict[str, str] = {}
    for line_no, row in _read_jsonl_objects(corpus_path, ("_id",)):
        doc_id = row_id(corpus_path, line_no, row, None)
        if not doc_id.strip():
            raise DataFormatError(None, None, f"{corpus_path}:{line_no}: an empty _id; give every document its own id")
        documents[doc_id] = document_text(row.get("title"), row.get("text"))
        if not documents[doc_id]:
            raise DataFormatError(
                None, None, f"{corpus_path}:{line_no}: document {doc_id!r} has neither title nor text"
            )
    queries = {
        row_id(queries_path, line_no, row, None, "query"): str(row.get("text", "")).strip()
        for line_no, row in _read_jsonl_objects(queries_path, ("_id", "text"))
    }
    qrels = read_qrels(qrels_path)  # the one qrels reader, shared with the audit's BEIR pairs
    missing = [qid for qid in qrels if qid not in queries]
    if missing:
        raise DataFormatError(
            None,
            None,
            f"{qrels_path}: {len(missing)} judged query ids are not in {queries_path.name} (e.g. {missing[0]!r})",
        )
    unknown = sorted({doc for judged in qrels.values() for doc in judged} - documents.keys())
    if unknown:  # never retrievable: each would lower every score of its query without a word
        shown = ", ".join(map(repr, unknown[:3])) + (", …" if len(unknown) > 3 else "")
        raise DataFormatError(
            None,
            None,
            f"{qrels_path}: {len(unknown)} judged document ids are not in {corpus_path.name} ({shown}); remove "
            "them from the qrels or add the documents to the corpus",
        )
    query_ids = tuple(qid for qid in queries if qid in qrels)
    return RetrievalData(
        doc_ids=tuple(documents),
        doc_texts=tuple(documents.values()),
        query_ids=query_ids,
        query_texts=tuple(queries[qid] for qid in query_ids),
        qrels={qid: qrels[qid] for qid in query_ids},
        source=f"{folder} ({split})",
    )


# --- classification ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelledTexts:
    """Texts with integer labels ``0..C-1`` and their names."""

    texts: tuple[str, ...]
    labels: np.ndarray  # (n,) int64
    label_names: tuple[str, ...]
    source: str
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        if not self.texts:
            raise DataFormatError(None, None, f"{self.source}: no labelled texts")
        if self.labels.shape != (len(self.texts),):
            raise SettingError("labels", self.labels.shape, f"expected one label per text, ({len(self.texts)},)")
        if self.labels.min() < 0 or self.labels.max() >= len(self.label_names):
            problem = f"must lie in 0..{len(self.label_names) - 1}, one per label name"
            raise SettingError("labels", [int(self.labels.min()), int(self.labels.max())], problem)
        parts = [f"{label}\t{text}" for label, text in zip(self.labels.tolist(), self.texts, strict=True)]
        object.__setattr__(self, "sha256", _sha256(parts))

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, indices: np.ndarray | list[int], note: str) -> LabelledTexts:
        indices = np.asarray(indices, dtype=np.int64)
        return LabelledTexts(
            tuple(self.texts[i] for i in indices), self.labels[indices], self.label_names, f"{self.source} ({note})"
        )

    def stratified_sample(self, n: int, seed: int = 0) -> LabelledTexts:
        """At most n texts, each class kept in proportion (seeded), in original order; all of them when n ≥ len."""
        if n < 1:
            raise SettingError("n", n, "a sample needs at least 1 text")
        if n >= len(self):
            return self
        from sklearn.model_selection import train_test_split

        keep, _ = train_test_split(np.arange(len(self)), train_size=n, stratify=self.labels, random_state=seed)
        return self.subset(np.sort(keep), f"stratified sample of {n}, seed {seed}")

    def describe(self) -> dict[str, object]:
        return {
            "source": self.source,
            "format": "labelled-jsonl",
            "n_texts": len(self),
            "n_classes": len(self.label_names),
            "class_counts": np.bincount(self.labels, minlength=len(self.label_names)).tolist(),
            "sha256": self.sha256,
        }


def _raw_labelled(path: Path) -> list[tuple[int, str, object, str | None]]:
    """(line, text, label, label_name) per row of a JSONL file with ``text`` and ``label``."""
    rows: list[tuple[int, str, object, str | None]] = []
    for line_no, row in _read_jsonl_objects(path, ("text", "label")):
        if not isinstance(row["text"], str):
            raise DataFormatError(None, None, f"{path}:{line_no}: field text must be a string")
        label = row["label"]
        if isinstance(label, bool) or not isinstance(label, int | str):
            raise DataFormatError(None, None, f"{path}:{line_no}: label {label!r} must be an integer or a string")
        rows.append((line_no, row["text"], label, row.get("label_name")))
    if not rows:
        raise DataFormatError(None, None, f"{path}: no labelled texts; one JSON object per line with text and label")
    return rows


def _label_names(raws: list[list[tuple[int, str, object, str | None]]], names_file: Path | None) -> tuple[str, ...]:
    if names_file is not None:
        names = json.loads(names_file.read_text(encoding="utf-8"))
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise DataFormatError(None, None, f"{names_file}: expected a JSON list of label names")
        return tuple(names)
    labels = [label for raw in raws for _, _, label, _ in raw]
    if all(isinstance(label, str) for label in labels):
        return tuple(sorted(set(labels)))  # type: ignore[arg-type]
    if not all(isinstance(label, int) for label in labels):
        raise DataFormatError(
            None, None, "labels mix integers and strings; use one kind across the train and test files"
        )
    named: dict[int, str] = {}
    for raw in raws:
        for _, _, label, name in raw:
            if name is not None:
                named[int(label)] = str(name)  # type: ignore[call-overload]
    top = max(int(label) for label in labels)  # type: ignore[call-overload]
    return tuple(named.get(i, str(i)) for i in range(top + 1))


def _to_labelled(path: Path, raw: list[tuple[int, str, object, str | None]], names: tuple[str, ...]) -> LabelledTexts:
    index = {name: i for i, name in enumerate(names)}
    labels = []
    for line_no, _, label, _ in raw:
        value = index.get(label) if isinstance(label, str) else label
        if value is None or not 0 <= int(value) < len(names):  # type: ignore[call-overload]
            raise DataFormatError(
                None, None, f"{path}:{line_no}: label {label!r} is not one of the {len(names)} classes"
            )
        labels.append(int(value))  # type: ignore[call-overload]
    return LabelledTexts(tuple(text for _, text, _, _ in raw), np.asarray(labels, dtype=np.int64), names, str(path))


def read_labelled(path: str | Path, label_names: tuple[str, ...] | None = None) -> LabelledTexts:
    """A JSONL file of ``{"text": ..., "label": int | str}`` (optional ``label_name``)."""
    path = Path(path)
    if not path.exists():
        raise DataFormatError(None, None, f"{path}: no such file")
    raw = _raw_labelled(path)
    names = label_names or _label_names([raw], _existing(path.parent, "label_names.json"))
    return _to_labelled(path, raw, names)


def read_classification(folder: str | Path) -> tuple[LabelledTexts, LabelledTexts]:
    """``train.jsonl`` and ``test.jsonl`` (plain or ``.gz``, optional ``label_names.json``) of one folder."""
    folder = Path(folder)
    train_path, test_path = _existing(folder, "train.jsonl"), _existing(folder, "test.jsonl")
    if train_path is None or test_path is None:
        raise DataFormatError(
            None, None, f"{folder}: expected train.jsonl and test.jsonl (plain or .gz) with text and label"
        )
    train_raw, test_raw = _raw_labelled(train_path), _raw_labelled(test_path)
    names = _label_names([train_raw, test_raw], _existing(folder, "label_names.json"))
    return _to_labelled(train_path, train_raw, names), _to_labelled(test_path, test_raw, names)


def sample_labelled(data: LabelledTexts, n: int | None, seed: int) -> LabelledTexts:
    """`stratified_sample` when n is given, else the data unchanged."""
    return data if n is None else data.stratified_sample(n, seed)
