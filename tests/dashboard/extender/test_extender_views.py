"""The extender endpoints over Django: status codes, limits and refusals, each call spooled."""

from __future__ import annotations

import json

import pytest

from tests.support.paths import CAPTURES

JSON = "application/json"
PREFIX = "/extender/default"


def post(client, verb: str, body: bytes, content_type: str = JSON, profile: str = "default"):
    # The test client drops Content-Type for an empty body; kube-scheduler always sends it.
    return client.post(f"/extender/{profile}/{verb}", data=body, content_type=content_type, CONTENT_TYPE=content_type)


def test_a_captured_filter_is_answered_and_spooled(client, runtime):
    body = (CAPTURES / "B-filter-prioritize-nodecache-true" / "001-filter.body.json").read_bytes()
    response = post(client, "filter", body)

    assert response.status_code == 200
    assert response["Content-Type"] == JSON
    assert json.loads(response.content)["NodeNames"] == ["node-1", "node-2", "node-3"]
    assert runtime.spool.depth() == 1


@pytest.mark.parametrize(
    ("body", "status", "answer"),
    [
        (b"", 400, {"error": "empty request body", "path": "$"}),
        (b"{", 400, {"error": "truncated JSON: it ends at byte 1, inside an unfinished object", "path": "$"}),
        (
            b'{"Pod":{},"Nodes":null,"NodeNames":null}',
            400,
            {"error": "both Nodes and NodeNames are null; exactly one must be set", "path": "$.NodeNames"},
        ),
        (
            b'{"Pod":[],"Nodes":null,"NodeNames":[]}',
            400,
            {"error": "expected an object, got an array", "path": "$.Pod"},
        ),
    ],
)
def test_bad_bodies_get_a_4xx_with_a_message_and_are_recorded(client, runtime, body, status, answer):
    response = post(client, "filter", body)
    assert response.status_code == status
    assert json.loads(response.content) == answer
    assert runtime.spool.depth() == 1


@pytest.mark.parametrize(
    ("verb", "body", "error", "path"),
    [
        ("filter", b'{"Pod":{},"NodeNames":["a",2]}', "expected a string, got a number", "$.NodeNames[1]"),
        ("prioritize", b'{"Pod":{},"Nodes":{"items":[[]]}}', "expected an object, got an array", "$.Nodes.items[0]"),
        ("bind", b'{"PodName":"p","PodNamespace":"n","PodUID":"u"}', "missing required field `Node`", "$"),
        ("preempt", b'{"Pod":{},"NodeNameToMetaVictims":{"n":{"Pods":null}}}', "expected an array, got null",
         "$.NodeNameToMetaVictims.n.Pods"),
        ("preempt", b'{"Pod":{}} {}', "trailing data after the JSON value at byte 11 (line 1, column 12)", "$"),
    ],
)  # fmt: skip
def test_each_verb_answers_a_malformed_body_in_schedlens_s_words(client, runtime, verb, body, error, path):
    response = post(client, verb, body)
    assert response.status_code == 400
    assert json.loads(response.content) == {"error": error, "path": path}
    assert runtime.spool.depth() == 1


def test_a_body_over_the_limit_is_refused_with_413(client, runtime, settings):
    settings.SCHEDLENS_MAX_BODY_BYTES = 1000
    response = post(client, "filter", b'{"Pod":{},"NodeNames":[' + b'"n",' * 400 + b'"m"]}')
    assert response.status_code == 413
    assert "exceeds the limit of 1000 bytes" in json.loads(response.content)["error"]


def test_the_default_body_limit_is_far_above_django_s_2_5_mib(settings):
    assert settings.SCHEDLENS_MAX_BODY_BYTES >= 64 * 1024 * 1024


def test_a_wrong_content_type_is_refused_naming_it(client, runtime):
    response = post(client, "filter", b"{}", content_type="text/plain")
    assert response.status_code == 415
    assert "text/plain" in json.loads(response.content)["error"]


