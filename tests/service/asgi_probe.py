"""One HTTP request sent straight to an ASGI app, with a client that can leave mid-request.

``TestClient`` waits for every answer; a probe of "the work stops when the client leaves" needs
a client that sends ``http.disconnect`` after ``leave_after_s`` while the app still computes,
as a browser or ``curl`` does when it is closed. Run it on the app's own event loop
(``TestClient.portal``), so the app's lifespan has run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import anyio
from starlette.types import ASGIApp, Message


@dataclass
class Answer:
    """What the client got back (``status`` None: nothing before it left) and when the app's
    call returned, seconds after the request was sent."""

    status: int | None = None
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    returned_after_s: float = 0.0


async def send_request(
    app: ASGIApp,
    method: str,
    path: str,
    body: bytes = b"",
    *,
    headers: dict[str, str] | None = None,
    leave_after_s: float | None = None,
    query: str = "",
) -> Answer:
    """Send one request to ``app``; the client disconnects ``leave_after_s`` seconds after its
    body was read (None: it waits for the answer)."""
    head = {"host": "localhost", "content-type": "application/json"} | (headers or {})
    head["content-length"] = str(len(body))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in head.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("localhost", 80),
    }
    answer = Answer()
    sent = False
    leaves_at: float | None = None

    async def receive() -> Message:
        nonlocal sent, leaves_at
        if not sent:
            sent = True
            if leave_after_s is not None:
                leaves_at = time.monotonic() + leave_after_s
            return {"type": "http.request", "body": body, "more_body": False}
        while leaves_at is None or time.monotonic() < leaves_at:
            await anyio.sleep(0.01)  # Starlette's is_disconnected() cancels this wait
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {
                k.decode("latin-1"): v.decode("latin-1") for k, v in message.get("headers", [])
            }
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")

    began = time.monotonic()
    await app(scope, receive, send)
    answer.returned_after_s = time.monotonic() - began
    return answer


def contention(work_s: float = 0.3) -> float:
    """Wall seconds per CPU second of a busy loop on this thread now (1 on an idle core): how
    much a busy host stretches what a test times on the wall clock."""
    wall, cpu = time.perf_counter(), time.thread_time()
    while time.thread_time() - cpu < work_s:
        pass
    return max(1.0, (time.perf_counter() - wall) / (time.thread_time() - cpu))
