"""deploy/Dockerfile built and run for real with Debian's buildah (chroot isolation: no OCI runtime
runs on these machines, their cgroups are in hybrid mode).

No container registry is reachable, so the base image (the Dockerfile's ``BASE_IMAGE``) is made
here: ``debootstrap --variant=minbase bookworm`` with Debian's python3 and python3-venv, from the
mirror apt uses on this machine, trimmed like Debian's slim images (no apt lists or caches, docs,
man pages, locales), then imported into buildah (``buildah from scratch`` + the tree unpacked into
its mount + ``buildah commit``). The Dockerfile then builds on it, installing the Python
dependencies from PyPI (with this machine's CA bundle as the build secret ``ca-bundle``).

The image must: stay under 400 MB (as ``buildah images`` counts); import every module of
planner/ and adapters/ and the PostgreSQL driver; write a capacity review whose HTML page draws
its charts in Chromium (plotly is pruned to its JavaScript bundle); serve ``/healthz`` and
``/readyz`` from ``planner serve`` (its ENTRYPOINT and CMD) as UID 10001 on loopback; and write
nothing outside its two volumes (/var/lib/planner, /tmp), which the container's overlay upper
directory shows.

Everything lives under ``PLANNER_IMAGE_CACHE`` (default /tmp/planner-image-cache), locked for the
duration: the base root file system as a tarball named by a hash of how it is made (suite,
packages, mirror, trimming), and buildah's storage, where the layers up to the dependency
install are kept between runs (a warm run rebuilds only the project layers); everything else
the build made is removed at the end. Skips only where buildah or debootstrap is missing (as
root, ``deploy/dev/install-deps.sh`` installs both) or when not root.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.capacity.chromium import CHROMIUM, render
from tests.deploy import stack

pytestmark = pytest.mark.integration

CACHE = Path(os.environ.get("PLANNER_IMAGE_CACHE", "/tmp/planner-image-cache"))
SUITE = "bookworm"
# What the Dockerfile asks of BASE_IMAGE: Debian bookworm, Python 3.11 as python3 with its venv
# module, apt and ldd (minbase has both).
BASE_PACKAGES = ("python3", "python3-venv")
TRIMMED = (
    "var/cache/apt",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
)
IMAGE = "localhost/llm-capacity-planner:ci"
SIZE_LIMIT_MB = 400
UID = GID = 10001  # the chart's runAsUser/runAsGroup (test_dockerfile.py checks the Dockerfile)
# What buildah itself writes into a container's upper directory for `buildah run`.
BUILDAH_RUN_FILES = {"etc", "etc/hosts", "etc/resolv.conf", "etc/hostname", "run"}
DEPS_STEP = "pip install -q --no-compile -r requirements.txt"
CACHED_DEPS = "localhost/planner-image-cache:dependencies"


def debian_mirror() -> str:
    """The first ``deb`` URI apt uses for ``SUITE`` here (deb822 or one-line sources)."""
    files = [Path("/etc/apt/sources.list")]
    files += sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    files += sorted(Path("/etc/apt/sources.list.d").glob("*.list"))
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text()
        for block in re.split(r"\n\s*\n", text):
            fields = {
                k.strip().lower(): v.strip()
                for k, _, v in (ln.partition(":") for ln in block.splitlines())
                if not k.startswith("#") and v
            }
            if (
                "deb" in fields.get("types", "").split()
                and SUITE in fields.get("suites", "").split()
            ):
                return fields["uris"].split()[0]
        for line in text.splitlines():
            words = re.sub(r"\[[^]]*\]", "", line).split()
            if len(words) >= 3 and words[0] == "deb" and words[2] == SUITE:
                return words[1]
    return "http://deb.debian.org/debian"


def ca_bundle() -> Path | None:
    """The CA bundle pip trusts here (a TLS-intercepting proxy's CA lives in it)."""
    for candidate in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE")):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    system = Path("/etc/ssl/certs/ca-certificates.crt")
    return system if system.is_file() else None


@dataclass
class Buildah:
    """buildah on its own storage under ``CACHE``, chroot isolation, output logged."""

    log: Path
    timings: dict[str, float] = field(default_factory=dict)

    def argv(self, *args: str) -> list[str]:
        return [
            "buildah",
            "--root",
            str(CACHE / "storage"),
            "--runroot",
            str(CACHE / "run"),
            "--storage-driver",
            "overlay",
            *args,
        ]

    def __call__(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(
            self.argv(*args),
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "BUILDAH_ISOLATION": "chroot"},
        )
        with self.log.open("a") as log:
            log.write(f"$ buildah {' '.join(args)}\n{done.stdout}{done.stderr}\n")
        if done.returncode:
            raise AssertionError(
                f"buildah {args[:3]} failed:\n{(done.stdout + done.stderr)[-4000:]}"
            )
        return done.stdout

    def timed(self, name: str, *args: str, timeout: float = 300) -> str:
        start = time.monotonic()
        out = self(*args, timeout=timeout)
        self.timings[name] = round(time.monotonic() - start, 1)
        return out

    def image_exists(self, name: str) -> bool:
        return (
            subprocess.run(
                self.argv("inspect", "--type", "image", name), check=False, capture_output=True
            ).returncode
            == 0
        )


def base_key() -> str:
    recipe = {
        "suite": SUITE,
        "variant": "minbase",
        "packages": BASE_PACKAGES,
        "mirror": debian_mirror(),
        "trimmed": TRIMMED,
        "arch": os.uname().machine,
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def base_tarball(key: str, log: Path) -> Path:
    """The trimmed debootstrap root file system, made once per recipe."""
    tarball = CACHE / f"base-{SUITE}-{key}.tar"
    for other in CACHE.glob("base-*.tar"):
        if other != tarball:
            other.unlink()  # made by an older recipe
    if tarball.exists():
        return tarball
    rootfs = CACHE / f"rootfs-{key}"
    subprocess.run(["rm", "-rf", str(rootfs)], check=True)
    with log.open("a") as out:
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                SUITE,
                str(rootfs),
                debian_mirror(),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=True,
            timeout=400,
        )
    for rel in TRIMMED:
        for entry in (rootfs / rel).glob("*"):
            subprocess.run(["rm", "-rf", str(entry)], check=True)
    partial = tarball.with_suffix(".partial")
    subprocess.run(
        ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(partial), "."], check=True
    )
    partial.rename(tarball)
    subprocess.run(["rm", "-rf", str(rootfs)], check=True)
    return tarball


