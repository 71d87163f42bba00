"""Pair audits (METHODS §1): the elongation attack over text pairs, its shift statistics, presets and the
sentence-transformers evaluator that runs it during training.

`shift` is pure maths (similarity shift, JSD and its permutation null); `attack` runs a model over the pairs;
`presets` names the papers' settings; `evaluator` wraps `attack` for a trainer.
"""
