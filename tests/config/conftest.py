"""The certificates of the TLS tests, made once per test module."""

from __future__ import annotations

import pytest

from tests.support.pki import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))
