"""The profiles page reads a change between two recorded versions as an operator says it, one line each (issue 41):
a weight raised is ``NetworkTraffic weight 3 → 5``, not the whole score list twice; the figures of every line are
found again in the versions' definitions, shown under Definition as JSON with the change field by field."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from dashboard.models import ProfileVersion
from tests.support.profile_versions import ROLLED_OUT_TO, store_rollout

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_versions(settings, tmp_path: Path) -> tuple[str, str]:
    """Both versions stored as a replica's notes give them to the ingester; the profiles file now says the newer."""
    path = tmp_path / "profiles.yaml"
    path.write_text(ROLLED_OUT_TO, encoding="utf-8")
    settings.SCHEDLENS_CONFIG = str(path)
    return store_rollout()


def shown(signed_in) -> str:
    response = signed_in.get(reverse("ui:profiles"))
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def version_row(page: str, digest: str) -> str:
    row = re.search(rf'<tr id="version-{digest}">(.*?)</tr>', page, re.S)
    assert row is not None, f"no row for version {digest}"
    return row.group(1)


def definition(page: str, digest: str) -> str:
    found = re.search(rf'<tr id="version-{digest}">.*?</tr>\s*<tr><td colspan="5"><details>(.*?)</details>', page, re.S)
    assert found is not None, f"no Definition under version {digest}"
    return found.group(1)


def definition_json(page: str, digest: str) -> dict[str, Any]:
    pre = re.search(r'<pre class="json"[^>]*>(.*?)</pre>', definition(page, digest), re.S)
    assert pre is not None
    parsed: dict[str, Any] = json.loads(pre.group(1))
    return parsed


def change_lines(row: str) -> list[str]:
    listed = re.search(r'<ul class="changes">(.*?)</ul>', row, re.S)
    assert listed is not None
    return [re.sub(r"<[^>]+>", "", item).strip() for item in re.findall(r"<li[^>]*>(.*?)</li>", listed.group(1), re.S)]


def test_a_weight_raised_an_added_plugin_and_an_arg_read_one_line_each(signed_in, two_versions) -> None:
    _, v2 = two_versions
    lines = change_lines(version_row(shown(signed_in), v2))
    assert lines == [
        "NetworkTraffic weight 3 → 5",
        "ImageLocality added to score (weight 2)",
        "NetworkTraffic arg timeRangeInMinutes 5 → 10",
    ]
    assert not any(line.startswith("score:") for line in lines), "not the whole score list before and after"


def test_the_figures_of_each_line_are_the_ones_under_definition(signed_in, two_versions) -> None:
    v1, v2 = two_versions
    page = shown(signed_in)
    before, after = definition_json(page, v1), definition_json(page, v2)
    assert after == ProfileVersion.objects.get(digest=v2).normalized, "the definition JSON is the recorded one"

    def weight(defined: dict[str, Any], plugin: str) -> int:
        (entry,) = (s for s in defined["score"] if s["name"] == plugin)
        return int(entry["weight"])

    window = [d["pluginConfig"]["NetworkTraffic"]["timeRangeInMinutes"] for d in (before, after)]
    lines = change_lines(version_row(page, v2))
    assert f"NetworkTraffic weight {weight(before, 'NetworkTraffic')} → {weight(after, 'NetworkTraffic')}" in lines
    assert f"ImageLocality added to score (weight {weight(after, 'ImageLocality')})" in lines
    assert f"NetworkTraffic arg timeRangeInMinutes {window[0]} → {window[1]}" in lines


def test_the_change_in_json_is_kept_under_definition(signed_in, two_versions) -> None:
    v1, v2 = two_versions
    page = shown(signed_in)
    kept = definition(page, v2)
    before, after = definition_json(page, v1), definition_json(page, v2)
    compact = {
        side: json.dumps(d["score"], separators=(",", ":")) for side, d in (("before", before), ("after", after))
    }
    assert f"score: {compact['before']} → {compact['after']}" in kept
    assert "first version recorded" in version_row(page, v1)
    assert '<ul class="changes-json' not in definition(page, v1), "the first version changed from nothing"
