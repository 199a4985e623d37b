"""The NeMo readers: NeMo 2.0 (``nemo llm pretrain|finetune --factory ...``,
:mod:`planner.launch.readers.nemo2`) and NeMo 1.0 (Hydra ``megatron_gpt_pretraining.py``,
:mod:`planner.launch.readers.nemo1`)."""

from __future__ import annotations

from planner.launch.readers.nemo1 import NEMO1_READER, Nemo1Reader
from planner.launch.readers.nemo2 import NEMO2_READER, Nemo2Reader

__all__ = ["NEMO1_READER", "NEMO2_READER", "Nemo1Reader", "Nemo2Reader"]
