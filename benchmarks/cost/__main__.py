"""``python -m benchmarks.cost``: the command of :mod:`benchmarks.cost.per_pod` (``--help`` says what it measures)."""

from benchmarks.cost.per_pod import main

if __name__ == "__main__":
    main()
