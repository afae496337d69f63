"""Where settings come from: overrides > GPUWATCH_* environment > the TOML file > defaults."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from gpuwatch.config import CONFIG_ENV, Settings, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No developer GPUWATCH_* variable leaks in, and whatever a test sets is undone after it."""
    for name in list(os.environ):
        if name.upper().startswith("GPUWATCH_"):
            monkeypatch.delenv(name)
    # load_settings(config_file=...) writes GPUWATCH_CONFIG; setting it here makes monkeypatch restore it.
    monkeypatch.setenv(CONFIG_ENV, "")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gpuwatch.toml"
    path.write_text(text)
    return path


def test_defaults_apply_without_file_env_or_overrides() -> None:
    s = Settings()
    assert s.server.port == 8600
    assert s.server.host == "127.0.0.1"
    assert s.agent.flush_s == 2.0
    assert s.agent.token is None
    assert s.agent.log_files == []


def test_precedence_overrides_beat_env_beat_file_beat_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _toml(
        tmp_path,
        'port = 7001\nhost = "10.0.0.1"\nnode = "from-file"\ntoken = "file-token"\nflush_s = 9.5\n',
    )
    monkeypatch.setenv(CONFIG_ENV, str(cfg))
    monkeypatch.setenv("GPUWATCH_PORT", "7002")
    monkeypatch.setenv("GPUWATCH_HOST", "10.0.0.2")
    monkeypatch.setenv("GPUWATCH_NODE", "from-env")

    s = load_settings(port=7003)

    assert s.server.port == 7003  # override > env > file
    assert s.server.host == "10.0.0.2"  # env > file
    assert s.agent.node == "from-env"
    assert s.agent.token == "file-token"  # file > default
    assert s.agent.flush_s == 9.5
    assert s.agent.interval_s == 1.0  # default: named nowhere


def test_config_file_argument_is_used_and_inherited_through_the_environment(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, "heartbeat_s = 42.0\nlog_files = ['/var/log/a.log', '/var/log/b.log']\n")
    s = load_settings(config_file=cfg)
    assert s.agent.heartbeat_s == 42.0
    assert s.agent.log_files == [Path("/var/log/a.log"), Path("/var/log/b.log")]
    assert os.environ[CONFIG_ENV] == str(cfg)  # so the demo's child processes read it too
    assert Settings().agent.heartbeat_s == 42.0


def test_env_values_are_parsed_to_field_types(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUWATCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GPUWATCH_SIMULATE", "4")
    monkeypatch.setenv("GPUWATCH_LOG_FILES", '["/x/train.log"]')
    s = Settings()
    assert s.data_dir == tmp_path / "data"
    assert s.agent.simulate == 4
    assert s.agent.log_files == [Path("/x/train.log")]


def test_unknown_toml_key_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_ENV, str(_toml(tmp_path, "port = 8600\nflsuh_s = 3\n")))
    with pytest.raises(ValidationError) as info:
        Settings()
    assert "flsuh_s" in str(info.value)
    assert "xtra" in str(info.value)  # "Extra inputs are not permitted"


def test_invalid_toml_value_names_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_ENV, str(_toml(tmp_path, "port = 70000\n")))
    with pytest.raises(ValidationError, match="port"):
        Settings()


def test_missing_config_file_raises_file_not_found_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "gpuwatch.toml"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        load_settings(config_file=missing)


def test_missing_config_file_from_env_raises_file_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "absent.toml"
    monkeypatch.setenv(CONFIG_ENV, str(missing))
    with pytest.raises(FileNotFoundError, match=str(missing)):
        Settings()


def test_default_database_url_is_sqlite_inside_data_dir(tmp_path: Path) -> None:
    s = load_settings(data_dir=tmp_path / "d")
    assert s.server.database_url is None
    assert s.effective_database_url == f"sqlite:///{tmp_path / 'd' / 'gpuwatch.db'}"
    explicit = load_settings(data_dir=tmp_path / "d", database_url="postgresql+psycopg://u@h/db")
    assert explicit.effective_database_url == "postgresql+psycopg://u@h/db"


def test_default_data_dir_follows_xdg_data_home(tmp_path: Path) -> None:
    s = Settings()
    assert s.data_dir == tmp_path / "xdg" / "gpuwatch"
    assert s.effective_database_url == f"sqlite:///{tmp_path / 'xdg' / 'gpuwatch' / 'gpuwatch.db'}"


def test_spool_dir_defaults_under_data_dir_per_node(tmp_path: Path) -> None:
    s = load_settings(data_dir=tmp_path, node="gpu-07")
    assert s.effective_spool_dir == tmp_path / "agent" / "gpu-07" / "spool"
    assert load_settings(spool_dir=tmp_path / "sp").effective_spool_dir == tmp_path / "sp"


def test_none_overrides_from_load_settings_are_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_ENV, str(_toml(tmp_path, "port = 7001\n")))
    monkeypatch.setenv("GPUWATCH_TOKEN", "env-token")
    s = load_settings(port=None, token=None, host=None, node="n1")
    assert s.server.port == 7001  # the file still counts: a flag not given overrides nothing
    assert s.agent.token == "env-token"
    assert s.server.host == "127.0.0.1"
    assert s.agent.node == "n1"


def test_each_group_reads_its_flat_and_its_nested_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented flat names and the nested spelling reach the same group field, with the sources'
    priorities whichever spelling each source uses."""
    cfg = _toml(
        tmp_path,
        "hang_timeout_s = 30\nretention_events_days = 9\n"
        '[recovery]\nmax_restarts = 4\noverrides = { gpu_oom = "notify" }\n[server]\nport = 7001\n',
    )
    monkeypatch.setenv(CONFIG_ENV, str(cfg))
    monkeypatch.setenv("GPUWATCH_PORT", "7002")  # flat env beats the file's nested [server] port
    monkeypatch.setenv("GPUWATCH_RECOVERY__WINDOW_S", "60")
    monkeypatch.setenv("GPUWATCH_NOTIFY_RETRIES", "7")
    s = load_settings(recovery_dry_run=True)
    assert s.server.port == 7002 and s.server.hang_timeout_s == 30.0
    assert s.retention.events_days == 9.0 and s.notify.retries == 7
    assert (s.recovery.max_restarts, s.recovery.window_s, s.recovery.dry_run) == (4, 60.0, True)
    assert s.recovery.action("gpu_oom") == "notify"  # the policy's own type: the job's overrides' too
    assert s.replace(port=1, recovery_max_restarts=2).server.port == 1
    assert s.replace(port=1, recovery_max_restarts=2).recovery.max_restarts == 2


def test_a_bad_recovery_value_is_refused_by_the_policy_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUWATCH_RECOVERY_CRASH_LOOP_N", "1")
    with pytest.raises(ValidationError, match="crash_loop_n must be 0"):
        Settings()
    with pytest.raises(ValidationError, match="not a reason of the taxonomy"):
        Settings(recovery={"overrides": {"gremlins": "restart"}})