def import_base(buildah: Buildah, tarball: Path, name: str) -> None:
    """``buildah from scratch``, the tarball unpacked into its mount, committed as ``name``."""
    if buildah.image_exists(name):
        return
    container = buildah("from", "--name", "planner-base-import", "scratch").strip()
    mount = buildah("mount", container).strip()
    subprocess.run(
        ["tar", "--numeric-owner", "-xpf", str(tarball), "-C", mount], check=True, timeout=120
    )
    buildah("umount", container)
    buildah("commit", "--quiet", "--format", "docker", container, name)
    buildah("rm", container)


def cache_chain(build_log: str) -> list[str]:
    """Image ids (as printed, abbreviated) of the build stage's steps up to the dependency
    install: the layers worth keeping for the next run."""
    ids: list[str] = []
    deps_seen = False
    for line in build_log.splitlines():
        if "STEP" in line and DEPS_STEP in line:
            deps_seen = True
        found = re.match(r"--> (?:Using cache )?([0-9a-f]{11,64})\b", line)
        if found:
            ids.append(found.group(1))
            if deps_seen:
                return ids
    return []


@dataclass
class BuiltImage:
    buildah: Buildah
    size_mb: float
    config: dict[str, object]


@dataclass
class Container:
    """A working container of the image and its mounted root (the overlay's merged view)."""

    name: str
    rootfs: Path


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BuiltImage]:
    missing = [tool for tool in ("buildah", "debootstrap") if shutil.which(tool) is None]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed: run deploy/dev/install-deps.sh as root "
            "(Debian packages buildah, debootstrap)"
        )
    if os.geteuid() != 0:
        pytest.skip("building the image needs root (buildah's chroot isolation, debootstrap)")
    CACHE.mkdir(parents=True, exist_ok=True)
    log = tmp_path_factory.mktemp("image") / "build.log"
    with (CACHE / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        buildah = Buildah(log)
        buildah("rm", "--all")  # containers a killed run left behind
        start = time.monotonic()
        key = base_key()
        tarball = base_tarball(key, log)
        buildah.timings["base rootfs"] = round(time.monotonic() - start, 1)
        base = f"localhost/planner-test-base:{SUITE}-{key}"
        start = time.monotonic()
        import_base(buildah, tarball, base)
        buildah.timings["base import"] = round(time.monotonic() - start, 1)
        secret = ca_bundle()
        out = buildah.timed(
            "build",
            "bud",
            "--isolation",
            "chroot",
            "--layers",
            "--pull-never",
            "--format",
            "docker",
            *(["--secret", f"id=ca-bundle,src={secret}"] if secret else []),
            "--build-arg",
            f"BASE_IMAGE={base}",
            "-f",
            str(stack.REPO / "deploy" / "Dockerfile"),
            "-t",
            IMAGE,
            str(stack.REPO),
            timeout=480,
        )
        chain = cache_chain(out)
        if chain:  # a tag keeps the dependency layer (and its parents) through `rmi` below
            buildah("tag", chain[-1], CACHED_DEPS)
        keep = [*chain, buildah("images", "--quiet", "--no-trunc", base).strip()]
        listing = json.loads(buildah("images", "--json", IMAGE))
        value, unit = listing[0]["size"].split()
        size_mb = float(value) * {"kB": 1e-3, "MB": 1.0, "GB": 1e3}[unit]
        inspect = json.loads(buildah("inspect", "--type", "image", IMAGE))
        try:
            yield BuiltImage(buildah, size_mb, inspect["Docker"]["config"])
        finally:
            buildah("rm", "--all")
            every = buildah("images", "--all", "--quiet", "--no-trunc").split()
            kept = [k.removeprefix("sha256:") for k in keep]
            stale = [i for i in every if not i.removeprefix("sha256:").startswith(tuple(kept))]
            if stale:
                buildah("rmi", "--force", *stale)
            print(f"image build timings (s): {buildah.timings}; size {size_mb} MB")


@pytest.fixture
def container(image: BuiltImage) -> Iterator[Container]:
    """A fresh container per test: its upper directory shows what that test's runs wrote."""
    name = image.buildah("from", "--pull-never", IMAGE).strip()
    try:
        yield Container(name, Path(image.buildah("mount", name).strip()))
    finally:
        image.buildah("rm", name)


def run_in(
    image: BuiltImage,
    container: Container,
    *argv: str,
    volumes: tuple[str, ...] = (),
    timeout: float = 120,
) -> str:
    """A command in ``container``, as the image's user (USER 10001:10001); returns its stdout."""
    mounts = [arg for volume in volumes for arg in ("--volume", volume)]
    return image.buildah(
        "run", "--isolation", "chroot", *mounts, container.name, "--", *argv, timeout=timeout
    )


def test_image_is_under_400_mb_with_the_charts_user_and_entrypoint(image: BuiltImage) -> None:
    assert image.size_mb < SIZE_LIMIT_MB, f"image is {image.size_mb} MB"
    config = image.config
    assert config["User"] == f"{UID}:{GID}"
    assert config["Entrypoint"] == ["planner"]
    assert config["Cmd"] == ["serve"]
    assert config["WorkingDir"] == "/var/lib/planner"
    assert "8080/tcp" in config["ExposedPorts"]  # type: ignore[operator]
    assert "/healthz" in " ".join(config["Healthcheck"]["Test"])  # type: ignore[index]


def test_image_holds_no_shell_package_manager_or_setuid_program(container: Container) -> None:
    root = container.rootfs
    for tool in (
        "bin/sh",
        "bin/bash",
        "usr/bin/apt-get",
        "usr/bin/dpkg",
        "usr/bin/su",
        "usr/bin/pip",
    ):
        assert not (root / tool).exists(), tool
    setuid = [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and p.stat().st_mode & 0o6000
    ]
    assert setuid == []
    home = (root / "var" / "lib" / "planner").stat()
    assert (home.st_uid, home.st_gid) == (UID, GID)
    assert f"planner:x:{UID}:{GID}:" in (root / "etc" / "passwd").read_text()
    assert not list((root / "opt" / "venv").rglob("__pycache__"))
    assert os.readlink(root / "var" / "run") == "/run"  # the service-account token's mount path
    assert (root / "etc" / "ld.so.cache").is_file()


def test_every_module_imports_in_the_image(image: BuiltImage, container: Container) -> None:
    out = run_in(
        image,
        container,
        "python",
        "-c",
        "import importlib, os, pkgutil, planner, adapters, psycopg\n"
        "names = [m.name for p in (planner, adapters)\n"
        "         for m in pkgutil.walk_packages(p.__path__, p.__name__ + '.')\n"
        "         if not m.name.endswith(('.__main__', '.migrations.env'))]\n"
        "for n in names: importlib.import_module(n)\n"
        "print(len(names), 'modules', os.getuid(), os.getgid(), 'libpq', psycopg.pq.version())",
    )
    count, _, uid, gid, _, libpq = out.split()
    assert int(count) > 50
    assert (int(uid), int(gid)) == (UID, GID)
    assert int(libpq) >= 100000  # libpq loads: the chart's PostgreSQL mode works


def test_the_numeric_stack_computes_in_the_image_what_it_computes_here(
    image: BuiltImage, container: Container, tmp_path: Path
) -> None:
    """numpy, scipy, scikit-learn and pyarrow after pruning and stripping: the CLI's prediction
    and straggler replay match this machine's to 1e-9, and a calibration fit completes."""
    data, examples = stack.REPO / "tests" / "data", stack.REPO / "deploy" / "examples"
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o1777)
    volumes = (f"{data}:/data:ro", f"{examples}:/examples:ro", f"{out}:/out")
    commands = {
        "predict": ["predict", "{examples}/llama3-8b-h100.yaml", "--json"],
        "stragglers": [
            "stragglers",
            "{data}/traces/bytedance-straggler-trace-AR.parquet",
            "--meta",
            "{data}/traces/bytedance-straggler-meta-AR.yaml",
            "--json",
        ],
    }
    for name, argv in commands.items():
        inside = [a.format(data="/data", examples="/examples") for a in argv]
        here = [a.format(data=data, examples=examples) for a in argv]
        got = json.loads(run_in(image, container, "planner", *inside, volumes=volumes))
        want = json.loads(
            subprocess.run(
                [stack.PYTHON, "-m", "planner", *here],
                check=True,
                capture_output=True,
                text=True,
                cwd=stack.REPO,
            ).stdout
        )
        key = "slowdown" if name == "stragglers" else "iteration_time_s"
        assert got[key] == pytest.approx(want[key], rel=1e-9), name
    run_in(
        image,
        container,
        "planner",
        "calibrate",
        "fit",
        "--samples",
        "/data/calibration/cpu_epyc_2core_fp32",
        "--out",
        "/out/cal.json",
        volumes=volumes,
        timeout=240,
    )
    calibration = json.loads((out / "cal.json").read_text())
    assert calibration["operators"]
    assert calibration["collectives"]
    assert calibration["skipped"] == {}


