"""``python -m benchmarks.load``: the command of :mod:`benchmarks.load.measure` (``--help`` says what it measures)."""

from benchmarks.load.measure import main

if __name__ == "__main__":
    main()
