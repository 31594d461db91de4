"""The exports with ``?include=explanation`` carry explanations that add up, like the why API's.

Hypothesis generates and records cycles as ``test_explanations_add_up`` does (``tests.support.explained_cycles``), then
reads them back through the exports:

- NDJSON: each line's ``explanation`` must equal the why API's, and recompute on its own
  (``tests.support.explanation_checks.recompute``);
- CSV: one row per cycle and node, columns named like the JSON paths (``final_score``, ``NetworkTraffic.normalized``,
  ``NetworkTraffic.traffic.measured_bytes``…); every such cell holds its path's value, and the final score, the
  NetworkTraffic score and the answer must recompute from a row's own cells.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import example, given, settings

from tests.support.explained_cycles import (
    HERD_TIE,
    PROPERTY,
    Scenario,
    in_savepoint,
    ingest_and_fetch,
    record_cycle,
    scenarios,
)
from tests.support.explanation_checks import TRAFFIC, answer_of, assert_shown, recompute, shown_missing_score


def _stream(response: Any) -> str:
    assert response.status_code == 200, response.content if not response.streaming else response.status_code
    return b"".join(response.streaming_content).decode()


def ndjson_explanations(api: Any) -> dict[int, dict[str, Any]]:
    text = _stream(api.get("/api/v1/cycles/export.ndjson", {"include": "explanation"}))
    lines = [json.loads(line) for line in text.splitlines()]
    return {line["id"]: line["explanation"] for line in lines}


def _cell_is(cell: str, value: Any) -> bool:
    """A CSV cell holds ``value`` (None: empty; lists and mappings as JSON; the spreadsheet-formula guard may prefix a
    quote to text)."""
    if value is None:
        return cell == ""
    if isinstance(value, bool):
        return cell == str(value)
    if isinstance(value, int | float):
        return cell != "" and float(cell) == float(value)
    if isinstance(value, str):
        return cell in (value, "'" + value)
    return bool(cell) and json.loads(cell) == value


def node_columns(node: Mapping[str, Any]) -> dict[str, Any]:
    """One node's explanation under the names the CSV gives its JSON paths: ``final_score``,
    ``NetworkTraffic.normalized``, ``NetworkTraffic.traffic.measured_bytes``, ``NodeResourceFitByCR.resources.mean``…"""
    columns: dict[str, Any] = {k: v for k, v in node.items() if k not in {"terms", "verdicts"}}
    for term in node["terms"]:
        for key, value in term.items():
            if key in {"traffic", "resources", "images"}:
                for inner, figure in (value or {}).items():
                    columns[f"{term['plugin']}.{key}.{inner}"] = figure
            elif key != "plugin":
                columns[f"{term['plugin']}.{key}"] = value
    return columns


CYCLE_COLUMNS = ("answer_scale", "spread_min", "spread_max", "extender_weight", "tied_nodes", "measured_leader")
REQUIRED_NODE_COLUMNS = ("node", "final_score", "extender_score", "kube_scheduler_points")
REQUIRED_TERM_COLUMNS = ("normalized", "weight", "applicable")
REQUIRED_TRAFFIC_COLUMNS = (
    "measured_bytes",
    "herd_bytes",
    "herd_binds",
    "estimate_bytes",
    "max_estimate_bytes",
    "max_estimate_node",
    "missing_score",
)


def check_csv_rows(rows: Sequence[Mapping[str, str]], explanation: Mapping[str, Any]) -> None:
    """One row per node of the cycle; every column named like a JSON path holds that path's value; and the final
    score, the NetworkTraffic score and the answer recompute from the row's own cells."""
    by_node = {row["node"]: row for row in rows}
    assert len(by_node) == len(rows), "one row per (cycle, node)"
    assert set(by_node) == {n["node"] for n in explanation["nodes"]}, "a row for every node of the explanation"
    for column in CYCLE_COLUMNS:
        for row in rows:
            assert column in row, f"CSV lacks the column {column!r}"
            shown = explanation[column]
            assert _cell_is(row[column], shown), f"{column}: CSV {row[column]!r}, JSON {shown!r}"
    for n in explanation["nodes"]:
        row = by_node[n["node"]]
        columns = node_columns(n)
        for column, value in columns.items():
            if column in row:
                assert _cell_is(row[column], value), f"{n['node']} {column}: CSV {row[column]!r}, JSON {value!r}"
        if n["final_score"] is None:
            continue
        plugins = [t["plugin"] for t in n["terms"]]
        required = [
            *REQUIRED_NODE_COLUMNS,
            *(f"{plugin}.{column}" for plugin in plugins for column in REQUIRED_TERM_COLUMNS),
            *(f"{TRAFFIC}.traffic.{column}" for column in REQUIRED_TRAFFIC_COLUMNS),
        ]
        for column in required:
            assert column in row, f"CSV lacks the column {column!r}"
        # From the row alone: final = Σ normalized × weight / Σ weight over the applicable plugins …
        applicable = [p for p in plugins if row[f"{p}.applicable"] == "True"]
        total = 0.0
        for p in applicable:
            total += float(row[f"{p}.normalized"]) * int(row[f"{p}.weight"])
        weights = sum(int(row[f"{p}.weight"]) for p in applicable)
        final = float(row["final_score"])
        assert_shown(total / weights, final, f"CSV {n['node']} final_score")
        # … NetworkTraffic = 100 − estimate × 100 / max …
        estimate, top = row[f"{TRAFFIC}.traffic.estimate_bytes"], row[f"{TRAFFIC}.traffic.max_estimate_bytes"]
        if estimate == "":
            traffic = float(row[f"{TRAFFIC}.traffic.missing_score"])
        elif float(top) == 0:
            traffic = 100.0
        else:
            traffic = 100.0 - float(estimate) * 100.0 / float(top)
        assert_shown(traffic, float(row[f"{TRAFFIC}.normalized"]), f"CSV {n['node']} NetworkTraffic.normalized")
        # … and the answer on the row's scale, with the points kube-scheduler added.
        spread = (float(row["spread_min"]), float(row["spread_max"])) if row["spread_min"] != "" else None
        _, answer = answer_of(final, row["answer_scale"], spread)
        assert int(row["extender_score"]) == answer, f"CSV {n['node']}: answered {row['extender_score']}, not {answer}"
        points = str(answer * int(row["extender_weight"]) * 10) if row["extender_weight"] else ""
        assert row["kube_scheduler_points"] == points


