"""The record of one verb call: its types (``structs``), its bytes in the spool (``spool_codec``), the frozen formulas
of its derived columns (``formulas``), the compressors (``compression``) and the bind intents reconciled against the
API server (``bind_intents``).

A stored format is a promise (pinned by ``tests/golden``). May import ``extender.protocol`` and ``extender.lru``,
never scoring: the plugins' names a record carries are defined here, and the plugins take them from here.
"""
