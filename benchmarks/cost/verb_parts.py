"""The verbs' CPU in process, without HTTP: where the cost study's *verbs* column goes.

``python -m benchmarks.cost.verb_parts`` runs the verbs as ``benchmarks.record.path.templates`` does (the
simulator's 1000-node cluster, the demo profiles, a traffic snapshot every 15 s, the herd estimate on), each filter
sent the names kube-scheduler would send it (a new window for every pod, unless ``--full-lists``) and prioritize
the names filter passed, and reads this thread's CPU (``time.thread_time``) over each pod's filter and prioritize
calls and the encoding of their spool records: what the web process spends per pod before the bind, without HTTP,
the spool append or the bind. ``--fixed-window`` sends every filter the same window: what the verbs would spend if
every per-node column were already known (a bound for any memo of the candidates). ``--profile N`` prints the N most
expensive functions of one more round (cProfile, which slows what it measures: its figures are shares, not times).
For an A/B, run it in each checkout, alternately.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import time
from types import TracebackType

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


class CpuMeter:
    """Adds up this thread's CPU over each ``with`` block, optionally under a profiler."""

    def __init__(self, profiler: cProfile.Profile | None = None) -> None:
        self.spent = 0.0
        self.profiler = profiler
        self._started = 0.0

    def __enter__(self) -> CpuMeter:
        if self.profiler is not None:
            self.profiler.enable()
        self._started = time.thread_time()
        return self

    def __exit__(self, *exc: tuple[type[BaseException], BaseException, TracebackType] | None) -> None:
        self.spent += time.thread_time() - self._started
        if self.profiler is not None:
            self.profiler.disable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=600, help="pods per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=1000)
    lists = parser.add_mutually_exclusive_group()
    lists.add_argument("--full-lists", action="store_true", help="every filter is sent every node's name")
    lists.add_argument(
        "--fixed-window", action="store_true", help="every filter is sent the same window (every column memoized)"
    )
    parser.add_argument("--profile", type=int, default=0, help="profile one more round; print the N top functions")
    parser.add_argument("--sort", default="tottime", help="the profile's order (a pstats sort key)")
    args = parser.parse_args()

    from benchmarks.record.path import templates

    spent: list[float] = []
    for _ in range(args.rounds):
        meter = CpuMeter()
        templates(args.pods, args.nodes, windows=not args.full_lists, fixed_window=args.fixed_window, meter=meter)
        spent.append(meter.spent / args.pods * 1000)
    lists = "every node's name" if args.full_lists else "kube-scheduler's windows"
    lists = "the same window for every pod" if args.fixed_window else lists
    print(
        f"verbs' CPU ms per pod (filter + prioritize + their records, {args.pods} pods a round, {args.nodes} nodes, "
        f"{lists}): median {statistics.median(spent):.3f} of {args.rounds} rounds ({min(spent):.3f}-{max(spent):.3f})"
    )
    if args.profile:
        profiler = cProfile.Profile(time.thread_time)
        meter = CpuMeter(profiler)
        templates(args.pods, args.nodes, windows=not args.full_lists, fixed_window=args.fixed_window, meter=meter)
        pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.profile)


if __name__ == "__main__":
    main()
