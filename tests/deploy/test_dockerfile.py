"""deploy/Dockerfile, checked statically (no Docker engine or hadolint on these machines):
parsed into instructions, then the essentials asserted."""

from __future__ import annotations

import json
import re
import shlex

from tests.deploy import stack

DOCKERFILE = stack.REPO / "deploy" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "dangling line continuation"
    return out


def test_dockerfile_parses_into_known_instructions() -> None:
    known = {
        "ARG",
        "FROM",
        "ENV",
        "WORKDIR",
        "COPY",
        "RUN",
        "LABEL",
        "USER",
        "EXPOSE",
        "HEALTHCHECK",
        "ENTRYPOINT",
        "CMD",
    }
    ins = instructions()
    assert {i for i, _ in ins} <= known
    for word, args in ins:
        if word in ("ENTRYPOINT", "CMD"):
            assert isinstance(json.loads(args), list)  # exec form: signals reach the process
        if word == "HEALTHCHECK":
            json.loads(args[args.index("CMD") + 3 :].strip())


def test_slim_base_non_root_and_healthcheck() -> None:
    ins = instructions()
    froms = [a for i, a in ins if i == "FROM"]
    assert len(froms) == 2
    assert all("slim" in f for f in froms)
    assert all(re.search(r"python:\$\{PYTHON_VERSION\}-slim", f) for f in froms)
    final_stage = ins[max(k for k, (i, _) in enumerate(ins) if i == "FROM") :]
    users = [a for i, a in final_stage if i == "USER"]
    assert users
    assert users[-1].split(":")[0] not in ("0", "root")
    health = [a for i, a in final_stage if i == "HEALTHCHECK"]
    assert len(health) == 1
    assert "/healthz" in health[0]
    assert "--timeout=" in health[0]
    assert ("EXPOSE", "8080") in final_stage
    assert json.loads(dict(final_stage)["ENTRYPOINT"]) == ["planner"]
    assert json.loads(dict(final_stage)["CMD"]) == ["serve"]
    env = " ".join(a for i, a in final_stage if i == "ENV")
    assert "PLANNER_HOST=0.0.0.0" in env


def test_copied_sources_exist_and_nothing_is_fetched_with_add() -> None:
    ins = instructions()
    assert not [a for i, a in ins if i == "ADD"]
    for word, args in ins:
        if word != "COPY" or args.startswith("--from"):
            continue
        *sources, _dest = shlex.split(args)
        for src in sources:
            assert (stack.REPO / src).exists(), f"COPY {src}: not in the repository"
