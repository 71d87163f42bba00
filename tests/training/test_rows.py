"""Dataset rows: sentence pieces keep the tokens a byte-level BPE tokenizer gives them inside the whole text."""

from __future__ import annotations

import pytest

from lengthwise.core.tokens import content_ids, split_sentences
from lengthwise.training._rows import prepare_rows, sentence_pieces
from lengthwise.training._views import coco_dr_view
from lengthwise.training.config import TrainConfig
from lengthwise.training.data import TrainingData

TEXT = "The cat sat on the mat. Then it slept for hours!  Did it dream of mice? Yes, it did."
CORPUS = [TEXT, "Another text about cats and mats. It has sentences too.", "Dreams of mice and hours of sleep."] * 20


@pytest.fixture(scope="module")
def byte_level_bpe():
    """A tiny RoBERTa-style tokenizer (byte-level BPE, <s> … </s>) trained here: no RoBERTa weights are offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>"))
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
    )


def _joined(tokenizer, texts: list[str]) -> list[int]:
    return [token for ids in content_ids(tokenizer, texts) for token in ids]


def test_sentence_pieces_tokenise_like_the_whole_text_with_byte_level_bpe(byte_level_bpe) -> None:
    """13.24: sentences tokenised one at a time lost the leading-space token (Ġ) of every sentence but the first."""
    whole = byte_level_bpe(TEXT, add_special_tokens=False)["input_ids"]
    pieces = sentence_pieces(TEXT)
    assert [piece.strip() for piece in pieces] == split_sentences(TEXT)
    assert "".join(pieces) == TEXT  # nothing lost, nothing added: the gaps are whitespace only
    assert _joined(byte_level_bpe, pieces) == whole
    assert _joined(byte_level_bpe, split_sentences(TEXT)) != whole  # the old way: the check can fail


def test_document_rows_and_views_carry_the_whole_texts_tokens(byte_level_bpe) -> None:
    config = TrainConfig(method="coco-dr", data="d", out="o")  # type: ignore[arg-type]
    data = TrainingData("mem", texts=(TEXT, CORPUS[1]))
    rows = prepare_rows(config, data, byte_level_bpe, max_content=200)
    sentences = content_ids(byte_level_bpe, rows[0]["sentences"])
    import random

    view = coco_dr_view(sentences, 200, random.Random(0))
    assert view.anchor + view.positive == byte_level_bpe(TEXT, add_special_tokens=False)["input_ids"]


def test_wordpiece_pieces_are_unchanged(minilm_path: str) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    assert content_ids(tokenizer, sentence_pieces(TEXT)) == content_ids(tokenizer, split_sentences(TEXT))


def test_pieces_survive_text_the_splitter_changes() -> None:
    assert sentence_pieces("One.") == ["One."]
    pieces = sentence_pieces("First part.\n\nSecond part.\tThird part.")
    assert [p.strip() for p in pieces] == ["First part.", "Second part.", "Third part."]
    assert pieces[1].startswith("\n\n") and pieces[2].startswith("\t")
