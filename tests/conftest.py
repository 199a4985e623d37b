"""Fixtures shared by every test package, and the hypothesis profile of CI runs."""

import os

from hypothesis import settings

from tests.slurm_stack import slurm_stack

# CI runs property tests on a fixed seed sequence so that a verdict never depends on the draw;
# local runs keep exploring new examples.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

__all__ = ["slurm_stack"]
