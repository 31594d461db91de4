"""``python -m benchmarks.verbs``: the command of :mod:`benchmarks.verbs.measure` (``--help`` says what it measures)."""

from benchmarks.verbs.measure import main

if __name__ == "__main__":
    main()
