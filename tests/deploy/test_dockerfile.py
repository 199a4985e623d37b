"""deploy/Dockerfile and its build helpers, checked statically (the image itself is built and run
by tests/deploy/test_image_build.py): the Dockerfile parsed into instructions and its essentials
asserted against the Helm chart, the build context against .dockerignore, and the helpers'
ELF and file-tree logic on real files."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import struct
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.deploy import stack

DOCKERFILE = stack.REPO / "deploy" / "Dockerfile"
DOCKERIGNORE = stack.REPO / ".dockerignore"
CHART = stack.REPO / "helm" / "llm-capacity-planner"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
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


def stages() -> list[list[tuple[str, str]]]:
    """Instructions per stage (each starting with its FROM); the global ARGs are left out."""
    out: list[list[tuple[str, str]]] = []
    for word, args in instructions():
        if word == "FROM":
            out.append([])
        if out:
            out[-1].append((word, args))
    return out


def helper(name: str) -> ModuleType:
    """deploy/<name>.py imported as a module (deploy/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, stack.REPO / "deploy" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def chart_pod_security() -> dict[str, int]:
    return dict(yaml.safe_load((CHART / "values.yaml").read_text())["podSecurityContext"])


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


def test_base_image_is_a_build_argument_and_the_final_stage_is_scratch() -> None:
    ins = instructions()
    assert ins[0] == ("ARG", "BASE_IMAGE=python:3.11-slim-bookworm")
    build, final = stages()
    assert build[0] == ("FROM", "${BASE_IMAGE} AS build")
    assert final[0] == ("FROM", "scratch")
    # scratch has no shell: the final stage only copies the tree the build stage assembled.
    assert not [a for i, a in final if i == "RUN"]
    assert [a for i, a in final if i == "COPY"] == ["--from=build /runtime /"]
    runs = " ".join(a for i, a in build if i == "RUN")
    assert "prune_venv.py /opt/venv" in runs
    assert "runtime_root.py /runtime" in runs
    assert "--no-compile" in runs  # no bytecode: it would double the venv


def test_final_stage_runs_as_the_charts_user_with_state_on_the_charts_volume() -> None:
    final = stages()[-1]
    security = chart_pod_security()
    uid, gid = security["runAsUser"], security["runAsGroup"]
    users = [a for i, a in final if i == "USER"]
    assert users == [f"{uid}:{gid}"]  # numeric: runAsNonRoot can verify it
    build_runs = " ".join(a for i, a in stages()[0] if i == "RUN")
    assert f"--user planner:{uid}:{gid} --home /var/lib/planner" in build_runs
    # the pod's volume mounts (the deployment's containers share them through _helpers.tpl)
    templates = "".join(p.read_text() for p in sorted((CHART / "templates").iterdir()))
    assert "mountPath: /var/lib/planner" in templates
    assert "mountPath: /tmp" in templates
    env = dict(
        kv.split("=", 1) for i, a in final if i == "ENV" for kv in shlex.split(a) if "=" in kv
    )
    assert env["PLANNER_DATABASE_URL"] == "sqlite:////var/lib/planner/planner.db"
    assert env["HOME"] == env["XDG_STATE_HOME"] == "/var/lib/planner"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"  # read-only root file system
    assert env["PLANNER_HOST"] == "0.0.0.0"
    assert env["PATH"].startswith("/opt/venv/bin:")
    assert ("WORKDIR", "/var/lib/planner") in final


def test_healthcheck_port_and_entrypoint() -> None:
    final = stages()[-1]
    health = [a for i, a in final if i == "HEALTHCHECK"]
    assert len(health) == 1
    assert "/healthz" in health[0]
    assert "--timeout=" in health[0]
    assert ("EXPOSE", "8080") in final
    assert "containerPort: 8080" in (CHART / "templates" / "deployment.yaml").read_text()
    assert json.loads(dict(final)["ENTRYPOINT"]) == ["planner"]
    assert json.loads(dict(final)["CMD"]) == ["serve"]


def test_copied_sources_exist_and_the_build_context_admits_them() -> None:
    ignore = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ignore[0] == "*"  # everything out, then what the build needs back in
    admitted = {line[1:] for line in ignore if line.startswith("!")}
    ins = instructions()
    assert not [a for i, a in ins if i == "ADD"]
    for word, args in ins:
        if word != "COPY" or args.startswith("--from"):
            continue
        *sources, _dest = shlex.split(args)
        for src in sources:
            assert (stack.REPO / src).exists(), f"COPY {src}: not in the repository"
            assert src in admitted, f"COPY {src}: .dockerignore keeps it out of the context"
    for path in admitted:
        assert (stack.REPO / path).exists(), f".dockerignore admits {path}, which does not exist"


def elf_with_load_segment(p_offset: int, p_vaddr: int, p_align: int = 0x1000) -> bytes:
    """A minimal 64-bit little-endian ELF header with one PT_LOAD program header."""
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x20, 64)  # e_phoff
    struct.pack_into("<HH", header, 0x36, 56, 1)  # e_phentsize, e_phnum
    segment = struct.pack("<IIQQQQQQ", 1, 5, p_offset, p_vaddr, p_vaddr, 0, 0, p_align)
    return bytes(header) + segment


