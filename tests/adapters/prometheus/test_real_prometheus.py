"""The Prometheus adapter against a real Prometheus 2.42 (see conftest): dcgm-exporter series in
every label spelling we support, backfilled per-rank training series fed to the planner's live
straggler tracker, a live job_exporter scraped every second, and real error answers."""

from __future__ import annotations

import gzip
import re
import socket
import statistics
import time
from collections import defaultdict

import pytest

from adapters.prometheus import DcgmLabels, DcgmTelemetry, JobSelector, PrometheusClient
from adapters.prometheus.dcgm import MIB, least_active
from adapters.prometheus.training import TrainingTelemetry
from planner.errors import SourcePermanentError, SourceTemporaryError
from planner.stragglers.live import LiveStragglers
from tests.deploy import stack

from .conftest import (
    BACKFILL,
    COMPUTE_TIME_S,
    LIVE_JOB_ID,
    LIVE_RANKS,
    SLOW_FACTOR,
    SLOW_RANK,
    Telemetry,
)

START_S = 1_795_168_800
END_S = START_S + 3600
#: Evaluate 30 s before the last sample: the 300 s window then holds exactly the samples at
#: END-300 .. END-60, whatever the range boundary rules.
AT_S = END_S - 30
_LINE = re.compile(r"^(\w+)\{(.*)\} (\S+) (\d+)$")


