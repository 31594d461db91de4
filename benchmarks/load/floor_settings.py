"""The production settings with the benchmark-only URLconf: the empty-view floor, never a production route."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "benchmarks.load.floor_urls"