def test_prune_venv_loadable_is_the_loaders_alignment_rule() -> None:
    loadable = helper("prune_venv").loadable
    assert loadable(Path(os.path.realpath(sys.executable)).read_bytes())
    assert loadable(elf_with_load_segment(0x1F000, 0x21F000))
    # The shape strip leaves behind in a patchelf-modified library: ld.so refuses it with
    # "ELF load command address/offset not page-aligned".
    assert not loadable(elf_with_load_segment(0x1F2A8, 0x21F000))
    assert not loadable(b"#!/bin/sh\n")


def test_prune_venv_keeps_only_what_the_review_draws_with(tmp_path: Path) -> None:
    """plotly pruned to its bundle, its default template and its __init__ (in a copy of the
    installed package): the review page draws from the pruned package exactly as before."""
    import shutil
    import subprocess

    import plotly

    venv = tmp_path / "venv"
    site = venv / "lib" / "site-packages"
    shutil.copytree(
        Path(plotly.__file__).parent,
        site / "plotly",
        ignore=shutil.ignore_patterns("graph_objs", "validators", "__pycache__"),
    )
    (site / "plotly" / "graph_objs").mkdir()
    (site / "plotly" / "graph_objs" / "_figure.py").write_text("class Figure: ...\n")
    (venv / "share" / "jupyter" / "labextensions" / "jupyterlab-plotly").mkdir(parents=True)
    (venv / "share" / "jupyter" / "labextensions" / "jupyterlab-plotly" / "x.js").write_text("x")
    removed = helper("prune_venv").prune_plotly(site, venv)
    left = sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file())
    assert left == [
        "plotly/__init__.py",
        "plotly/package_data/plotly.min.js",
        "plotly/package_data/templates/plotly.json",
    ]
    assert not (venv / "share" / "jupyter").exists()
    assert removed > 4_000_000  # the widget bundle alone is 4.8 MB
    # The review's HTML reads the pruned package (a fresh interpreter finds it first).
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from planner.capacity.html import plotly_assets; "
        "bundle, template = plotly_assets(); print(len(bundle), sorted(template))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(site)],
        check=True,
        capture_output=True,
        text=True,
        cwd=stack.REPO,
        env={**os.environ, "PYTHONPATH": str(stack.REPO)},
    ).stdout.split(maxsplit=1)
    assert int(out[0]) > 3_000_000
    assert out[1].strip() == "['data', 'layout']"


def test_runtime_root_recreates_each_link_on_the_way(tmp_path: Path) -> None:
    runtime_root = helper("runtime_root")
    src = tmp_path / "src"
    (src / "usr" / "bin").mkdir(parents=True)
    (src / "usr" / "bin" / "python3.11").write_text("interpreter")
    (src / "usr" / "bin" / "python3").symlink_to("python3.11")
    (src / "bin").symlink_to("usr/bin")
    (src / "venv" / "bin").mkdir(parents=True)
    (src / "venv" / "bin" / "python").symlink_to(src / "bin" / "python3")
    (src / "tree" / "test").mkdir(parents=True)
    (src / "tree" / "test" / "skipped.py").write_text("")
    (src / "tree" / "kept.py").write_text("kept")
    dest = tmp_path / "dest"
    root = runtime_root.RootBuilder(dest)
    root.copy_path(src / "venv" / "bin" / "python")
    root.copy_tree(src / "tree", {"test"})

    def out(path: Path) -> Path:
        return Path(dest, *path.parts[1:])

    assert os.readlink(out(src / "venv" / "bin" / "python")) == str(src / "bin" / "python3")
    assert os.readlink(out(src / "bin")) == "usr/bin"
    assert os.readlink(out(src / "usr" / "bin" / "python3")) == "python3.11"
    assert out(src / "usr" / "bin" / "python3.11").read_text() == "interpreter"
    assert out(src / "tree" / "kept.py").read_text() == "kept"
    assert not out(src / "tree" / "test").exists()
    assert root.copied == len("interpreter") + len("kept")


@pytest.mark.skipif(not Path("/usr/bin/ldd").exists(), reason="ldd (glibc's libc-bin) absent")
def test_runtime_root_finds_the_interpreters_libraries() -> None:
    libs = helper("runtime_root").shared_libraries([Path(os.path.realpath(sys.executable))])
    names = {p.name for p in libs}
    assert "libc.so.6" in names
    assert any(n.startswith("ld-linux") for n in names)  # the dynamic loader itself
    assert all(p.is_absolute() and p.exists() for p in libs)
