"""The package version, in one place: pyproject.toml reads it (setuptools `dynamic`), and reading it costs
no `importlib.metadata` scan of the installed distributions at start-up (about 40 ms of `lengthwise --help`)."""

__version__ = "0.2.0"
