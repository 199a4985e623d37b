"""Shrink the service's virtual environment in the build stage of deploy/Dockerfile.

Usage (as root, in the build stage, with binutils' ``strip`` on PATH)::

    /opt/venv/bin/python prune_venv.py /opt/venv

Everything ``planner serve`` and the CLI import stays (tests/deploy/test_image_build.py imports
every module of planner/ and adapters/ in the built image and serves /healthz from it). Removed:

- pip and setuptools: nothing is installed at run time;
- test suites, bytecode caches, C/C++ headers and Cython sources: build time only;
- ``kubernetes.aio``, the asyncio flavour of the Kubernetes client (the planner uses the
  synchronous client);
- Arrow Flight (RPC) and Arrow's S3 filesystem: traces are read from local files;
- plotly but its data files the review's HTML embeds (``package_data/plotly.min.js``, the
  plotly.js bundle, and ``package_data/templates/plotly.json``, its default template) and its
  ``__init__``: ``planner.capacity.figures`` writes plotly.js figures directly, so plotly's
  Python figure classes (``graph_objs``, ``validators``: 53 MB), Plotly Express, the figure
  factory, the Jupyter widget bundle and the JupyterLab extension (also under the venv's
  ``share/jupyter``) are never loaded. The image test renders a review in the built image;
- debug symbols of shared libraries (``strip --strip-unneeded``), except where stripping would
  leave a library the dynamic loader refuses: libraries that auditwheel patched with patchelf
  (e.g. numpy's OpenBLAS) can come out of ``strip`` with LOAD segments whose file offset and
  address disagree modulo the alignment ("ELF load command address/offset not page-aligned");
  those keep their symbols.

Identical files (the same libgfortran in numpy.libs and scipy.libs, pyarrow's three copies of
libarrow_python) become relative symbolic links to one copy. Prints what it saved, in MiB.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path

BUILD_ONLY_SUFFIXES = {".pyx", ".pxd", ".pxi", ".h", ".hpp", ".c", ".cc", ".cpp"}
UNUSED = [
    "kubernetes/aio",
    "pyarrow/include",
    "pyarrow/includes",
    "pyarrow/src",
    "pyarrow/*flight*",
    "pyarrow/libarrow_s3.*",
    "pyarrow/_s3fs.*",
    "pyarrow/_pyarrow_cpp_tests.*",
]
#: The files of the ``plotly`` package that stay (relative to it); everything else goes.
PLOTLY_KEEP = {"__init__.py", "package_data/plotly.min.js", "package_data/templates/plotly.json"}
PT_LOAD = 1


def tree_size(root: Path) -> int:
    """Bytes in the regular files under ``root`` (symbolic links not followed)."""
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def loadable(elf: bytes) -> bool:
    """True when every PT_LOAD segment of a 64-bit little-endian ELF has
    ``p_vaddr % p_align == p_offset % p_align`` (what ld.so checks before mapping it)."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        return False
    (phoff,) = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, _filesz, _memsz, p_align = struct.unpack_from(
            "<IIQQQQQQ", elf, phoff + i * phentsize
        )
        if p_type == PT_LOAD and p_align > 1 and (p_vaddr - p_offset) % p_align:
            return False
    return True


def strip_libraries(site: Path) -> tuple[int, list[Path]]:
    """Strip every shared library in place when the result stays loadable; returns
    (bytes saved, libraries kept as they were)."""
    saved, kept = 0, []
    for lib in sorted(site.rglob("*.so*")):
        if lib.is_symlink() or not lib.is_file():
            continue
        out = lib.with_name(lib.name + ".stripped")
        done = subprocess.run(
            ["strip", "--strip-unneeded", "-o", str(out), str(lib)],
            check=False,
            capture_output=True,
        )
        if done.returncode == 0 and loadable(out.read_bytes()):
            saved += lib.stat().st_size - out.stat().st_size
            shutil.copymode(lib, out)
            out.replace(lib)
        else:
            out.unlink(missing_ok=True)
            kept.append(lib)
    return saved, kept


def link_duplicates(site: Path) -> int:
    """Replace each file identical to an earlier one (64 KiB and up) with a relative symlink."""
    first: dict[tuple[int, str], Path] = {}
    saved = 0
    for path in sorted(site.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.stat().st_size < 65536:
            continue
        key = (path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
        if key not in first:
            first[key] = path
            continue
        path.unlink()
        path.symlink_to(os.path.relpath(first[key], path.parent))
        saved += key[0]
    return saved


def prune_plotly(site: Path, venv: Path) -> int:
    """Remove every file of the plotly package but ``PLOTLY_KEEP`` (then the emptied
    directories) and the venv's JupyterLab extensions; returns the bytes removed."""
    removed = 0
    package = site / "plotly"
    if package.is_dir():
        for path in sorted(package.rglob("*"), reverse=True):  # files before their directories
            rel = path.relative_to(package).as_posix()
            if path.is_dir() and not path.is_symlink():
                if not any(path.iterdir()):
                    path.rmdir()
            elif rel not in PLOTLY_KEEP:
                removed += path.lstat().st_size
                path.unlink()
        missing = [k for k in PLOTLY_KEEP if not (package / k).is_file()]
        if missing:
            sys.exit(f"prune_venv: plotly lacks {', '.join(missing)}: the review cannot draw")
    jupyter = venv / "share" / "jupyter"
    if jupyter.is_dir():
        removed += tree_size(jupyter)
        shutil.rmtree(jupyter)
    return removed


def main(venv: Path) -> None:
    before = tree_size(venv)
    if Path(sys.prefix).resolve() != venv.resolve():
        sys.exit(f"prune_venv: run it with {venv}/bin/python, not {sys.executable}")
    subprocess.run(
        [sys.executable, "-m", "pip", "uninstall", "-q", "-y", "pip", "setuptools"], check=True
    )
    site = Path(sysconfig.get_path("purelib"))
    for d in sorted(site.rglob("*"), reverse=True):  # deepest first
        if d.is_dir() and d.name in ("tests", "__pycache__") and d.parent != site:
            shutil.rmtree(d)
    for f in list(site.rglob("*")):
        if f.suffix in BUILD_ONLY_SUFFIXES and f.is_file():
            f.unlink()
    for pattern in UNUSED:
        for p in site.glob(pattern):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
    plotly = prune_plotly(site, venv)
    stripped, kept = strip_libraries(site)
    linked = link_duplicates(site)
    mib = 2**20
    print(
        f"prune_venv: {venv} {before / mib:.0f} -> {tree_size(venv) / mib:.0f} MiB "
        f"(plotly {plotly / mib:.1f}, strip {stripped / mib:.1f}, duplicates {linked / mib:.1f}); "
        f"not stripped: {', '.join(str(k.relative_to(site)) for k in kept) or 'none'}"
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: prune_venv.py VENV")
    main(Path(sys.argv[1]))
