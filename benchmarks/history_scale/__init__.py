"""History at scale (issue 20): ten million cycles over a month, day-partitioned, measured page by page.

Run as ``.venv/bin/python -m benchmarks.history_scale``; ``__main__`` says what the run does. The modules, in the order
a run uses them: ``templates`` records real cycles and reads them back, ``load`` checks the disk and bulk-loads their
copies with a valid audit chain, ``measure`` times the pages, the export and retention, ``report`` writes the Markdown.
"""
