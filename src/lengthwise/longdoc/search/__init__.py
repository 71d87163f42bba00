"""Searching an encoded corpus: `LongIndex` (`index`), the one index over the shards `lengthwise.longdoc.storage`
wrote. Its dense side is an ANN engine over the window vectors, rescored exactly; its lexical side is BM25 over the
documents' text (`lexical`); `hybrid` fuses the two and cuts each hit's passages. `_staging` builds the index folder
in steps that survive a kill.
"""
