"""The evaluation tasks' dispatch: for each `Task`, its data loader, its evaluator and MTEB's self-hit rule.

`Task` itself (with its headline metric) is defined with the other settings in `lengthwise.evaluation.config`, so
that the configs need not import this module, and is re-exported here. Everything that chooses by task
(`lengthwise eval`, `lengthwise tempscale tune`, the experiments) reads it from here, so a new task is added in one
place. Importing this module loads neither torch nor sentence-transformers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias, TypeVar

from lengthwise.evaluation.config import SelfHits, Task

if TYPE_CHECKING:
    from lengthwise.core.bins import LengthBins
    from lengthwise.core.data import PairSet
    from lengthwise.core.embed import TokenView
    from lengthwise.core.encoder import TextEncoder
    from lengthwise.evaluation.classification import ClassificationResult
    from lengthwise.evaluation.config import ClassificationConfig, RetrievalConfig
    from lengthwise.evaluation.data import LabelledTexts, RetrievalData
    from lengthwise.evaluation.retrieval import RetrievalResult
    from lengthwise.evaluation.sts import STSResult

__all__ = [
    "HF_PREFIX",
    "MTEB_DROPS_SELF_HITS",
    "ClassificationSplits",
    "TaskData",
    "TaskResult",
    "data_name",
    "drops_self_hits",
    "evaluate_loaded",
    "load_task_data",
]

HF_PREFIX = "hf:"  # `--data hf:NAME` reads a dataset from the Hugging Face hub (online only)


# The retrieval data sets whose MTEB task sets ``ignore_identical_ids = True`` (mteb 2.26: 51 tasks), by the last
# part of their hub path, lower-cased — which is also the folder name of the BEIR downloads (arguana, quora, …).
# tests/evaluation checks this list against the installed mteb.
MTEB_DROPS_SELF_HITS = frozenset(
    {
        "arguana", "arguana-fa-v2", "arguana-pl", "beir-nl-arguana", "beir-nl-fever", "beir-nl-fiqa",
        "beir-nl-mmarco", "beir-nl-quora", "bsardretrieval.v2", "ecomretrieval", "feedbackqaretrieval", "fever",
        "fever_fa_test_top_250_only_w_correct-v2", "fever_test_top_250_only_w_correct-v2", "fiqa",
        "fiqa-decontaminated", "fiqa-fa-v2", "fiqa-pl", "jacwirretrieval", "jagovfaqsretrieval", "medicalretrieval",
        "mlquestions", "mmarcoretrievalmultilingual", "msmarco", "msmarco-fa", "msmarco-pl",
        "msmarco-plhardnegatives", "msmarco_fa_test_top_250_only_w_correct-v2",
        "msmarco_test_top_250_only_w_correct-v2", "mteb-nl-bbsard", "mteb-nl-legalqa-pr",
        "nlpjournalabsarticleretrieval", "nlpjournalabsarticleretrieval.v2", "persian-web-document-retrieval",
        "quora", "quora-decontaminated", "quora-fa-v2", "quoraretrieval_test_top_250_only_w_correct-v2",
        "ria-news-retrieval", "rianewsretrieval_test_top_250_only_w_correct-v2", "ru_sci_bench_cite_retrieval",
        "ru_sci_bench_cocite_retrieval", "rubq-retrieval", "synthetic-persian-chatbot-rag-faq-retrieval",
        "synthetic-persian-chatbot-rag-topics-retrieval", "synthetic-persian-chatbot-topics-retrieval",
        "synthetic-persian-qa-retrieval", "t2retrieval", "trec-dl-2019", "trec-dl-2020", "videoretrieval",
    }
)  # fmt: skip


def data_name(data: str | Path) -> str:
    """The data set's name: the last part of a ``hf:`` path or of a local path, lower-cased (``arguana``)."""
    text = str(data).removeprefix(HF_PREFIX).rstrip("/\\")
    return text.replace("\\", "/").rsplit("/", 1)[-1].lower()


def drops_self_hits(mode: SelfHits | str, data: str | Path) -> bool:
    """Whether retrieval on `data` drops a retrieved document whose id is the query id.

    ``keep``/``drop`` say so outright; ``auto`` follows the task as MTEB does: drop for the data sets whose MTEB
    task sets ``ignore_identical_ids`` (`MTEB_DROPS_SELF_HITS`, matched by `data_name`), keep for all others.
    """

    chosen = SelfHits(mode)
    if chosen is SelfHits.auto:
        return data_name(data) in MTEB_DROPS_SELF_HITS
    return chosen is SelfHits.drop


