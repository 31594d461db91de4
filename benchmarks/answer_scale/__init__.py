"""How often the preferred node ties with another at each answer scale (``python -m benchmarks.answer_scale``)."""
