"""Replays of recorded history under a candidate profile: rows, services, selectors, the runner."""
