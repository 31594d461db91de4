"""The bulk load: the disk check before it, ``--cycles`` copies of the templates written by ``COPY`` in id order
with the audit chain linked, their node postings and tallies, and the load's figures kept for ``--reuse``."""

from __future__ import annotations

import hashlib
import io
import queue
import random
import shutil
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.dashboard import history as bench_dashboard
from benchmarks.dashboard.history import copy_text
from benchmarks.history_scale.templates import SIZES, Template, TemplateCall

POSTING_BITS = 256
SIZE_WEIGHTS = (3, 4, 3)
"""How often each cluster size owns a posting block."""
DECKS = 4
"""Arrangements of templates over a block's 256 cycles, per size."""
BLOCKS_PER_CHUNK = 80
INGEST_LAG = timedelta(milliseconds=400)
"""Between a cycle's last call and the ingester storing its calls (the spool's batching)."""
BYTES_PER_CYCLE = 4000
"""The disk estimate per cycle before anything is loaded (tables, indexes, postings, WAL): generous on purpose."""
DISK_MARGIN = 1.5


def data_directory() -> Path:
    import psycopg

    from benchmarks.common import ADMIN_URL

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        (directory,) = conn.execute("SHOW data_directory").fetchone()  # type: ignore[misc]
    return Path(directory)


def check_disk(cycles: int, bytes_per_cycle: int) -> str:
    try:
        where = data_directory()
        free = shutil.disk_usage(where).free
    except Exception:
        where = Path("/")
        free = shutil.disk_usage(where).free
    need = int(cycles * bytes_per_cycle * DISK_MARGIN)
    text = (
        f"disk: {cycles:,} cycles × {bytes_per_cycle:,} B × {DISK_MARGIN} margin = {need / 1e9:.1f} GB needed, "
        f"{free / 1e9:.1f} GB free at {where}"
    )
    if free < need:
        raise SystemExit(f"refusing to load: {text} (fewer --cycles, or free some space)")
    return text


@dataclass
class Deck:
    size: int
    slots: list[int]
    """Template index of each of a block's 256 cycles."""
    postings: dict[str, str]
    """Each candidate node's bits over the block."""
    tally: Counter[int]


def make_decks(templates: list[Template], rng: random.Random) -> dict[int, list[Deck]]:
    decks: dict[int, list[Deck]] = {}
    for size in SIZES:
        own = [i for i, t in enumerate(templates) if t.size == size]
        bound = [i for i in own if templates[i].outcome == "bound"]
        unschedulable = [i for i in own if templates[i].outcome == "unschedulable"]
        errors = [i for i in own if templates[i].outcome == "error"]
        decks[size] = []
        for _ in range(DECKS):
            slots = []
            for _slot in range(POSTING_BITS):
                roll = rng.random()
                pool = errors if roll < 0.01 and errors else unschedulable if roll < 0.06 and unschedulable else bound
                slots.append(rng.choice(pool))
            masks: dict[str, int] = {}
            for offset, index in enumerate(slots):
                for name in set(templates[index].candidates):
                    masks[name] = masks.get(name, 0) | 1 << (POSTING_BITS - 1 - offset)
            postings = {name: f"{bits:0{POSTING_BITS}b}" for name, bits in masks.items()}
            decks[size].append(Deck(size, slots, postings, Counter(slots)))
    return decks


_BASE27 = "bcdfghjklmnpqrstvwxz2456789"


def _suffix(n: int) -> str:
    out = []
    for _ in range(5):
        n, digit = divmod(n, 27)
        out.append(_BASE27[digit])
    return "".join(out)


@dataclass
class LoadResult:
    seconds: float
    cycles: int
    calls: int
    postings: int
    first_day: date
    end: datetime
    outcomes: Counter[str]
    sizes: Counter[int]


