"""nccl-tests output tables -> collective samples (``parse_nccl_tests``).

Parses the standard output of ``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``,
``alltoall_perf`` and ``sendrecv_perf`` (github.com/NVIDIA/nccl-tests) into
``planner.calibration.CollectiveSample`` rows for ``planner.calibration.fit_collectives``.
"""

from adapters.nccl.parser import NcclTestsTable, parse_nccl_tests

__all__ = ["NcclTestsTable", "parse_nccl_tests"]
