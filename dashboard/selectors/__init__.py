"""The project's reads of the database, one module per entity: ``cycles`` (recorded cycles and their calls, as the
``scheduler_core.extender.record.structs`` types), ``nodes`` (per-node counts and traffic), ``profiles`` (the configured
profiles).

The traffic prefetch's and the history replays' reads live with their apps (``dashboard.traffic.selectors``,
``dashboard.replays.selectors``).
"""
