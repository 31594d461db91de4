"""What recording costs a verb, in process: the verb, encoding its record, appending it to the spool (p50, ms).

    .venv/bin/python -m benchmarks.verbs.record_encode --nodes 100 1000 5000 --pods 400

Same cluster, profiles and bodies as ``benchmarks/verbs`` (NodeNames, the demo profiles, synthetic traffic); each
pod is new, so the parts that repeat between records are those that repeat between kube-scheduler's calls: the
candidate list, the filter outcomes of a few kinds of pod, the traffic snapshot's column.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from benchmarks.verbs.measure import bodies, demo_extender
from dashboard.spool import Spool
from scheduler_core.extender.record.spool_codec import encode_event

WARM_UP = 10


def measure(node_count: int, pods: int) -> list[list[object]]:
    """Rows of (nodes, verb, verb p50, encode p50, append p50 in ms, record KB p50, n)."""
    cluster, extender = demo_extender(node_count)
    spool = Spool(tempfile.mkdtemp(prefix="schedlens-record-encode-"))
    payloads = bodies(cluster, pods + WARM_UP, True)
    rows: list[list[object]] = []
    for verb in ("filter", "prioritize"):
        handler = getattr(extender, verb)
        verb_ms, encode_ms, append_ms, sizes = [], [], [], []
        for i, body in enumerate(payloads):
            started = time.perf_counter()
            result = handler("default", body)
            answered = time.perf_counter()
            record = encode_event(result.event)
            encoded = time.perf_counter()
            spool.append(record, confirm_later=True)
            appended = time.perf_counter()
            if i >= WARM_UP:
                verb_ms.append((answered - started) * 1000)
                encode_ms.append((encoded - answered) * 1000)
                append_ms.append((appended - encoded) * 1000)
                sizes.append(len(record))
        median = statistics.median
        rows.append(
            [
                node_count,
                verb,
                f"{median(verb_ms):.3f}",
                f"{median(encode_ms):.3f}",
                f"{median(append_ms):.3f}",
                f"{median(sizes) / 1024:.1f}",
                len(sizes),
            ]
        )
    spool.close()
    return rows


COLUMNS = ["nodes", "verb", "verb p50", "encode p50", "append p50", "record KB p50", "n"]


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.verbs.record_encode", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--pods", type=int, default=400)
    args = parser.parse_args()
    print("  ".join(COLUMNS))
    for node_count in args.nodes:
        for row in measure(node_count, args.pods):
            print("  ".join(map(str, row)), flush=True)


if __name__ == "__main__":
    main()
