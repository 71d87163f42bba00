"""A corpus on disk, as the long-document encoder embeds it: checked, resumable shards and their Parquet rows.

`encode` (``lengthwise encode``) runs the encoder over a corpus, locally or on Ray (`_raydata`); `store` writes and
reads the shards (`EmbeddingStore`, `read_embeddings`, `iter_shards`); `_parquet` the window rows. Searching the
shards is `lengthwise.search`'s work.
"""
