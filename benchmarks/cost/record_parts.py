"""What reading a spooled record costs the ingester before the database, and what the ``Explained`` Event's summary
costs: the parts of the cost study's *ingest* column that a header beside the record could spare.

``python -m benchmarks.cost.record_parts`` makes real cycles of a 1000-node cluster (``benchmarks.record.path``'s
templates: the verbs' own records, each filter sent kube-scheduler's window of names), spooled in the form
``SCHEDLENS_SPOOL_FORM`` gives, and reads this thread's CPU (``time.thread_time``) for each part, per record of each
verb, as ``dashboard.ingest.spool_ingest.ready_calls`` does it:

* *decode*: ``decode_event`` (the answer left derived, as the ingester reads it);
* *+ sanitize*: and ``sanitize_for_postgres`` (the NUL and length checks);
* *+ build*: ``ready_calls`` itself, which goes on to ``build_call`` (the new call: its summary, its stored body);

and per cycle, from the decoded records, the Event's summary (``scheduler_core.explanation.explain.explain_summary``, as
``dashboard.pod_events`` has it computed). Each round reads every record once, the codec's caches of decoded values
emptied first, so a round meets each record as the ingester does: once. The database, the chain and the Event's POST
are not in it (``benchmarks.cost.ingest_parts``, ``benchmarks.cost.bind_parts``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ["SCHEDLENS_INGEST_IN_PROCESS"] = "false"


def _clear_read_caches() -> None:
    # The reader keeps decoded values by their bytes: a record read twice would cost less than the ingester pays.
    from scheduler_core.extender.record import spool_codec

    for cache in (*spool_codec._read_frames.values(), *spool_codec._shared_values.values()):
        cache.clear()


def _per_item(items: list[Any], part: Callable[[Any], object], rounds: int) -> list[float]:
    """Microseconds of this thread's CPU per item, one figure per round."""
    spent = []
    for _ in range(rounds):
        _clear_read_caches()
        started = time.thread_time()
        for item in items:
            part(item)
        spent.append((time.thread_time() - started) / len(items) * 1e6)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings

    from benchmarks.record.path import templates
    from dashboard.ingest.sanitize import sanitize_for_postgres
    from dashboard.ingest.spool_ingest import ready_calls
    from dashboard.spool import SpoolRow
    from scheduler_core.explanation.explain import explain_summary
    from scheduler_core.extender.record.spool_codec import decode_event
    from scheduler_core.extender.record.structs import BIND, FILTER, PRIORITIZE

    cycles = templates(args.cycles, args.nodes, windows=True)
    by_verb: dict[str, list[bytes]] = {}
    for cycle in cycles:
        for raw in cycle:
            by_verb.setdefault(decode_event(raw).verb, []).append(raw)

    def decoded(raw: bytes) -> Any:
        return decode_event(raw, derive_answer=False)

    def sanitized(raw: bytes) -> Any:
        return sanitize_for_postgres(decoded(raw), raw)

    def built(raw: bytes) -> Any:
        return ready_calls([SpoolRow(0, raw, answered=True)], grace_seconds=0)

    form = settings.SCHEDLENS_SPOOL_FORM
    print(f"CPU us per record ({len(cycles)} cycles, {args.nodes} nodes, spool form {form}; median of {args.rounds}):")
    print("| verb | bytes | decode | + sanitize | + build |")
    print("| --- | --- | --- | --- | --- |")
    for verb in (FILTER, PRIORITIZE, BIND):
        records = by_verb.get(verb, [])
        if not records:
            continue
        size = sum(map(len, records)) / len(records)
        figures = [statistics.median(_per_item(records, part, args.rounds)) for part in (decoded, sanitized, built)]
        print(f"| {verb} | {size:.0f} | " + " | ".join(f"{f:.0f}" for f in figures) + " |")

    explained = []
    for cycle in cycles:
        events = {event.verb: event for event in map(decode_event, cycle)}
        bound = events.get(BIND)
        explained.append(
            (
                events[FILTER].filter if FILTER in events else None,
                events[PRIORITIZE].prioritize if PRIORITIZE in events else None,
                bound.bind.node if bound is not None and bound.bind is not None else "",
            )
        )

    def summary(item: Any) -> str:
        filtered, prioritize, chosen = item
        return explain_summary(filter_record=filtered, prioritize_record=prioritize, chosen_node=chosen)

    spent = _per_item(explained, summary, args.rounds)
    print(
        f"\nThe Explained Event's summary (explain_summary, from the decoded records): "
        f"{statistics.median(spent):.0f} us per cycle (median of {args.rounds} rounds, "
        f"{min(spent):.0f}-{max(spent):.0f})"
    )


if __name__ == "__main__":
    main()
