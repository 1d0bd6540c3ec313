"""Tests of the capability registry: facts, store, profiles, discovery, probe, learning, CLI."""
