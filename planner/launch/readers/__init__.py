"""The framework readers, in the order they are asked (the first that recognises a program of
the launch describes the job). More specific readers come before the ones they would shadow:
Megatron-DeepSpeed before Megatron-LM (both run ``pretrain_gpt.py``), LLaMA-Factory's Megatron
backend and Megatron-Bridge before plain Megatron-LM."""

from __future__ import annotations

from planner.launch.reader import LaunchReader
from planner.launch.readers.automodel import READER as AUTOMODEL
from planner.launch.readers.axolotl import READER as AXOLOTL
from planner.launch.readers.foundry import READER as LLM_FOUNDRY
from planner.launch.readers.fsdp_script import READER as FSDP_SCRIPT
from planner.launch.readers.hf import READER as HF_TRAINER
from planner.launch.readers.llamafactory import READER as LLAMAFACTORY
from planner.launch.readers.megatron import READER as MEGATRON
from planner.launch.readers.megatron_bridge import READER as MEGATRON_BRIDGE
from planner.launch.readers.megatron_deepspeed import READER as MEGATRON_DEEPSPEED
from planner.launch.readers.nemo import NEMO1_READER, NEMO2_READER
from planner.launch.readers.torchtitan import READER as TORCHTITAN
from planner.launch.readers.torchtune import READER as TORCHTUNE

__all__ = ["READERS"]

READERS: tuple[LaunchReader, ...] = (
    TORCHTITAN,
    TORCHTUNE,
    AUTOMODEL,
    NEMO2_READER,
    NEMO1_READER,
    MEGATRON_BRIDGE,
    LLAMAFACTORY,
    AXOLOTL,
    LLM_FOUNDRY,
    MEGATRON_DEEPSPEED,
    MEGATRON,
    HF_TRAINER,
    FSDP_SCRIPT,
)
