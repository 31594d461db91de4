"""``/api/v1/profile-versions/`` gives the change from the previous version the way ``/profiles/`` reads it, one
structured line per change (issue 41), and keeps the leaf-by-leaf ``changes`` its clients already read."""

from __future__ import annotations

import pytest

from tests.support.profile_versions import store_rollout

pytestmark = pytest.mark.django_db


def test_a_version_lists_its_change_lines_with_kind_plugin_point_field_and_figures(api) -> None:
    before, after = store_rollout()
    version = api.get(f"/api/v1/profile-versions/{after}/").json()
    defined = {v["digest"]: v["normalized"] for v in api.get("/api/v1/profile-versions/", {"profile": "web"}).json()}

    weight, added, window = version["change_lines"]
    assert weight == {
        "kind": "weight_changed",
        "text": "NetworkTraffic weight 3 → 5",
        "plugin": "NetworkTraffic",
        "point": "score",
        "field": "weight",
        "path": "score",
        "before": 3,
        "after": 5,
    }
    assert (added["kind"], added["text"], added["after"]) == (
        "plugin_added",
        "ImageLocality added to score (weight 2)",
        {"name": "ImageLocality", "weight": 2},
    )
    assert (window["kind"], window["path"]) == ("arg_changed", "pluginConfig.NetworkTraffic.timeRangeInMinutes")
    # Each figure is the one the versions recorded: found again at the line's path in their normalized forms.
    assert [defined[digest]["pluginConfig"]["NetworkTraffic"]["timeRangeInMinutes"] for digest in (before, after)] == [
        window["before"],
        window["after"],
    ]
    assert added["after"] in defined[after]["score"]


def test_the_leaf_by_leaf_changes_stay_as_they_were(api) -> None:
    before, after = store_rollout()
    version = api.get(f"/api/v1/profile-versions/{after}/").json()
    assert {c["path"] for c in version["changes"]} >= {"score", "pluginConfig.NetworkTraffic.timeRangeInMinutes"}
    (score,) = (c for c in version["changes"] if c["path"] == "score")
    assert score["after"] == [{"name": "NetworkTraffic", "weight": 5}, {"name": "ImageLocality", "weight": 2}]
    first = api.get(f"/api/v1/profile-versions/{before}/").json()
    assert (first["changes"], first["change_lines"]) == ([], [])
