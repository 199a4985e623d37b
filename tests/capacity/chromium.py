"""A review's HTML page in a real headless Chromium (Debian's ``chromium``), driven over the
DevTools protocol: what the report test and the image test check (charts drawn, tables, console
errors, network requests) and a screenshot."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class _DevTools:
    def __init__(self, url: str) -> None:
        import websocket  # websocket-client, installed with the kubernetes client

        self.ws = websocket.create_connection(url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self.events.append(message)

    def wait_for(self, method: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(e.get("method") == method for e in self.events):
                return
            self.events.append(json.loads(self.ws.recv()))
        raise TimeoutError(method)


def _browser(profile: Path) -> tuple[subprocess.Popen[bytes], int]:
    assert CHROMIUM is not None
    process = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "--window-size=1400,2600",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    port_file = profile / "DevToolsActivePort"
    for _ in range(200):
        if port_file.exists() and port_file.read_text().strip():
            return process, int(port_file.read_text().split()[0])
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    raise TimeoutError("chromium did not open its DevTools port")


@dataclass(frozen=True)
class Rendered:
    """What Chromium made of a report page."""

    divs: int  # chart divs (class plotly-graph-div)
    svgs: int  # plotly SVG roots inside them
    drawn: int  # chart divs with an SVG and a height over 100 px
    tables: int
    errors: list[dict[str, Any]]  # exceptions, console errors, log errors
    requests: list[str]  # URLs the page requested
    screenshot: Path


def render(page: Path, workdir: Path, *, max_height: int = 6000) -> Rendered:
    """Load ``page`` (a file) in a fresh headless Chromium (profile under ``workdir``), wait
    for plotly to draw, and screenshot it to ``workdir/review.png`` (1400 px wide, the top
    ``max_height`` px at most)."""
    workdir.mkdir(parents=True, exist_ok=True)
    process, port = _browser(workdir / "profile")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
            targets = json.load(response)
        target = next(t for t in targets if t["type"] == "page")
        tools = _DevTools(target["webSocketDebuggerUrl"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            tools.call(f"{domain}.enable")
        tools.call("Page.navigate", url=page.as_uri())
        tools.wait_for("Page.loadEventFired")
        time.sleep(1.0)  # plotly draws after load
        charts = tools.call(
            "Runtime.evaluate",
            returnByValue=True,
            expression=(
                "[document.querySelectorAll('.plotly-graph-div').length,"
                " document.querySelectorAll('.plotly-graph-div .main-svg').length,"
                " Array.from(document.querySelectorAll('.plotly-graph-div')).filter("
                "   d => d.querySelector('.main-svg')"
                "        && d.getBoundingClientRect().height > 100).length,"
                " document.querySelectorAll('table').length]"
            ),
        )["result"]["value"]
        layout = tools.call("Page.getLayoutMetrics")
        height = int(layout["cssContentSize"]["height"])
        shot = tools.call(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": 1400, "height": min(height, max_height), "scale": 1},
        )
        screenshot = workdir / "review.png"
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        errors = [
            e
            for e in tools.events
            if e.get("method") == "Runtime.exceptionThrown"
            or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] == "error")
            or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
        ]
        requests = [
            e["params"]["request"]["url"]
            for e in tools.events
            if e.get("method") == "Network.requestWillBeSent"
        ]
        tools.ws.close()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
    divs, svgs, drawn, tables = charts
    return Rendered(divs, svgs, drawn, tables, errors, requests, screenshot)