def test_planner_review_renders_in_the_image(
    image: BuiltImage, container: Container, tmp_path: Path
) -> None:
    """``planner review`` on the example files in the image (so a pruning mistake cannot ship):
    the same forecast as here, and its HTML page draws every chart in Chromium, offline."""
    examples = stack.REPO / "deploy" / "examples"
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o1777)
    argv = [
        "review",
        "{examples}/fleet.yaml",
        "{examples}/plan.yaml",
        "--jobs",
        "{examples}/jobs-snapshot.json",
        "--what-if",
        "{examples}/what-if-more-h100.yaml",
        "--samples",
        "20",
        "--no-sizing",
        "--out",
        "{out}",
    ]
    volumes = (f"{examples}:/examples:ro", f"{out}:/out")
    run_in(
        image,
        container,
        "planner",
        *[a.format(examples="/examples", out="/out/review") for a in argv],
        volumes=volumes,
        timeout=240,
    )
    subprocess.run(
        [
            stack.PYTHON,
            "-m",
            "planner",
            *[a.format(examples=examples, out=tmp_path / "here") for a in argv],
        ],
        check=True,
        capture_output=True,
        cwd=stack.REPO,
        env={**os.environ, "PYTHONPATH": str(stack.REPO)},
    )
    got = json.loads((out / "review" / "review.json").read_text())
    want = json.loads((tmp_path / "here" / "review.json").read_text())
    assert [r["scenario"] for r in got["comparison"]] == [r["scenario"] for r in want["comparison"]]
    for mine, theirs in zip(got["comparison"], want["comparison"], strict=True):
        assert mine["utilisation"] == pytest.approx(theirs["utilisation"], rel=1e-9)
        assert mine["expected_deadline_misses"] == pytest.approx(
            theirs["expected_deadline_misses"], rel=1e-9
        )
    if CHROMIUM is None:
        pytest.skip("chromium is not installed: the page was written but not drawn")
    shown = render(out / "review" / "review.html", tmp_path)
    assert shown.divs == 7
    assert shown.drawn == shown.divs
    assert shown.errors == []
    assert all(url.startswith(("file:", "data:", "blob:")) for url in shown.requests)