def bulk_load(
    templates: list[Template],
    cycle_columns: list[str],
    call_columns: list[str],
    counts: dict[int, Any],
    *,
    total: int,
    first_day: date,
    end: datetime,
    url: str,
) -> LoadResult:
    import psycopg
    from django.db import connection

    from dashboard.audit.chain import GENESIS
    from dashboard.storage.call_body_read import body_referring_to

    ci = {name: i for i, name in enumerate(cycle_columns)}
    vi = {name: i for i, name in enumerate(call_columns)}
    decks = make_decks(templates, random.Random(20))
    block_rng = random.Random(21)
    origin = datetime.combine(first_day, datetime.min.time(), tzinfo=UTC)
    step = (end - origin).total_seconds() / total
    cycle_copy = f"COPY dashboard_schedulingcycle ({', '.join(cycle_columns)}) FROM STDIN"
    call_copy = f"COPY dashboard_verbcall ({', '.join(call_columns)}) FROM STDIN"
    posting_copy = "COPY dashboard_nodeposting (node, block, bits) FROM STDIN"
    work: queue.Queue[tuple[str, str, str] | None] = queue.Queue(maxsize=2)
    failure: list[BaseException] = []

    def writer() -> None:
        # A connection of its own: COPY waits on the socket without the GIL, while the main thread renders the next
        # chunk.
        try:
            with psycopg.connect(url) as conn:
                while (item := work.get()) is not None:
                    with conn.cursor() as cursor:
                        for statement, text in zip((cycle_copy, call_copy, posting_copy), item, strict=True):
                            with cursor.copy(statement) as copy:
                                copy.write(text)
                    conn.commit()
        except BaseException as exc:
            failure.append(exc)
            while work.get() is not None:
                pass

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    started = time.perf_counter()
    head = GENESIS
    sha = hashlib.sha256
    copies: Counter[int] = Counter()
    outcomes: Counter[str] = Counter()
    sizes: Counter[int] = Counter()
    postings = 0
    call_id = 1
    last_recorded = origin
    n = 0  # cycles written; cycle ids are 1..total, so block 0 holds 255 of them
    first_block, last_block = 0, total // POSTING_BITS
    block = first_block
    checked = False
    size_choices = [size for size, weight in zip(SIZES, SIZE_WEIGHTS, strict=True) for _ in range(weight)]
    while block <= last_block:
        cycles_buf, calls_buf, postings_buf = io.StringIO(), io.StringIO(), io.StringIO()
        for block in range(block, min(last_block + 1, block + BLOCKS_PER_CHUNK)):  # noqa: B020
            deck = block_rng.choice(decks[block_rng.choice(size_choices)])
            low = max(1, block * POSTING_BITS)
            high = min(total + 1, (block + 1) * POSTING_BITS)
            if low >= high:
                continue
            for name, bits in deck.postings.items():
                postings_buf.write(f"{copy_text(name)}\t{block}\t{bits}\n")
            postings += len(deck.postings)
            for cycle_id in range(low, high):
                index = deck.slots[cycle_id % POSTING_BITS]
                template = templates[index]
                copies[index] += 1
                outcomes[template.outcome] += 1
                sizes[template.size] += 1
                at = origin + timedelta(seconds=(cycle_id - 1) * step)
                offset = at - template.started_at
                fields = list(template.cycle)
                fields[ci["id"]] = str(cycle_id)
                if template.candidates:
                    fields[ci["candidate_slot"]] = str(cycle_id)
                fields[ci["pod_name"]] = copy_text(f"{template.pod_name[:-5]}{_suffix(cycle_id)}")
                fields[ci["pod_uid"]] = str(uuid.UUID(int=cycle_id))
                fields[ci["started_at"]] = at.isoformat()
                finished = template.finished_at + offset
                fields[ci["finished_at"]] = finished.isoformat()
                cycles_buf.write("\t".join(fields))
                cycles_buf.write("\n")
                recorded = max(finished + INGEST_LAG, last_recorded + timedelta(microseconds=1))
                new_ids = {call.event_id: f"{call_id + i:032x}" for i, call in enumerate(template.calls)}
                for position, call in enumerate(template.calls):
                    out = list(call.fields)
                    event_id = new_ids[call.event_id]
                    call_start = call.started_at + offset
                    out[vi["id"]] = str(call_id)
                    out[vi["cycle_id"]] = str(cycle_id)
                    out[vi["event_id"]] = event_id
                    out[vi["started_at"]] = call_start.isoformat()
                    stamp = recorded + timedelta(microseconds=position)
                    out[vi["recorded_at"]] = stamp.isoformat()
                    pieces = call.content
                    micros = str((call_start - _EPOCH) // _MICROSECOND)
                    if call.rewrites_body:
                        body = body_referring_to(call.body, new_ids)  # type: ignore[arg-type]
                        out[vi["body"]] = copy_text(body)
                        content = "".join(
                            (
                                pieces[0],
                                sha(body).hexdigest(),
                                pieces[1],
                                repr(float(cycle_id)),
                                pieces[2],
                                f'"{event_id}"',
                                pieces[3],
                                micros,
                                pieces[4],
                            )
                        )
                    else:
                        content = "".join(
                            (pieces[0], repr(float(cycle_id)), pieces[1], f'"{event_id}"', pieces[2], micros, pieces[3])
                        )
                    if not checked:
                        expected = _check_content(
                            call, cycle_id, event_id, call_start, body if call.rewrites_body else None
                        )
                        assert content == expected, (content, expected)
                    head = sha(head.encode("ascii") + b"\n" + content.encode("ascii")).hexdigest()
                    out[vi["chain_hash"]] = head
                    calls_buf.write("\t".join(out))
                    calls_buf.write("\n")
                    call_id += 1
                last_recorded = recorded + timedelta(microseconds=len(template.calls))
                n += 1
            checked = True
        block += 1
        if failure:
            break
        work.put((cycles_buf.getvalue(), calls_buf.getvalue(), postings_buf.getvalue()))
        if n // 500_000 != max(0, n - BLOCKS_PER_CHUNK * POSTING_BITS) // 500_000 or n == total:
            print(f"  loaded {n:,} cycles in {time.perf_counter() - started:.0f} s", flush=True)
    work.put(None)
    thread.join()
    if failure:
        raise failure[0]
    bench_dashboard.tallies_add_copies(counts, copies)
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('dashboard_schedulingcycle', 'id'), %s)", [n])
        cursor.execute("SELECT setval('dashboard_verbcall_id_seq', %s)", [call_id - 1])
        cursor.execute("UPDATE dashboard_sharedpart SET last_used_at = %s", [end])
        # What autovacuum did over the month the history took to grow.
        cursor.execute("VACUUM (ANALYZE)")
    return LoadResult(time.perf_counter() - started, n, call_id - 1, postings, first_day, end, outcomes, sizes)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _check_content(call: TemplateCall, cycle_id: int, event_id: str, start: datetime, body: bytes | None) -> str:
    """The split content put together again is exactly what ``call_content`` gives for the copy."""
    from dashboard.audit.chain import call_content

    values = {**call.values, "cycle_id": cycle_id, "event_id": event_id, "started_at": start}
    if body is not None:
        values["body"] = body
    return call_content(values).decode("ascii")


