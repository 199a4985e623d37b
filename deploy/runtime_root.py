"""Assemble the root file system of the planner image (the final stage of deploy/Dockerfile).

Usage (as root, in the build stage, with the interpreter of the service's virtual environment)::

    /opt/venv/bin/python runtime_root.py /runtime --user planner:10001:10001 --home /var/lib/planner

The final stage is ``FROM scratch`` plus this tree, which holds only what ``planner`` runs on:

- the virtual environment (``sys.prefix``) and the interpreter it links to, with the standard
  library of that interpreter (without its test suite, IDLE, Tk, ensurepip, lib2to3, its build
  configuration and its own site-packages);
- every shared library these load, found with ``ldd`` (the dynamic loader's own answer); a
  library ``ldd`` cannot find stops the build;
- the dynamic loader's cache and configuration, the C.UTF-8 locale, /etc/localtime with its
  zoneinfo file, CA certificates, nsswitch.conf and os-release, when the base image has them;
- /etc/passwd and /etc/group with root and the service user, its home directory (owned by it,
  the state directory), and /tmp.

No shell, package manager, setuid program or other tool of the base image is copied. Paths keep
their place, and the symbolic links on the way to them (/lib -> usr/lib on Debian) are recreated,
so the interpreter finds its libraries where it was built to. Prints what it copied, in MiB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from collections.abc import Collection
from pathlib import Path

STDLIB_SKIP = {
    "site-packages",
    "dist-packages",
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
}
# The Tk extension module: python:3.11-slim ships it without the Tk libraries it links to.
STDLIB_SKIP_PREFIXES = ("_tkinter.",)
OPTIONAL = [
    # The loader's cache: how python:3.11-slim's interpreter finds libpython in /usr/local/lib.
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/var/run",  # -> /run on Debian: where Kubernetes mounts the service-account token
    "/etc/nsswitch.conf",
    "/etc/os-release",
    "/etc/localtime",
    "/etc/timezone",
    "/usr/lib/locale/C.utf8",
    "/etc/ssl/certs",
    "/usr/lib/ssl",
]


class RootBuilder:
    """Copies paths of this system into ``dest`` at the same place, links included."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.copied = 0
        self.links: set[Path] = set()

    def target(self, path: Path) -> Path:
        return self.dest / path.relative_to("/")

    def copy_path(self, path: Path) -> None:
        """Copy the file or directory ``path`` (absolute), recreating each symbolic link met
        on the way (directory components and the path itself) and copying what it points to."""
        current = Path("/")
        for part in path.parts[1:]:
            step = current / part
            if step.is_symlink():
                self.link(step)
                current = Path(os.path.realpath(step))
            else:
                current = step
        self.copy_real(current)

    def link(self, link: Path) -> None:
        """Recreate the symbolic link ``link`` and copy what it resolves to (when it exists)."""
        out = self.target(link)
        if not out.is_symlink():
            out.parent.mkdir(parents=True, exist_ok=True)
            if out.exists():
                raise SystemExit(f"runtime_root: {out} exists and is not a link like {link}")
            out.symlink_to(os.readlink(link))
        if link in self.links:
            return
        self.links.add(link)
        # The next hop, not the final file: links along a chain (venv/bin/python -> python3
        # -> /usr/bin/python3 -> python3.11) are recreated one by one.
        hop = Path(os.path.normpath(link.parent / os.readlink(link)))
        if hop.exists():
            self.copy_path(hop)

    def copy_real(self, path: Path) -> None:
        """Copy a directory (itself, not its content) or a regular file; nothing else."""
        out = self.target(path)
        if path.is_dir():
            out.mkdir(parents=True, exist_ok=True)
            shutil.copystat(path, out)
        elif path.is_file() and not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, out)
            self.copied += path.stat().st_size

    def copy_tree(self, root: Path, skip: Collection[str] = ()) -> None:
        """Copy the tree ``root``; directories named in ``skip`` are left out at every depth."""
        self.copy_path(root)
        real_root = Path(os.path.realpath(root))
        for dirpath, dirnames, filenames in os.walk(real_root):
            here = Path(dirpath)
            keep = [d for d in dirnames if d not in skip]
            dirnames[:] = [d for d in keep if not (here / d).is_symlink()]
            files = [f for f in filenames if not f.startswith(STDLIB_SKIP_PREFIXES)]
            for name in [d for d in keep if (here / d).is_symlink()] + files:
                entry = here / name
                if entry.is_symlink():
                    self.link(entry)
                else:
                    self.copy_real(entry)
            for name in dirnames:
                self.copy_real(here / name)


