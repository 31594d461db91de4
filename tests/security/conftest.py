"""The security suite reuses fixtures of other suites: the fault suite's production-like environment, the audit
API's recorded cycles, the PKI of the mutual-TLS tests, and the end-to-end suite's Chromium."""

from tests.api.conftest import kube_scheduler  # noqa: F401  (fixtures)
from tests.e2e.conftest import browser, operator_login, page  # noqa: F401
from tests.faults.conftest import cluster, cluster_file, production_env  # noqa: F401
from tests.kube.test_live_server import pki  # noqa: F401