class ClassificationSplits(NamedTuple):
    """The train split the classifiers fit on and the test split they are scored on."""

    train: LabelledTexts
    test: LabelledTexts

    @property
    def source(self) -> str:
        return self.test.source

    def describe(self) -> dict[str, Any]:
        return {"source": self.test.source, "train": self.train.describe(), "test": self.test.describe()}


TaskData: TypeAlias = "PairSet | RetrievalData | ClassificationSplits"  # what `load_task_data` returns
TaskResult: TypeAlias = "STSResult | RetrievalResult | ClassificationResult"  # what `evaluate_loaded` returns


def load_task_data(
    task: Task,
    data: str | Path,
    *,
    split: str = "test",
    train: Path | None = None,
    max_train: int | None = None,
    max_test: int | None = None,
    seed: int = 42,
) -> TaskData:
    """Read a task's data: a local path (file or folder, see `lengthwise.evaluation.data`) or ``hf:NAME``.

    STS: a pairs file or SentEval folder. Retrieval: a BEIR folder and its qrels `split`. Classification: a folder
    with ``train.jsonl``/``test.jsonl``, or the test JSONL with `train` beside it; each split is stratified-sampled
    to `max_train`/`max_test` texts (None: all). Raises `DataFormatError` naming the file and the fix.
    """
    from lengthwise.core.errors import DataFormatError
    from lengthwise.evaluation import data as local
    from lengthwise.evaluation import hub

    text = str(data)
    from_hub = text.startswith(HF_PREFIX)
    name = text.removeprefix(HF_PREFIX)
    if not from_hub and not Path(text).exists():
        raise DataFormatError(None, None, f"{text}: no such file or directory (use {HF_PREFIX}NAME for a hub dataset)")
    if task is Task.sts:
        return hub.load_hf_sts(name, split) if from_hub else local.read_sts(text)
    if task is Task.retrieval:
        return hub.load_hf_retrieval(name, split) if from_hub else local.read_beir(text, split)
    if from_hub:
        train_set, test_set = hub.load_hf_classification(name, "train"), hub.load_hf_classification(name, split)
    elif train is not None:
        test_set = local.read_labelled(text)
        train_set = local.read_labelled(train, label_names=test_set.label_names)
    else:
        train_set, test_set = local.read_classification(text)
    return ClassificationSplits(
        local.sample_labelled(train_set, max_train, seed), local.sample_labelled(test_set, max_test, seed)
    )


def evaluate_loaded(
    task: Task,
    encoder: TextEncoder,
    data: TaskData,
    *,
    retrieval: RetrievalConfig | None = None,
    classification: ClassificationConfig | None = None,
    view: TokenView | None = None,
    bins: LengthBins | None = None,
    batch_size: int = 32,
    show_progress: bool = False,
) -> TaskResult:
    """Run `task`'s evaluator on data from `load_task_data`; `retrieval`/`classification` configure those tasks."""
    options: dict[str, Any] = {"view": view, "bins": bins, "batch_size": batch_size, "show_progress": show_progress}
    if task is Task.sts:
        from lengthwise.core.data import PairSet
        from lengthwise.evaluation.sts import evaluate_sts

        return evaluate_sts(encoder, _expect(data, PairSet, task), **options)
    if task is Task.retrieval:
        from lengthwise.evaluation.data import RetrievalData
        from lengthwise.evaluation.retrieval import evaluate_retrieval

        return evaluate_retrieval(encoder, _expect(data, RetrievalData, task), retrieval, **options)
    from lengthwise.evaluation.classification import evaluate_classification

    splits = _expect(data, ClassificationSplits, task)
    return evaluate_classification(encoder, splits.train, splits.test, classification, **options)


_Data = TypeVar("_Data")


def _expect(data: object, kind: type[_Data], task: Task) -> _Data:
    if not isinstance(data, kind):
        raise TypeError(f"task {task.value} needs {kind.__name__} (from load_task_data), not {type(data).__name__}")
    return data
