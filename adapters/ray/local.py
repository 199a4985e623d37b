"""A Ray head on this machine's loopback, started and stopped by its caller (tests and the
review benchmark): ``ray start --head --block`` as a child process, stopped by its id."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from planner.errors import SourcePermanentError, SourceTemporaryError

__all__ = ["LocalRayHead"]


class LocalRayHead:
    """``with LocalRayHead(port=6390, num_cpus=2) as head: RayExecutor(head.address)``.

    Starts ``ray start --head --block`` on 127.0.0.1 in its own session with ``pythonpath``
    (so the workers import this checkout's ``planner``), waits for its port, and on exit sends
    SIGTERM to that session (then SIGKILL after ``stop_timeout_s``). Raises
    ``SourcePermanentError`` when the ``ray`` command is missing and ``SourceTemporaryError``
    when the head does not come up within ``start_timeout_s``.
    """

    def __init__(self, *, port: int = 6390, num_cpus: int = 2, pythonpath: str | None = None,
                 object_store_bytes: int = 200_000_000, start_timeout_s: float = 90.0,
                 stop_timeout_s: float = 30.0) -> None:  # fmt: skip
        self.port = port
        self.num_cpus = num_cpus
        self.pythonpath = pythonpath
        self.object_store_bytes = object_store_bytes
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in __exit__)

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``, for ``ray.init``."""
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> LocalRayHead:
        ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
        if ray is None:
            raise SourcePermanentError(
                "ray", "the ray command is missing; pip install 'llm-capacity-planner[ray]'"
            )
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        if self.pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (self.pythonpath, env.get("PYTHONPATH")) if p
            )
        command = [ray, "start", "--head", "--block", "--node-ip-address=127.0.0.1",
                   f"--port={self.port}", f"--num-cpus={self.num_cpus}", "--num-gpus=0",
                   "--include-dashboard=false", "--disable-usage-stats",
                   f"--object-store-memory={self.object_store_bytes}"]  # fmt: skip
        self.process = subprocess.Popen(
            command, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    time.sleep(2.0)  # the GCS listens before the raylet has registered
                    return self
            except OSError:
                time.sleep(0.5)
        self._stop()
        raise SourceTemporaryError(
            "ray", f"the local head did not start on {self.address}: {self.output()[-2000:]}"
        )

    def output(self) -> str:
        """What ``ray start`` printed so far."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def _stop(self) -> None:
        if self.process is None:
            return
        pgid = self.process.pid  # its own session: process group id = its pid
        if self.process.poll() is None:
            os.killpg(pgid, signal.SIGTERM)
            try:
                self.process.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(pgid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop()
        self._log.close()
