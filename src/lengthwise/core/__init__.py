"""The hall: what every room shares.

`tokens` (token-level views: elongation, first-k, segments, sentences), `embed` (the one batched forward),
`models` (resolve, load, fingerprint), `encoder` (the protocol every evaluator takes), `bins` (token-length
bins), `data` (readers), `errors` (`SettingError`, `DataFormatError`), `results` (atomic writes, provenance),
`output_set` (a folder of results swapped in as one unit, interrupts deferred). Modules starting with `_` are
internal.
Modules here import nothing from the rooms (`audit`, `tempscale`, `longdoc`, `evaluation`, `training`, `cli`).
"""
