"""``python -m benchmarks.record``: the command of :mod:`benchmarks.record.path` (``--help`` says what it measures)."""

from benchmarks.record.path import main

if __name__ == "__main__":
    main()