def is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def shared_libraries(binaries: list[Path]) -> set[Path]:
    """Every library ``ldd`` resolves for ``binaries``; exits naming any it cannot find."""
    found: set[Path] = set()
    missing: list[str] = []
    names = {b.name for b in binaries}
    for start in range(0, len(binaries), 200):
        out = subprocess.run(
            ["ldd", *map(str, binaries[start : start + 200])],
            check=False,
            capture_output=True,
            text=True,
        ).stdout
        owner = ""
        for line in out.splitlines():
            if not line.startswith("\t"):
                owner = line.rstrip(":")
                continue
            fields = line.split()
            if "not" in fields and "found" in fields:
                # A library grafted by auditwheel next to another one (scipy.libs) is found at run
                # time through the RPATH of the extension module that loads both; ldd run on the
                # library alone does not see it.
                if fields[0] not in names:
                    missing.append(f"{owner}: {fields[0]}")
            elif "=>" in fields and fields[fields.index("=>") + 1].startswith("/"):
                found.add(Path(fields[fields.index("=>") + 1]))
            elif fields[0].startswith("/"):
                found.add(Path(fields[0]))  # the dynamic loader itself
    if missing:
        raise SystemExit("runtime_root: libraries not found:\n  " + "\n  ".join(missing))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--user", required=True, help="NAME:UID:GID of the service user")
    parser.add_argument("--home", type=Path, required=True, help="its home and state directory")
    args = parser.parse_args()
    name, uid, gid = args.user.split(":")
    venv = Path(sys.prefix)
    if venv == Path(sys.base_prefix):
        raise SystemExit("runtime_root: run it with the virtual environment's python")
    root = RootBuilder(args.dest)
    root.copy_tree(venv)
    root.copy_path(Path(sys.executable))  # venv/bin/python -> ... -> the base interpreter
    interpreter = Path(os.path.realpath(sys.executable))
    stdlib = {Path(sysconfig.get_path("stdlib")), Path(sysconfig.get_path("platstdlib"))}
    build_config = Path(sysconfig.get_config_var("LIBPL")).name  # config-3.11-<platform>
    for lib in sorted(stdlib):
        root.copy_tree(lib, STDLIB_SKIP | {build_config})
    # Every ELF object copied so far (the interpreter, the extension modules and libraries of
    # the venv and of the standard library), named by its path on this system for ldd.
    binaries = sorted(
        Path("/", p.relative_to(args.dest))
        for p in args.dest.rglob("*")
        if p.is_file() and not p.is_symlink() and is_elf(p)
    )
    for lib in sorted(shared_libraries(binaries)):
        root.copy_path(lib)
    for extra in map(Path, OPTIONAL):
        if extra.is_dir() and not extra.is_symlink():
            root.copy_tree(extra)
        elif extra.exists():
            root.copy_path(extra)

    etc = args.dest / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"{name}:x:{uid}:{gid}:{name}:{args.home}:/usr/sbin/nologin\n"
    )
    (etc / "group").write_text(f"root:x:0:\n{name}:x:{gid}:\n")
    for path, mode, owner in [
        (Path("/tmp"), 0o1777, (0, 0)),
        (Path("/root"), 0o700, (0, 0)),
        (args.home, 0o750, (int(uid), int(gid))),
        (Path("/proc"), 0o555, (0, 0)),
        (Path("/sys"), 0o555, (0, 0)),
        (Path("/dev"), 0o755, (0, 0)),
        (Path("/run"), 0o755, (0, 0)),
    ]:
        out = root.target(path)
        out.mkdir(parents=True, exist_ok=True)
        os.chown(out, *owner)
        out.chmod(mode)
    setuid = [
        str(p)
        for p in args.dest.rglob("*")
        if p.is_file() and not p.is_symlink() and p.stat().st_mode & (stat.S_ISUID | stat.S_ISGID)
    ]
    if setuid:
        raise SystemExit(f"runtime_root: setuid/setgid files copied: {setuid}")
    print(
        f"runtime_root: {args.dest}: {root.copied / 2**20:.0f} MiB in files, "
        f"{len(binaries)} ELF objects, interpreter {interpreter}"
    )


if __name__ == "__main__":
    main()