def test_planner_serve_answers_healthz_as_non_root_writing_only_to_its_volumes(
    image: BuiltImage, container: Container, tmp_path: Path
) -> None:
    state, tmp = tmp_path / "state", tmp_path / "tmp"
    state.mkdir()
    tmp.mkdir()
    os.chown(state, UID, GID)
    tmp.chmod(0o1777)
    port = stack.free_port()
    entrypoint = [*image.config["Entrypoint"], *image.config["Cmd"]]  # type: ignore[misc]
    log_path = tmp_path / "serve.log"
    argv = image.buildah.argv(
        "run",
        "--isolation",
        "chroot",
        "--volume",
        f"{state}:/var/lib/planner",
        "--volume",
        f"{tmp}:/tmp",
        "--env",
        "PLANNER_HOST=127.0.0.1",
        "--env",
        f"PLANNER_PORT={port}",
        container.name,
        "--",
        *entrypoint,
    )
    start = time.monotonic()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        status = wait_for_health(f"http://127.0.0.1:{port}", proc, timeout_s=120)
        image.buildah.timings["serve to /healthz"] = round(time.monotonic() - start, 1)
        assert status == 200, log_path.read_text()[-3000:]
        # ready once its ingest process (a child of the API's) has reported
        ready = wait_for_ready(f"http://127.0.0.1:{port}", proc, timeout_s=120)
        assert ready.status_code == 200, ready.text
        server = serving_process(proc.pid)
        assert server is not None, "no `planner serve` process under buildah run"
        assert process_ids(server) == (UID, GID)
        ingest = children(server)
        assert ingest, "no ingest process under `planner serve`"
        assert {process_ids(pid) for pid in ingest} == {(UID, GID)}
        stop(proc, server)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the session this test started
            proc.wait(timeout=30)
    db = state / "planner.db"
    assert db.exists(), log_path.read_text()[-3000:]
    assert (db.stat().st_uid, db.stat().st_gid) == (UID, GID)
    upper = container.rootfs.parent / "diff"  # the container's overlay upper directory
    written = {str(p.relative_to(upper)) for p in upper.rglob("*")}
    assert written <= BUILDAH_RUN_FILES, (
        f"written outside the volumes: {written - BUILDAH_RUN_FILES}"
    )


