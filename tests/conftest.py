"""Fixtures shared by every test package."""

from tests.slurm_stack import slurm_stack

__all__ = ["slurm_stack"]
