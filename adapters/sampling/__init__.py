"""Sampling harness: times the planner's operators and collectives with PyTorch on this machine.

``sample_operators`` (``adapters.sampling.operators``) times a design of operator shapes on the
CPU or one CUDA GPU; ``sample_collectives`` (``adapters.sampling.collectives``) times collectives
over local ``torch.distributed`` processes (gloo on CPU, NCCL on GPUs); ``write_sample_run`` /
``read_sample_run`` (``adapters.sampling.files``) store a run as CSV files plus a JSON sidecar.
torch is imported lazily: importing this package never needs it. This is the only place the
planner uses torch at runtime.
"""

from adapters.sampling.collectives import DEFAULT_SIZES_BYTES, sample_collectives
from adapters.sampling.files import (
    COLLECTIVE_SAMPLES_FILE,
    OP_SAMPLES_FILE,
    RUN_METADATA_FILE,
    SampleRun,
    read_sample_run,
    write_sample_run,
)
from adapters.sampling.operators import device_metadata, sample_operators

__all__ = [
    "COLLECTIVE_SAMPLES_FILE",
    "DEFAULT_SIZES_BYTES",
    "OP_SAMPLES_FILE",
    "RUN_METADATA_FILE",
    "SampleRun",
    "device_metadata",
    "read_sample_run",
    "sample_collectives",
    "sample_operators",
    "write_sample_run",
]
