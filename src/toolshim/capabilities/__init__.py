"""Capabilities: what each model can do, where that was learned, and where it is kept."""

from toolshim.capabilities.facts import FACT_NAMES, Fact, Source, Support, merge, strongest
from toolshim.capabilities.profiles import ProfileTable, normalize_name, shipped_profiles
from toolshim.capabilities.registry import ANY_UPSTREAM, ModelReport, Registry
from toolshim.capabilities.rejections import REJECTIONS, Rejection, match_rejection
from toolshim.capabilities.store import DocumentStore, FactStore, default_store_path, redact_url
from toolshim.capabilities.stores import open_store
from toolshim.capabilities.stores.sqlite import CapabilityStore, SQLiteStore

__all__ = [
    "ANY_UPSTREAM",
    "FACT_NAMES",
    "REJECTIONS",
    "CapabilityStore",
    "DocumentStore",
    "Fact",
    "FactStore",
    "ModelReport",
    "ProfileTable",
    "Registry",
    "Rejection",
    "SQLiteStore",
    "Source",
    "Support",
    "default_store_path",
    "match_rejection",
    "merge",
    "normalize_name",
    "open_store",
    "redact_url",
    "shipped_profiles",
    "strongest",
]
