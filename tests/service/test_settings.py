"""Settings: embedded defaults, environment, YAML config file, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.errors import SpecError
from planner.service.settings import Settings, Toggle, load_settings


def test_defaults_need_no_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.delenv("PLANNER_CONFIG_FILE", raising=False)
    settings = load_settings()
    assert settings.database_url == f"sqlite:///{tmp_path}/llm-capacity-planner/planner.db"
    assert settings.slurm.enabled == Toggle.AUTO
    assert (settings.host, settings.port) == ("127.0.0.1", 8080)


def test_environment_overrides_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "planner.yaml"
    config.write_text("port: 9000\ningest_interval_s: 3\nslurm:\n  command_timeout_s: 4\n")
    monkeypatch.setenv("PLANNER_CONFIG_FILE", str(config))
    monkeypatch.setenv("PLANNER_PORT", "9100")
    monkeypatch.setenv("PLANNER_SLURM__ENABLED", "off")
    settings = load_settings()
    assert settings.port == 9100
    assert settings.ingest_interval_s == 3
    assert settings.slurm.command_timeout_s == 4
    assert settings.slurm.enabled == Toggle.OFF


def test_bad_values_name_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLANNER_CONFIG_FILE", raising=False)
    monkeypatch.setenv("PLANNER_SLURM__COMMAND_TIMEOUT_S", "-1")
    with pytest.raises(SpecError) as err:
        load_settings()
    assert err.value.field == "slurm.command_timeout_s"
    assert "PLANNER_SLURM__COMMAND_TIMEOUT_S" in str(err.value)


def test_unknown_key_in_config_file_is_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "planner.yaml"
    config.write_text("prot: 9000\n")
    monkeypatch.setenv("PLANNER_CONFIG_FILE", str(config))
    with pytest.raises(SpecError) as err:
        load_settings()
    assert err.value.field == "prot"


def test_missing_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PLANNER_CONFIG_FILE", str(tmp_path / "nope.yaml"))
    with pytest.raises(SpecError, match="does not exist"):
        load_settings()


def test_constructor_arguments_win() -> None:
    assert Settings(port=1234).port == 1234
