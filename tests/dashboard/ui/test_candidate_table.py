"""The decision page's candidate rows and "why not?" picker are written in Python (``dashboard.ui.candidate_table``),
outside the template's autoescape: every string from a record must still reach the page escaped."""

from __future__ import annotations

from django.urls import reverse

HOSTILE = "node-<b>&\"'"
ESCAPED = "node-&lt;b&gt;&amp;&quot;&#x27;"


def test_a_hostile_node_name_is_escaped_in_its_rows_its_link_and_the_picker(signed_in, recorder):
    cycle = recorder.schedule(nodes=["node-1", "node-2", HOSTILE])
    body = signed_in.get(reverse("ui:decision", args=[cycle.id])).content.decode()
    assert HOSTILE not in body
    assert "<b>" not in body
    assert f'data-node="{ESCAPED}"><th scope="row">{ESCAPED}' in body
    assert f'<option value="{ESCAPED}">{ESCAPED}' in body
    assert 'href="?why_not=node-%3Cb%3E%26%22%27#why-not"' in body
