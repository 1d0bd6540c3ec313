"""Tests of the dialects and the tolerant extraction layer."""