def save_load(load: LoadResult, templates_seconds: float) -> None:
    """The load's figures, kept in the database for a later ``--reuse`` to report."""
    import json

    from django.db import connection

    doc = {
        "seconds": load.seconds,
        "cycles": load.cycles,
        "calls": load.calls,
        "postings": load.postings,
        "first_day": load.first_day.isoformat(),
        "end": load.end.isoformat(),
        "outcomes": dict(load.outcomes),
        "sizes": {str(k): v for k, v in load.sizes.items()},
        "templates_seconds": templates_seconds,
    }
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_load (doc jsonb)")
        cursor.execute("INSERT INTO bench_load VALUES (%s)", [json.dumps(doc)])


def read_load() -> tuple[LoadResult | None, float | None]:
    import json

    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('bench_load') IS NOT NULL")
        if not cursor.fetchone()[0]:
            return None, None
        cursor.execute("SELECT doc FROM bench_load LIMIT 1")
        found = cursor.fetchone()
    if found is None:
        return None, None
    doc = found[0] if isinstance(found[0], dict) else json.loads(found[0])
    load = LoadResult(
        doc["seconds"],
        doc["cycles"],
        doc["calls"],
        doc["postings"],
        date.fromisoformat(doc["first_day"]),
        datetime.fromisoformat(doc["end"]),
        Counter(doc["outcomes"]),
        Counter({int(k): v for k, v in doc["sizes"].items()}),
    )
    return load, doc["templates_seconds"]
