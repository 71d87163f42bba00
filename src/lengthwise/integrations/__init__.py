"""Retrievers for the RAG frameworks: a `lengthwise.LongIndex` (a local folder or one loaded into Milvus) or a running
`lengthwise serve` as a LangChain, LlamaIndex or Haystack retriever (docs/integrations.md).

Each framework has its module, which imports the framework when it is imported itself (`import lengthwise` never
does): `langchain` (``pip install 'lengthwise[langchain]'``), `llamaindex` (``lengthwise[llamaindex]``), `haystack`
(``lengthwise[haystack]``). What they share, the search and the hits as text with metadata, is in `_common`.

Example:
    >>> from lengthwise.integrations.langchain import LengthwiseRetriever          # doctest: +SKIP
    >>> LengthwiseRetriever(index="out/index", k=5).invoke("what causes scurvy?")  # doctest: +SKIP
"""
