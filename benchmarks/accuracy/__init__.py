"""Accuracy of the performance model on published LLM training runs (issue 3).

``runs`` reads the ground-truth CSVs (``tests/data/ground_truth/``), ``convert`` turns each
configuration into a scenario with its measured iteration time (or says why it cannot),
``evaluate`` predicts them, ``stats`` computes the error statistics, ``fit`` fits constants on
the declared calibration subset and ``report`` writes ``benchmarks/RESULTS.md``. Run it with
``python -m benchmarks.accuracy``.
"""
