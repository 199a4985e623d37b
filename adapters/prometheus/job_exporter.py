"""Training-step metrics a training job exports for the planner (needs only ``prometheus_client``).

Every rank of a job serves these gauges on its own port (``TRAINING_METRICS_PORT``, default
9400, plus the node-local rank), labelled ``rank``, ``node`` (host name) and ``job_id`` (Slurm's
``SLURM_JOB_ID`` or ``TRAINING_JOB_ID``; empty on Kubernetes, where the PodMonitor's target
labels ``namespace``/``pod`` identify the job):

===========================================  ======================================================
metric                                       meaning
===========================================  ======================================================
``training_iteration``                       optimizer steps (iterations) completed
``training_target_iterations``               iterations the job runs in total (0 = unknown)
``training_step_time_seconds``               mean wall time per iteration over the last logging
                                             interval, waits included
``training_compute_time_seconds``            mean forward+backward time per iteration over the
                                             interval, without gradient-synchronisation waits
``training_interval_iterations``             iterations the two times above average over
``training_world_size``                      ranks in the job
``training_last_interval_timestamp_seconds`` when the rank recorded its last interval (epoch s)
``training_loss``                            training loss of the last interval
``training_tokens_total``                    tokens this rank processed (counter)
===========================================  ======================================================

These are what ``adapters.prometheus.training`` reads: per-rank step times for live straggler
detection and the iteration counter for progress. The compute time matters: with data
parallelism every rank's wall time per step equals the slowest rank's, so only the time a rank
spends before it waits for its peers shows who is slow.

In a training script (copy this one file, or import it from the planner's package)::

    from job_exporter import TrainingMetricsExporter
    exporter = TrainingMetricsExporter()           # rank, world size, job id from the env
    exporter.serve()                               # port 9400 + LOCAL_RANK
    exporter.set_target_iterations(train_iters)
    for it in range(1, train_iters + 1):
        ...                                        # time forward+backward, and the full step
        if it % log_interval == 0:
            exporter.record(iteration=it, step_time_s=step_s, compute_time_s=fwd_bwd_s,
                            num_iterations=log_interval, tokens=tokens_in_interval, loss=loss)

``python job_exporter.py --demo --port 9400 --rank 0 --world-size 2`` runs a fake training loop
(for tests and demos; ``--slow-factor`` makes this rank compute slower).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

DEFAULT_PORT = 9400

ITERATION = "training_iteration"
TARGET_ITERATIONS = "training_target_iterations"
STEP_TIME = "training_step_time_seconds"
COMPUTE_TIME = "training_compute_time_seconds"
INTERVAL_ITERATIONS = "training_interval_iterations"
WORLD_SIZE = "training_world_size"
LAST_INTERVAL = "training_last_interval_timestamp_seconds"
LOSS = "training_loss"
TOKENS = "training_tokens"  # a counter: exposed as training_tokens_total

LABELS = ("rank", "node", "job_id")


def _env_int(*names: str, default: int) -> int:
    for name in names:
        value = os.environ.get(name, "")
        if value.strip().isdigit():
            return int(value)
    return default


class TrainingMetricsExporter:
    """One rank's training metrics (module doc). Arguments default to the launcher's env:
    ``RANK``/``SLURM_PROCID``, ``WORLD_SIZE``/``SLURM_NTASKS``, ``SLURM_JOB_ID``/
    ``TRAINING_JOB_ID``, the host name. Pass ``registry`` to export on your own registry."""

    def __init__(
        self,
        *,
        rank: int | None = None,
        world_size: int | None = None,
        job_id: str | None = None,
        node: str | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.rank = rank if rank is not None else _env_int("RANK", "SLURM_PROCID", default=0)
        self.world_size = (
            world_size
            if world_size is not None
            else _env_int("WORLD_SIZE", "SLURM_NTASKS", default=1)
        )
        if self.rank < 0 or self.world_size < 1 or self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} is not in a world of size {self.world_size}")
        self.job_id = (
            job_id
            if job_id is not None
            else os.environ.get("SLURM_JOB_ID") or os.environ.get("TRAINING_JOB_ID", "")
        )
        self.node = node or socket.gethostname()
        self.registry = registry or CollectorRegistry()
        values = (str(self.rank), self.node, self.job_id)

        def gauge(name: str, text: str) -> Gauge:
            return Gauge(name, text, LABELS, registry=self.registry).labels(*values)

        self._iteration = gauge(ITERATION, "Optimizer steps (iterations) completed.")
        self._target = gauge(TARGET_ITERATIONS, "Iterations the job runs in total (0: unknown).")
        self._step = gauge(
            STEP_TIME, "Mean wall time per iteration over the last logging interval, seconds."
        )
        self._compute = gauge(
            COMPUTE_TIME,
            "Mean forward+backward time per iteration over the last logging interval, "
            "without gradient-synchronisation waits, seconds.",
        )
        self._interval = gauge(
            INTERVAL_ITERATIONS, "Iterations the step and compute times average over."
        )
        self._world = gauge(WORLD_SIZE, "Ranks in the job.")
        self._last = gauge(
            LAST_INTERVAL, "When this rank recorded its last interval, Unix epoch seconds."
        )
        self._loss = gauge(LOSS, "Training loss of the last logging interval.")
        self._tokens = Counter(
            TOKENS, "Tokens processed by this rank.", LABELS, registry=self.registry
        ).labels(*values)
        self._world.set(self.world_size)

    def serve(self, port: int | None = None, addr: str = "0.0.0.0") -> int:
        """Serve ``/metrics`` on ``addr:port`` in a daemon thread; returns the port.

        Default port: ``TRAINING_METRICS_PORT`` (9400) plus ``LOCAL_RANK``/``SLURM_LOCALID``, so
        ranks sharing a node do not collide.
        """
        if port is None:
            port = _env_int("TRAINING_METRICS_PORT", default=DEFAULT_PORT) + _env_int(
                "LOCAL_RANK", "SLURM_LOCALID", default=0
            )
        start_http_server(port, addr=addr, registry=self.registry)
        return port

    def set_target_iterations(self, iterations: int) -> None:
        """The number of iterations the job runs in total."""
        self._target.set(max(0, iterations))

    def record(
        self,
        *,
        iteration: int,
        step_time_s: float,
        compute_time_s: float | None = None,
        num_iterations: int = 1,
        tokens: int = 0,
        loss: float | None = None,
        timestamp_s: float | None = None,
    ) -> None:
        """Record one logging interval ending at ``iteration`` (times are per-iteration means
        over the ``num_iterations`` iterations of the interval, seconds)."""
        if iteration < 0 or step_time_s < 0 or num_iterations < 1:
            raise ValueError("iteration, step_time_s must be >= 0 and num_iterations >= 1")
        self._iteration.set(iteration)
        self._step.set(step_time_s)
        if compute_time_s is not None:
            self._compute.set(compute_time_s)
        self._interval.set(num_iterations)
        if tokens > 0:
            self._tokens.inc(tokens)
        if loss is not None:
            self._loss.set(loss)
        self._last.set(time.time() if timestamp_s is None else timestamp_s)


def _demo(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Fake training loop exporting training_* metrics")
    parser.add_argument("--demo", action="store_true", required=True)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--addr", default="127.0.0.1")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--job-id", default="demo")
    parser.add_argument("--node", default=None)
    parser.add_argument("--iterations", type=int, default=100_000)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--compute-time-s", type=float, default=0.010)
    parser.add_argument("--slow-factor", type=float, default=1.0)
    parser.add_argument("--sync-time-s", type=float, default=0.002)
    parser.add_argument(
        "--step-time-s", type=float, default=None, help="wall time per iteration (all ranks)"
    )
    args = parser.parse_args(argv)
    exporter = TrainingMetricsExporter(
        rank=args.rank, world_size=args.world_size, job_id=args.job_id, node=args.node
    )
    port = exporter.serve(args.port, addr=args.addr)
    exporter.set_target_iterations(args.iterations)
    print(f"job_exporter demo: rank {args.rank} on {args.addr}:{port}", flush=True)
    compute = args.compute_time_s * args.slow_factor
    # Data parallel: every rank waits for the slowest one, so the step time is the same on
    # every rank (pass the slowest rank's with --step-time-s to all of them).
    step = args.step_time_s or compute + args.sync_time_s
    iteration = 0
    while iteration < args.iterations:
        time.sleep(step * args.log_interval)
        iteration += args.log_interval
        exporter.record(
            iteration=iteration,
            step_time_s=step,
            compute_time_s=compute,
            num_iterations=args.log_interval,
            tokens=4096 * args.log_interval,
            loss=10.0 / (1.0 + iteration / 1000.0),
        )
    return 0


if __name__ == "__main__":
    sys.exit(_demo(sys.argv[1:]))
