"""The documentation: every relative link of the README, the docs and the chart's README points
at a file (and a heading) that exists; the pages generated from the code (settings, metrics, the
chart's values) are up to date; the README stays a short front page."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _docs_gen() -> ModuleType:
    """deploy/docs_gen.py as a module (deploy/ is not a package); loaded at collection, so the
    service stack it imports is not timed as part of a test."""
    spec = importlib.util.spec_from_file_location("docs_gen", ROOT / "deploy" / "docs_gen.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


docs_gen = _docs_gen()
PAGES = sorted(
    [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "helm").glob("**/README.md"),
        ROOT / "runbooks" / "README.md",
        ROOT / "benchmarks" / "README.md",
    ]
)
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of ``page`` (repeated headings get -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for line in _FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"^#{1,6} (.+)$", line)
        if match:
            base = slug(match[1])
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    """Relative link targets of ``page``, outside code."""
    text = _CODE.sub("", _FENCE.sub("", page.read_text(encoding="utf-8")))
    targets = [a or b for a, b in _LINK.findall(text)]
    return [t for t in targets if not re.match(r"^[a-z]+:", t)]


def broken(page: Path) -> list[str]:
    """The links of ``page`` whose file or heading does not exist, with the reason."""
    problems = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            problems.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            problems.append(f"{target}: no heading with that anchor in {file.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    assert broken(page) == []


def test_the_link_check_sees_links_and_catches_a_broken_one(tmp_path: Path) -> None:
    assert len(links(ROOT / "README.md")) >= 20
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading\n")
    page.write_text(
        "# Page\n[ok](other.md#a-code-heading) [self](#page) [gone](missing.md) "
        "[bad anchor](other.md#nowhere) `[in code](missing.md)` [web](https://example.org)\n"
    )
    assert broken(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading with that anchor in other.md",
    ]


def test_generated_pages_are_up_to_date() -> None:
    stale = list(docs_gen.stale_pages())
    assert not stale, docs_gen.stale_message(stale)


def test_the_generated_pages_name_every_setting_metric_and_value() -> None:
    settings = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    for env in ("PLANNER_PORT", "PLANNER_LIMITS__REVIEW_MAX_JOBS", "PLANNER_SLURM__HINTS"):
        assert f"`{env}`" in settings, env
    metrics = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    for name in ("planner_job_eta_seconds", "planner_scheduler_writes_total"):
        assert f"`{name}`" in metrics, name
    chart = (ROOT / "helm" / "llm-capacity-planner" / "README.md").read_text(encoding="utf-8")
    assert '| `auth.mode` | `"token"` |' in chart
    assert "`networkPolicy.scrapers`" in chart


def test_a_changed_page_is_reported_with_the_command(tmp_path: Path) -> None:
    message = docs_gen.stale_message([ROOT / "docs" / "settings.md"])
    assert message.startswith("docs/settings.md: out of date")
    assert "python deploy/docs_gen.py" in message


def test_the_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    # the two commands that work on a fresh machine, as .ci/run and deploy/dev/test.sh expect
    assert "bash deploy/dev/test.sh " in readme
    assert ".venv/bin/pip install -e . && .venv/bin/planner serve" in readme
    assert "bash deploy/dev/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
