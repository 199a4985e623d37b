"""Accuracy and speed benchmarks of the planner (run by hand; results in ``RESULTS.md``)."""
