"""Capabilities: what each model can do, where that was learned, and where it is kept."""

from toolshim.capabilities.facts import FACT_NAMES, Fact, Source, Support, merge
from toolshim.capabilities.registry import Registry
from toolshim.capabilities.rejections import REJECTIONS, Rejection, match_rejection
from toolshim.capabilities.store import CapabilityStore, default_store_path

__all__ = [
    "FACT_NAMES",
    "REJECTIONS",
    "CapabilityStore",
    "Fact",
    "Registry",
    "Rejection",
    "Source",
    "Support",
    "default_store_path",
    "match_rejection",
    "merge",
]
