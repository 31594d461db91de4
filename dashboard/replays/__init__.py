"""Replays of recorded history under a candidate profile (issue 21): rows, services, selectors, the runner."""