def test_a_missing_content_type_is_refused(client, runtime):
    response = client.generic("POST", f"{PREFIX}/filter", b"")
    assert response.status_code == 415
    assert "got none" in json.loads(response.content)["error"]


def test_an_unknown_profile_is_a_404_with_a_message(client, runtime):
    response = post(client, "filter", b"{}", profile="nope")
    assert response.status_code == 404
    assert json.loads(response.content)["error"].startswith("unknown profile 'nope'")


def test_verbs_only_take_post(client, runtime):
    assert client.get(f"{PREFIX}/filter").status_code == 405


def test_bind_in_demo_mode_answers_success_and_says_it_was_simulated(client, runtime):
    body = b'{"PodName":"p","PodNamespace":"n","PodUID":"u","Node":"node-2"}'
    response = post(client, "bind", body)
    assert response.status_code == 200
    assert json.loads(response.content) == {"Error": ""}
    ((_row_id, data),) = runtime.spool.read_batch(10)
    assert json.loads(data)["bind"] == {
        "node": "node-2",
        "detail": "simulated bind (demo mode, no API server)",
        "simulated": True,
    }


def test_bind_in_demo_mode_refuses_a_node_the_demo_cluster_does_not_have(client, settings, tmp_path, monkeypatch):
    from django.core.management import call_command

    from dashboard import runtime as runtime_module

    cluster_file = tmp_path / "cluster.json"
    call_command("simulate", nodes=3, write_cluster=str(cluster_file))
    settings.SCHEDLENS_SPOOL_DIR = tmp_path / "spool"
    settings.SCHEDLENS_INGEST_IN_PROCESS = False
    settings.SCHEDLENS_BIND_MODE = "simulated"
    settings.SCHEDLENS_CONFIG = ""
    settings.SCHEDLENS_CLUSTER_FILE = str(cluster_file)
    demo = runtime_module.Runtime()
    monkeypatch.setattr(runtime_module, "_runtime", demo)
    try:
        ghost = post(client, "bind", b'{"PodName":"p","PodNamespace":"n","PodUID":"u1","Node":"node-9"}')
        known = post(client, "bind", b'{"PodName":"q","PodNamespace":"n","PodUID":"u2","Node":"node-002"}')
        assert json.loads(ghost.content) == {"Error": 'node "node-9" not found'}
        assert json.loads(known.content) == {"Error": ""}
        records = [json.loads(data)["bind"] for _, data in demo.spool.read_batch(10)]
        assert records[0] == {
            "node": "node-9",
            "detail": "simulated bind refused: the demo cluster has no node 'node-9'",
            "api_status": 404,
            "simulated": True,
        }
    finally:
        demo.spool.close()


def test_readiness_reports_profiles_and_spool_depth(client, runtime):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert json.loads(response.content) == {"status": "ready", "profiles": ["default"], "spool_depth": 0}


def test_a_bad_profile_file_stops_the_server_at_start_with_a_message_naming_profile_plugin_and_field(tmp_path):
    from tests.support.live_server import LiveServer

    config = tmp_path / "profiles.yaml"
    config.write_text("profiles: [{name: fast, pluginConfig: [{name: NetworkTraffic, args: {timeRangeInMinutes: x}}]}]")
    with pytest.raises(RuntimeError) as caught:
        LiveServer({"SCHEDLENS_CONFIG": str(config), "SCHEDLENS_SPOOL_DIR": str(tmp_path / "spool")})
    assert "profile 'fast', plugin 'NetworkTraffic': field args.timeRangeInMinutes" in str(caught.value)


def test_manage_py_check_reports_a_bad_profile_file(tmp_path, settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    config = tmp_path / "profiles.yaml"
    config.write_text("profiles: [{name: p, plugins: {score: {enabled: [{name: Nope}]}}}]")
    settings.SCHEDLENS_CONFIG = str(config)
    with pytest.raises(SystemCheckError, match="plugin 'Nope'"):
        call_command("check")
