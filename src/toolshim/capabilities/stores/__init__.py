"""The capability stores, one module per kind: :mod:`.sqlite` (the default; opening the file is
:mod:`.sqlite_opening`), :mod:`.postgres` and :mod:`.redis` (shared by several replicas).

They implement :class:`~toolshim.capabilities.store.FactStore`, and
:func:`~toolshim.capabilities.store.open_store` picks one from a ``--registry`` value. Nothing is
imported here: the PostgreSQL and Redis clients are optional and load with their store."""
