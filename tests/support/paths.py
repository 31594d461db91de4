"""Where the tests find the repository, the protocol fixtures beside it, and where they leave artifacts."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# CI clones the repo with the project's shared/ folder beside it; SCHEDLENS_SHARED_DIR points elsewhere.
SHARED = Path(os.environ.get("SCHEDLENS_SHARED_DIR", REPO.parent / "shared"))
CAPTURES = SHARED / "fixtures" / "kube-scheduler-v1.28.7"
EXAMPLES = SHARED / "fixtures" / "extender-examples"
ARTIFACTS = REPO / "test-artifacts"
"""Screenshots and page dumps of the browser tests, kept by CI."""