EXPORT_PROPERTY = settings(PROPERTY, max_examples=25)


@pytest.mark.django_db
@EXPORT_PROPERTY
@given(scenario=scenarios())
@example(scenario=HERD_TIE)
def test_export_ndjson_include_explanation_carries_the_why_explanation(fast_api: Any, scenario: Scenario) -> None:
    """Each NDJSON line's ``explanation`` is the why API's, and recomputes on its own."""

    def body() -> None:
        recorded = record_cycle(scenario)
        fetched = ingest_and_fetch(fast_api, scenario, recorded)
        exported = ndjson_explanations(fast_api)
        assert fetched.cycle_id in exported, "the cycle's line"
        assert exported[fetched.cycle_id] == fetched.why["explanation"]
        recompute(exported[fetched.cycle_id])
        assert shown_missing_score(exported[fetched.cycle_id]) in (None, scenario.missing_score)

    in_savepoint(body)


@pytest.mark.django_db
@EXPORT_PROPERTY
@given(scenario=scenarios())
@example(scenario=HERD_TIE)
def test_export_csv_include_explanation_has_a_row_per_node_that_adds_up(fast_api: Any, scenario: Scenario) -> None:
    """One CSV row per (cycle, node), columns named like the explanation's JSON paths."""

    def body() -> None:
        recorded = record_cycle(scenario)
        fetched = ingest_and_fetch(fast_api, scenario, recorded)
        text = _stream(fast_api.get("/api/v1/cycles/export.csv", {"include": "explanation"}))
        rows = list(csv.DictReader(io.StringIO(text)))
        key = "cycle_id" if rows and "cycle_id" in rows[0] else "id"
        ours = [row for row in rows if row.get(key) == str(fetched.cycle_id)]
        explanation = fetched.why["explanation"]
        if not any(n["final_score"] is not None for n in explanation["nodes"]):
            return
        assert ours, f"no CSV row for cycle {fetched.cycle_id} (columns: {list(rows[0]) if rows else []})"
        assert shown_missing_score(explanation) == scenario.missing_score
        check_csv_rows(ours, explanation)

    in_savepoint(body)
