"""Fuzz at scale: the verb fuzz (``tests/dashboard/extender/test_fuzz_verbs.py``) and the audit API's schemathesis
run (``tests/dashboard/api/test_schema.py``) with thousands of cases instead of ``make test``'s few hundred, not
derandomized.

Every verb case must be answered 200/400/404 (views: 200/400/415) with a consistent answer and a record that
PostgreSQL stores; every API case must pass schemathesis' checks (no 5xx, documented status codes and content
types, responses matching the schema). The counts (cases, answers per status, 5xx) go to
``benchmarks/results-reliability.md``:

    .venv/bin/python -m benchmarks.reliability.fuzz --verb-examples 2500 --api-examples 1000 \\
        --write benchmarks/results-reliability.md

Needs the services ``make test`` uses; ``TEST_DATABASE_URL`` as there (pytest-django creates ``test_<name>``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


class CountApiCases:
    """A pytest plugin: raises the schemathesis test's examples per operation and counts every case it runs."""

    def __init__(self, examples: int) -> None:
        self.examples = examples
        self.statuses: Counter[str] = Counter()
        self.operations: Counter[str] = Counter()

    def pytest_configure(self, config: Any) -> None:
        import schemathesis

        import tests.dashboard.api.test_schema as schema_test

        schema_test.EXAMPLES_PER_OPERATION = self.examples
        original = schemathesis.Case.call
        plugin = self

        def counted(case: Any, *args: Any, **kwargs: Any) -> Any:
            response = original(case, *args, **kwargs)
            plugin.statuses[str(response.status_code)] += 1
            plugin.operations[case.operation.label] += 1
            return response

        schemathesis.Case.call = counted  # type: ignore[method-assign]


def run(verb_examples: int, api_examples: int) -> dict[str, Any]:
    import pytest

    report = Path(tempfile.mkdtemp(prefix="schedlens-fuzz-")) / "verbs.json"
    os.environ["SCHEDLENS_FUZZ_EXAMPLES"] = str(verb_examples)
    os.environ["SCHEDLENS_FUZZ_REPORT"] = str(report)
    os.environ.setdefault(
        "DATABASE_URL", os.environ.get("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/schedlens")
    )
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
    api = CountApiCases(api_examples)
    started = time.monotonic()
    exit_code = pytest.main(
        [
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/dashboard/extender/test_fuzz_verbs.py",
            "tests/dashboard/api/test_schema.py::test_generated_requests_with_an_auditor_token_never_get_a_500",
        ],
        plugins=[api],
    )
    verbs = json.loads(report.read_text())["verbs"] if report.exists() else {}
    verb_cases = sum(v for k, v in verbs.items() if k.endswith(":cases"))
    verb_5xx = sum(v for k, v in verbs.items() if k.startswith("status:5"))  # every case counted once here
    api_cases = sum(api.statuses.values())
    api_5xx = sum(v for k, v in api.statuses.items() if k.startswith("5"))
    return {
        "passed": exit_code == 0,
        "seconds": round(time.monotonic() - started, 1),
        "verb_cases": verb_cases,
        "verb_cases_by_test": {k.removesuffix(":cases"): v for k, v in verbs.items() if k.endswith(":cases")},
        "verb_answers_by_status": {
            k.removeprefix("status:"): v for k, v in sorted(verbs.items()) if k.startswith("status:")
        },
        "verb_answers_by_test": {k: v for k, v in sorted(verbs.items()) if ":status:" in k},
        "verb_5xx": verb_5xx,
        "api_cases": api_cases,
        "api_answers_by_status": dict(sorted(api.statuses.items())),
        "api_operations": len(api.operations),
        "api_5xx": api_5xx,
    }


def section(result: dict[str, Any], args: argparse.Namespace) -> str:
    total = result["verb_cases"] + result["api_cases"]
    fivexx = result["verb_5xx"] + result["api_5xx"]
    lines = [
        "<!-- fuzz:begin -->",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} ({os.cpu_count()} CPUs): "
        f"`.venv/bin/python -m benchmarks.reliability.fuzz --verb-examples {args.verb_examples} --api-examples "
        f"{args.api_examples}` — {result['seconds']} s, **{'all cases passed' if result['passed'] else 'FAILURES'}**.",
        "",
        "| | cases run | cases passed | 5xx seen | answers by status |",
        "| --- | --- | --- | --- | --- |",
        f"| verbs (hypothesis; {', '.join(f'{k} {v}' for k, v in result['verb_cases_by_test'].items())}) "
        f"| {result['verb_cases']} | {result['verb_cases'] if result['passed'] else 'see log'} | {result['verb_5xx']} "
        f"| {', '.join(f'{k}: {v}' for k, v in result['verb_answers_by_status'].items())} |",
        f"| audit API (schemathesis, {result['api_operations']} operations, auditor token) | {result['api_cases']} "
        f"| {result['api_cases'] if result['passed'] else 'see log'} | {result['api_5xx']} "
        f"| {', '.join(f'{k}: {v}' for k, v in result['api_answers_by_status'].items())} |",
        f"| **total** | **{total}** | **{total if result['passed'] else 'see log'}** | **{fivexx}** | |",
        "<!-- fuzz:end -->",
    ]
    return "\n".join(lines)


def write_section(path: Path, text: str) -> None:
    current = path.read_text(encoding="utf-8") if path.exists() else "<!-- fuzz:begin -->\n<!-- fuzz:end -->\n"
    start, end = current.index("<!-- fuzz:begin -->"), current.index("<!-- fuzz:end -->") + len("<!-- fuzz:end -->")
    path.write_text(current[:start] + text + current[end:], encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.reliability.fuzz",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--verb-examples", type=int, default=2500, help="hypothesis examples per verb fuzz test (5)")
    parser.add_argument("--api-examples", type=int, default=1000, help="schemathesis examples per API operation")
    parser.add_argument("--write", type=Path, help="replace the fuzz section of this markdown file")
    args = parser.parse_args()
    result = run(args.verb_examples, args.api_examples)
    print(json.dumps(result, indent=2))
    if args.write:
        write_section(args.write, section(result, args))
    return 0 if result["passed"] and result["verb_5xx"] == result["api_5xx"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
