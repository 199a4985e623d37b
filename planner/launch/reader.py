"""The interface every framework reader implements, and what it is handed.

A reader is asked, for each program the launch runs (:class:`~planner.launch.types.Invocation`),
whether it recognises it; the first reader that does describes the job. ``read`` fills a
:class:`~planner.launch.types.Facts` from, in increasing precedence, the framework's documented
defaults, the catalog's values of built-in names (a recipe, a config name, a model flavor), the
config files the program names and the overrides on its command line, each value with its
source. It raises only ``PlannerError`` (a config that cannot be read or parsed), which the
description reports as its error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from planner.launch.types import Facts, Invocation, Launch, LaunchFiles

__all__ = ["LaunchReader", "ReadContext"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadContext:
    """What a reader may consult besides the invocation: ``launch`` (the whole launch, for its
    allocation and log), ``files`` (bounded, inside the job's tree; includes files the launch
    script wrote itself), ``allocation`` (what the scheduler and launcher lines say of GPUs:
    ``hardware.num_gpus``, ``hardware.gpus_per_node``, ``launch.num_nodes``, with sources), and
    ``invocations`` (every program of the launch, in order: a reader may need a sibling, e.g.
    the accelerate config of a wrapped script)."""

    launch: Launch
    files: LaunchFiles
    allocation: Facts
    invocations: tuple[Invocation, ...] = ()


class LaunchReader(Protocol):
    """One launch style. ``name`` is what ``described_by`` says (``torchtitan``, ``nemo2``,
    ``megatron_bridge``, ``nemo1``, ``megatron``, ``megatron_deepspeed``, ``hf_trainer``,
    ``axolotl``, ``llamafactory``, ``torchtune``, ``llm_foundry``, ``fsdp_script``)."""

    name: str

    def recognises(self, invocation: Invocation) -> bool:
        """True when ``invocation`` is a program of this framework."""
        ...

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        """What ``invocation`` trains, each value with its source."""
        ...