def _oracle() -> dict[tuple[str, str, str], dict[str, list[float]]]:
    """Straight from the backfill file: (host, gpu, pod|job) -> metric -> values in window."""
    out: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for line in gzip.decompress(BACKFILL.read_bytes()).decode().splitlines():
        m = _LINE.match(line)
        if not m or not m.group(1).startswith("DCGM_"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        t = int(m.group(4))
        if AT_S - 300 <= t <= AT_S:
            host = labels.get("Hostname") or labels.get("hostname") or ""
            who = labels.get("exported_pod") or labels.get("hpc_job") or labels.get("pod", "")
            out[(host, labels["gpu"], who)][m.group(1)].append(float(m.group(3)))
    return out


@pytest.fixture(scope="module")
def client(telemetry: Telemetry) -> PrometheusClient:
    return PrometheusClient(telemetry.prom.url, timeout_s=5)


@pytest.mark.integration
def test_pods_behind_the_dcgm_chart_servicemonitor(client: PrometheusClient) -> None:
    """honorLabels: false: the workload's pod arrives as exported_pod; namespace/pod are the
    exporter's own and must not be mistaken for the job's."""
    pods = ["llama-70b-workers-0-0", "llama-70b-workers-0-1"]
    gpus = DcgmTelemetry(client).for_pods("research", pods, at_s=AT_S)
    assert [(g.host, g.gpu, g.pod) for g in gpus] == [
        ("gpu-node-0", "0", pods[0]),
        ("gpu-node-0", "1", pods[0]),
        ("gpu-node-1", "0", pods[1]),
        ("gpu-node-1", "1", pods[1]),
    ]
    oracle = _oracle()
    for g in gpus:
        expect = oracle[(g.host, g.gpu, g.pod)]
        assert g.namespace == "research"
        assert g.model_name == "NVIDIA H100 80GB HBM3"
        assert g.num_samples == 5
        assert g.gpu_util_ratio == pytest.approx(
            statistics.fmean(expect["DCGM_FI_DEV_GPU_UTIL"]) / 100
        )
        assert g.sm_active_ratio == pytest.approx(
            statistics.fmean(expect["DCGM_FI_PROF_SM_ACTIVE"])
        )
        assert g.tensor_active_ratio == pytest.approx(
            statistics.fmean(expect["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"])
        )
        assert g.memory_used_bytes == pytest.approx(
            statistics.fmean(expect["DCGM_FI_DEV_FB_USED"]) * MIB
        )
        assert g.memory_free_bytes == pytest.approx(
            statistics.fmean(expect["DCGM_FI_DEV_FB_FREE"]) * MIB
        )
        assert g.nvlink_tx_bytes_per_s == pytest.approx(
            statistics.fmean(expect["DCGM_FI_PROF_NVLINK_TX_BYTES"])
        )
        assert g.pcie_rx_bytes_per_s == pytest.approx(
            statistics.fmean(expect["DCGM_FI_PROF_PCIE_RX_BYTES"])
        )
    slow = least_active(gpus)
    assert slow is not None
    assert (slow.host, slow.gpu) == ("gpu-node-1", "1")


@pytest.mark.integration
def test_pods_with_honored_labels(client: PrometheusClient) -> None:
    gpus = DcgmTelemetry(client).for_pods("team-b", ["mixtral-ft-0"], at_s=AT_S)
    assert [(g.host, g.gpu, g.namespace, g.pod) for g in gpus] == [
        ("gpu-node-7", "0", "team-b", "mixtral-ft-0"),
        ("gpu-node-7", "1", "team-b", "mixtral-ft-0"),
    ]
    # The exporter pod itself is not a job: its namespace/pod match nothing we ask for.
    assert DcgmTelemetry(client).for_pods("gpu-operator", ["llama-70b-workers-0-0"]) == []


@pytest.mark.integration
def test_slurm_job_by_hpc_job_mapping_and_lowercase_hostname(client: PrometheusClient) -> None:
    gpus = DcgmTelemetry(client).for_slurm_job("4242", hosts=["ignored"], at_s=AT_S)
    assert {(g.host, g.gpu) for g in gpus} == {
        ("gpu-a01", "0"),
        ("gpu-a01", "1"),
        ("gpu-a02", "0"),
        ("gpu-a02", "1"),
    }
    assert {g.hpc_job for g in gpus} == {"4242"}


@pytest.mark.integration
def test_slurm_job_by_host_and_gpu_indices(client: PrometheusClient) -> None:
    telemetry = DcgmTelemetry(client)
    gpus = telemetry.for_slurm_job(
        "5151", hosts=["gpu-b01"], gpu_indices={"gpu-b01": [0, 1]}, at_s=AT_S
    )
    assert [(g.host, g.gpu) for g in gpus] == [("gpu-b01", "0"), ("gpu-b01", "1")]
    assert all(g.gpu_util_ratio is not None and g.gpu_util_ratio > 0.9 for g in gpus)
    # Without indices, every GPU of the host (the other job's too).
    assert len(telemetry.for_slurm_job("5151", hosts=["gpu-b01"], at_s=AT_S)) == 4
    # A site whose series only carry Prometheus' instance label (host:port).
    by_instance = DcgmTelemetry(client, labels=DcgmLabels(host=("instance",)))
    gpus = by_instance.for_slurm_job(
        "5151", hosts=["gpu-b01"], gpu_indices={"gpu-b01": [1]}, at_s=AT_S
    )
    assert [(g.host, g.gpu) for g in gpus] == [("gpu-b01", "1")]
    assert telemetry.for_slurm_job("999", hosts=["nowhere"], at_s=AT_S) == []


@pytest.mark.integration
def test_backfilled_rank_steps_feed_the_live_straggler_tracker(client: PrometheusClient) -> None:
    training = TrainingTelemetry(client)
    job = JobSelector.slurm("9001")
    records = training.rank_steps(job, start_s=START_S, end_s=END_S, step_s=15)
    assert {r.rank for r in records} == set(range(8))
    assert len(records) == 8 * 241
    assert {r.world_size for r in records} == {8}
    assert {r.num_iterations for r in records} == {10}
    assert records[0].node == "gpu-c01"
    tracker = LiveStragglers.new(8)
    tracker.add(records)
    report = tracker.report(remaining_s=3600.0)
    assert report is not None
    culprits = {(s["rank"], s["node"]) for s in report.stragglers}
    assert culprits == {(5, "gpu-c02")}
    assert report.slowdown > 1.2

    progress = training.progress(job, at_s=END_S)
    assert progress is not None
    assert progress.iteration == 2410
    assert progress.train_iters == 50_000
    assert progress.timestamp_s == END_S
    assert progress.framework == "prometheus"
    assert training.progress(JobSelector.slurm("no-such-job"), at_s=END_S) is None


@pytest.mark.integration
def test_live_job_exporter_is_scraped_and_read_back(
    telemetry: Telemetry, client: PrometheusClient
) -> None:
    prom = telemetry.prom
    prom.wait_for(f'training_iteration{{job_id="{LIVE_JOB_ID}"}}', min_results=LIVE_RANKS)
    time.sleep(4)  # a few 1 s scrapes
    now = time.time()
    training = TrainingTelemetry(client)
    job = JobSelector.slurm(LIVE_JOB_ID)
    records = training.rank_steps(job, start_s=now - 10, end_s=now, step_s=1)
    by_rank: dict[int, list[float]] = defaultdict(list)
    for r in records:
        assert r.world_size == LIVE_RANKS
        assert r.step_time_s == pytest.approx(COMPUTE_TIME_S * SLOW_FACTOR + 0.005)
        by_rank[r.rank].append(r.compute_time_s)
    assert set(by_rank) == set(range(LIVE_RANKS))
    assert all(len(v) >= 2 for v in by_rank.values())
    ratio = statistics.fmean(by_rank[SLOW_RANK]) / statistics.fmean(by_rank[0])
    assert ratio == pytest.approx(SLOW_FACTOR)
    assert {r.node for r in records if r.rank == SLOW_RANK} == {"node2"}

    progress = training.progress(job)
    assert progress is not None
    assert progress.iteration > 0
    assert progress.train_iters == 1_000_000
    assert progress.timestamp_s is not None
    assert now - progress.timestamp_s < 10


@pytest.mark.integration
def test_bad_promql_is_a_permanent_error(client: PrometheusClient) -> None:
    with pytest.raises(SourcePermanentError, match="bad_data") as err:
        client.query("sum(rate(DCGM_FI_DEV_GPU_UTIL[5m])")
    assert "bad query" in str(err.value)


@pytest.mark.integration
def test_wrong_url_is_a_permanent_error(telemetry: Telemetry) -> None:
    # The job exporter answers HTTP, but not the Prometheus API.
    port = telemetry.prom.prom_port
    with (
        PrometheusClient(f"http://127.0.0.1:{port}/not-prometheus", timeout_s=5) as wrong,
        pytest.raises(SourcePermanentError, match="check the base URL"),
    ):
        wrong.query("up")


def test_refused_connection_is_temporary() -> None:
    port = stack.free_port()  # nothing listens there
    with (
        PrometheusClient(f"http://127.0.0.1:{port}", timeout_s=2) as down,
        pytest.raises(SourceTemporaryError, match="cannot reach"),
    ):
        down.query("up")


def test_a_server_that_does_not_answer_times_out_as_temporary() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # accepts connections (backlog) and never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with PrometheusClient(url, timeout_s=0.3) as slow:
            t0 = time.monotonic()
            with pytest.raises(SourceTemporaryError, match=r"did not answer within 0\.3 s"):
                slow.query("up")
            assert time.monotonic() - t0 < 5
