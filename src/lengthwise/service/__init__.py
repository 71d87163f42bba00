"""`lengthwise serve`: a `lengthwise index build` folder behind HTTP (FastAPI + uvicorn).

`serve(folder, ServeConfig(...))` opens and checks the index, loads the model once, and answers `POST /search`
(`lengthwise search --json`'s hits), `POST /embed`, `GET /health`, `GET /info` and `GET /` (a search page), with the
queries of concurrent requests batched through the encoder, pipelined with the index search on a second thread.
FastAPI and uvicorn are imported only when a server is made (``pip install 'lengthwise[serve]'``). See docs/serving.md.
"""

from __future__ import annotations

from lengthwise.service.config import Limits, ServeConfig
from lengthwise.service.run import open_checked, serve

__all__ = ["Limits", "ServeConfig", "open_checked", "serve"]
