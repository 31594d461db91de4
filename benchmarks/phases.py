"""The suite's phases and the child processes they run: a failure names its phase and says why.

A phase that fails stops ``make bench`` with one message naming the phase and, for a child process, its command,
exit status and the end of its stderr: a bare ``CalledProcessError`` said none of that, and the child's traceback
was lost with its captured output.
"""

from __future__ import annotations

import collections
import contextlib
import shlex
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path

STDERR_TAIL_LINES = 40
"""How much of a failed child's stderr the failure repeats (all of it was shown as it came)."""


class PhaseFailed(Exception):
    """A phase's child process failed; the message holds its command, exit status and last stderr lines."""


def run_child(command: Sequence[str], *, cwd: Path) -> None:
    """Run ``command``: its stdout and stderr pass through as they come (long phases show progress), and the end of
    its stderr is kept so a failure can say why."""
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
    process = subprocess.Popen(command, cwd=cwd, stderr=subprocess.PIPE, text=True, errors="replace")
    stream = process.stderr
    assert stream is not None

    def relay() -> None:
        for line in stream:
            sys.stderr.write(line)
            tail.append(line)

    relay_thread = threading.Thread(target=relay, name="phase-stderr", daemon=True)
    relay_thread.start()
    code = process.wait()
    relay_thread.join()
    if code != 0:
        shown = "".join(tail).rstrip() or "(nothing on stderr)"
        raise PhaseFailed(f"`{shlex.join(command)}` exited with status {code}; the end of its stderr:\n{shown}")


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Stop the suite with a message naming ``name`` when the phase raises (exit status 1)."""
    try:
        yield
    except PhaseFailed as exc:
        print(f"\nmake bench: the {name} phase failed: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except Exception as exc:
        traceback.print_exc()
        print(f"\nmake bench: the {name} phase failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
