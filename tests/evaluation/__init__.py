"""Tests of lengthwise.evaluation (a package so the tests can share helpers in conftest.py)."""
