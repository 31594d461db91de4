"""How every fixture under ``tests/golden/`` was made: once, each by the commit that wrote its form. For the record:
the tests read the committed bytes and never run this script (``docs/stored-formats.md``).

A form the current code no longer writes was written by the last commit that wrote it, checked out on its own::

    git worktree add --detach /tmp/h1/wt-json 73e21e2 && ln -s "$PWD/.venv" /tmp/h1/wt-json/.venv
    cd /tmp/h1/wt-json && DJANGO_SETTINGS_MODULE=config.settings DATABASE_URL=... \\
        .venv/bin/python /path/to/tests/golden/make_fixtures.py json /path/to/tests/golden

The script imports its parts from its own folder (``make_fixtures_*.py`` beside it: the inputs, the
``Writer`` and the writers per stored form), then puts the worktree first on ``sys.path`` (and checks that the
writer's modules come from there), so each fixture holds what that commit's own code wrote. Nothing needs the
database (``django.setup()`` only for the audit chain's module).

Writers (name: commit, what it wrote):

- ``json`` @ 73e21e2, the last commit that spooled every call as JSON
(``scheduler_core.extender.record.structs.encode_event``) and
  stored every record in the ``jsonb`` columns (packed by ``dashboard.packing.pack`` when large, since 5ec3f36):
  ``spool/json_{filter,prioritize,preempt}``, ``columns/packed_filter_*`` and ``audit/link_json_call``.
- ``spool-file-v0`` @ cd27837, the last spool file without the ``answered`` column (``dashboard.spool.Spool``):
  ``spool_files/spool_before_answered``.
- ``binary-first`` @ d1823d4, the first commit that spooled ``SLR\\x01`` (19 positional fields, no
  ``answer_derived``): ``spool/binary_first_{filter,prioritize}``.
- ``binary-last`` @ 7022a8e, the last commit that spooled ``SLR\\x01`` and ``SLR\\x02`` (20 fields):
  ``spool/binary_{filter,prioritize,preempt}``, ``spool/binary_derived_prioritize``.
- ``body1`` @ 258a538, the last commit that stored call bodies in format 1 (``dashboard.packing.body_encode``):
  ``bodies/body1_{filter,prioritize,preempt}``, ``audit/link_body1_call``.
- ``current`` @ 1173deb, forms still written: ``SLR\\x03``, JSON bind and refused calls, body format 2 with its
  shared part, packed and plain columns, the spool file with ``answered`` and ``rejected``:
  ``spool/framed_*``, ``spool/json_{bind,refused}``, ``spool_files/spool_current``, ``bodies/body2_*``,
  ``bodies/part-<sha256>``, ``columns/packed_prioritize_*``, ``columns/plain_bind_*``, ``audit/link_json_bind``.
- ``bind-intents`` @ the commit that adds bind intents (issue 20, item 6), the first to write them: a bind intent
  (JSON, ``scheduler_core.extender.record.spool_codec.encode_intent``) and the spool file with the ``bind_intents``
  table: ``spool/intent_json``, ``spool_files/spool_with_intents``. Written from the working tree itself::

    DJANGO_SETTINGS_MODULE=config.settings .venv/bin/python tests/golden/make_fixtures.py bind-intents /tmp/out

- ``pod-assumed`` @ the commit that adds ``PluginScores.pod_assumed`` (issue 32, item 4), the first to write it: a
  ``SLR\\x03`` prioritize whose NetworkTraffic carries a learned ``pod_assumed``:
  ``spool/framed_prioritize_pod_assumed``. Written from the working tree itself, like ``bind-intents``.

- ``herd-reconciled`` @ the commit that adds ``PluginScores.herd_reconciled`` (issue 32, item 3), the first to write
  it: a ``SLR\\x03`` prioritize whose NetworkTraffic counted two binds by their pods' own traffic:
  ``spool/framed_prioritize_herd_reconciled``. Written from the working tree itself, like ``pod-assumed``.

- ``derived-scores`` @ the commit that adds ``SLR\\x04`` (issue 30), the first to write it: a filter, and a
  prioritize whose final scores and NetworkTraffic's scores are left out because its other columns give them back:
  ``spool/deriving_{filter,prioritize}``. Written from the working tree itself, like ``pod-assumed``.

- ``body-as-spooled`` @ the commit that adds body format 3 (issue 30), the first to store it: the same two records
  stored as the verb spooled them: ``bodies/body3_{filter,prioritize}``. Written from the working tree itself.

Each ``<fixture>.json`` beside the bytes says which form and writer, and holds the expected values: the inputs
(``make_fixtures_inputs.py``), written there by hand and handed to the writer, never the writer's output read
back. A field the writer's version did not have is expected at the value written by hand in ``LATER`` (what a
record from before it means).

Modules: ``make_fixtures_inputs.py`` (the inputs, ``LATER``, ``DEFAULTS``), ``make_fixtures_writer.py``
(``Writer``: the old checkout's own modules, imported lazily, write and save each form),
``make_fixtures_spool.py`` (writers ``json``, ``spool-file-v0``, ``binary-first``, ``binary-last``) and
``make_fixtures_bodies.py`` (writers ``body1``, ``current``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from make_fixtures_bodies import write_body1, write_body_as_spooled, write_current
from make_fixtures_spool import (
    write_binary_first,
    write_binary_last,
    write_bind_intents,
    write_derived_scores,
    write_herd_reconciled,
    write_json,
    write_pod_assumed,
    write_spool_file_v0,
)
from make_fixtures_writer import Writer


def main() -> None:
    name, out = sys.argv[1], Path(sys.argv[2]).resolve()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    writer = Writer(name, out)
    {
        "json": write_json,
        "spool-file-v0": write_spool_file_v0,
        "binary-first": write_binary_first,
        "binary-last": write_binary_last,
        "body1": write_body1,
        "current": write_current,
        "bind-intents": write_bind_intents,
        "pod-assumed": write_pod_assumed,
        "herd-reconciled": write_herd_reconciled,
        "derived-scores": write_derived_scores,
        "body-as-spooled": write_body_as_spooled,
    }[name](writer)


if __name__ == "__main__":
    main()
