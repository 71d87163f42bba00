"""Length-aware training objectives on the sentence-transformers trainer (METHODS §3)."""

from lengthwise.training.config import Method, TrainConfig
from lengthwise.training.run import TrainResult, train

__all__ = ["Method", "TrainConfig", "TrainResult", "train"]