def wait_for_health(url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            return httpx.get(f"{url}/healthz", timeout=5).status_code
        except httpx.TransportError:
            time.sleep(0.5)
    return -1


def wait_for_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> httpx.Response:
    """The first ``/readyz`` answer that is 200, or the last one at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        ready = httpx.get(f"{url}/readyz", timeout=10)
        if ready.status_code == 200 or time.monotonic() > deadline or proc.poll() is not None:
            return ready
        time.sleep(0.5)


def children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def serving_process(root_pid: int) -> int | None:
    """The ``planner serve`` interpreter among the descendants of ``root_pid``."""
    todo = [root_pid]
    while todo:
        pid = todo.pop()
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"python" in a for a in cmdline[:1]) and b"serve" in cmdline:
            return pid
        todo += children(pid)
    return None


def process_ids(pid: int) -> tuple[int, int]:
    """Real UID and GID of ``pid`` (all four of each must agree)."""
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    uids, gids = set(status["Uid"].split()), set(status["Gid"].split())
    assert len(uids) == 1, status["Uid"]
    assert len(gids) == 1, status["Gid"]
    return int(uids.pop()), int(gids.pop())


def stop(proc: subprocess.Popen[bytes], server: int) -> None:
    """SIGTERM to the planner process (what a kubelet sends), then wait for buildah to return."""
    os.kill(server, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
