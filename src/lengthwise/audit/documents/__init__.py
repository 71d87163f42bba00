"""Document audits (METHODS §1): length probe, intra-document similarity, isotropy, length collapse, the
repeated-words curve and the attention filter rate σ_a.

`metrics` and `probe` are pure maths; `corpus` reads the documents; `documents` runs a model over them.
"""
