"""The one configuration object for every gpuwatch process, in groups: `server`, `agent`, `recovery`
(the restart policy's own `PolicyConfig`), `notify`, `retention` and `llm`, with `data_dir` and
`log_level` shared. Each component is handed its group.

Values come, highest priority first, from command-line flags (passed as overrides), ``GPUWATCH_*``
environment variables, the TOML file named by ``GPUWATCH_CONFIG`` (or ``--config``), and the defaults
below. Every value has a flat name, the one docs/configuration.md's table documents
(``GPUWATCH_PORT``, ``recovery_max_restarts = 5`` in the file, ``load_settings(port=…)``), and a
nested one (``GPUWATCH_SERVER__PORT``, a ``[recovery]`` table with ``max_restarts = 5``); both work
everywhere, and a flat name is its group's prefix (``recovery_``, ``notify_``, ``retention_``,
``llm_``; none for the server's and the agent's) before the field's name.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, create_model, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from gpuwatch.recovery.policy import PolicyConfig

CONFIG_ENV = "GPUWATCH_CONFIG"


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "gpuwatch"


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServerSettings(_Group):
    """The central service: where it listens and stores, how it detects, what it pays for lost work."""

    database_url: str | None = Field(default=None, description="SQLAlchemy URL; default SQLite in data_dir")
    host: str = "127.0.0.1"
    port: int = Field(default=8600, ge=0, le=65535)
    public_url: str | None = Field(default=None, description="this server's URL for links; default http://host:port")
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, description="request body limit (also after gunzip)")
    node_timeout_s: float = Field(
        default=30.0, gt=0, description="a node is down after this long without data (keep it >= backoff_max_s)"
    )
    disruption_share: float = Field(
        default=0.55,
        gt=0,
        le=1,
        description="this share of the nodes unheard at once is a disruption (network, server, database), not "
        "node failures: their silence incidents wait until it ends",
    )
    disruption_min_nodes: int = Field(default=3, ge=1, description="… when it is at least this many nodes")
    ring_size: int = Field(
        default=300, ge=1, description="seconds of history (one point a second) kept in memory per GPU"
    )
    token_cache_s: float = Field(
        default=60.0, ge=0, description="a token checked is trusted this long without a lookup (revocation delay)"
    )
    ingest_queue_bytes: int = Field(
        default=32 * 2**20,
        ge=1,
        description="ingest bodies waiting to be stored, at most; past it a batch gets 503 with Retry-After",
    )
    rollup_flush_s: float = Field(
        default=5.0,
        ge=0,
        description="per-minute rollups are summed in memory and written this often; 0 writes them with each "
        "batch (exactly-once, slower)",
    )
    db_busy_timeout_ms: int = Field(default=5000, ge=0, description="SQLite lock wait before giving up")
    job_window_s: float = Field(default=300.0, gt=0, description="window of the per-job utilization figures")
    straggler_margin: float = Field(default=0.2, gt=0, description="compute time this far over the others' median")
    straggler_steps: int = Field(default=5, ge=1, description="… for this many steps in a row is a straggler")
    straggler_min_s: float = Field(default=0.005, ge=0, description="… and by at least this many seconds")
    hang_timeout_s: float = Field(default=600.0, gt=0, description="default; a job may set its own")
    hang_check_s: float = Field(default=1.0, gt=0, description="how often jobs are checked for hangs")
    hang_stacks_wait_s: float = Field(
        default=20.0,
        ge=0,
        description="a hang's incident waits this long for its ranks' stacks (docs/jobs.md) before deciding; "
        "0: no capture",
    )
    max_rank_series: int = Field(default=64, ge=1, description="jobs with more ranks export job-level series only")
    read_auth: bool = Field(
        default=False, description="GET /api/v1/… needs a token too (any role); a node's token reads only its own logs"
    )
    read_max_bytes: int = Field(
        default=8 * 2**20, ge=1024, description="text a log or event read returns at most; page for the rest"
    )
    rate_limit_per_s: float = Field(default=50.0, ge=0, description="requests per second per node token; 0: off")
    rate_limit_burst: int = Field(default=500, ge=1, description="requests a node may make at once above the rate")
    ssl_certfile: Path | None = Field(default=None, description="serve HTTPS with this certificate (PEM)")
    ssl_keyfile: Path | None = Field(default=None, description="… and this private key (PEM)")
    incident_settle_s: float = Field(default=0.5, ge=0, description="wait for in-flight logs before diagnosing")
    incident_lines_wait_s: float = Field(
        default=10.0,
        ge=0,
        description="a failed run whose exit report counted more lines than have arrived waits this long, at most, "
        "for the rest before it is diagnosed",
    )
    incident_resume_after_s: float = Field(
        default=30.0,
        gt=0,
        description="an incident whose next step is this overdue lost its server (killed, or another replica): "
        "the watchdog takes the step",
    )
    incident_dedupe_s: float = Field(default=600.0, ge=0, description="one Xid incident per node in this window")
    gpu_hour_price: float = Field(default=3.0, ge=0, description="price of one GPU-hour, for the cost of lost work")
    report_before_s: float = Field(
        default=300.0,
        gt=0,
        le=86_400,
        description="a post-mortem's GPU plots start this long before the failure (the incident keeps the last "
        "300 s of samples)",
    )
    report_after_s: float = Field(
        default=30.0,
        ge=0,
        le=86_400,
        description="… and end this long after the restarted run's first step (else after the failure)",
    )
    currency: str = Field(default="USD", max_length=8, description="currency of gpu_hour_price")
    executor: str | None = Field(
        default=None, description="the cluster's scheduler (slurm, kubernetes) that drains or cordons blamed nodes"
    )
    slurm_bin_dir: Path | None = Field(default=None, description="where scontrol and squeue are (default: PATH)")
    kubeconfig: Path | None = Field(
        default=None, description="kubeconfig for the Kubernetes executor (default: in-cluster)"
    )
    kube_context: str | None = Field(default=None, description="context in the kubeconfig")


class AgentSettings(_Group):
    """The node agent and the supervisor (`gpuwatch run`): who they are, where they ship, what they read."""

    server_url: str = "http://127.0.0.1:8600"
    token: str | None = None
    token_file: Path | None = Field(default=None, description="read the token from this file (a mounted secret)")
    node: str = Field(default_factory=lambda: socket.gethostname().split(".")[0])
    interval_s: float = Field(default=1.0, gt=0, description="GPU sampling period")
    flush_s: float = Field(default=2.0, gt=0, description="how often the agent ships a batch")
    heartbeat_s: float = Field(default=10.0, gt=0)
    spool_dir: Path | None = Field(default=None, description="default: <data_dir>/agent/<node>/spool")
    spool_max_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)
    batch_max_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=1024,
        description="largest batch (JSON bytes) the agent sends; lowered to what the server says it takes",
    )
    pending_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="lines and samples held in memory while the spool cannot be written; past it the oldest "
        "are dropped and counted (reason spool_error)",
    )
    backoff_max_s: float = Field(default=30.0, gt=0, description="longest wait between retries")
    log_files: list[Path] = Field(default_factory=list, description="job logs the agent tails")
    kernel_log: Path | None = Field(
        default=None, description="/dev/kmsg, or a file of kernel lines, to follow (stream 'kernel')"
    )
    simulate: int = Field(default=0, ge=0, le=64, description="simulated GPUs instead of NVML")
    client_port: int = Field(default=8601, ge=0, le=65535, description="loopback port for training clients")
    sysfs_root: Path = Field(default=Path("/sys"), description="where InfiniBand counters are read from")
    py_spy: Path | None = Field(
        default=None,
        description="the py-spy binary that captures ranks' stacks (default: beside the agent's Python, else PATH)",
    )
    collectors: dict[str, bool] = Field(
        default_factory=dict, description="agent collectors on or off by name, over their defaults"
    )
    metrics_address: str | None = Field(
        default=None, description="HOST:PORT where the agent also serves /metrics (the client port is loopback)"
    )


class RetentionSettings(_Group):
    """Days each kind of row is kept (server/store/retention.py); 0 keeps it forever."""

    interval_s: float = Field(default=3600.0, ge=0, description="how often the server prunes; 0: never")
    chunk_rows: int = Field(default=5000, ge=1, description="rows deleted per transaction")
    log_lines_days: float = Field(default=30.0, ge=0, description="agents' log lines")
    events_days: float = Field(default=90.0, ge=0, description="Xid, ECC, hang, straggler … events")
    ingest_batches_days: float = Field(
        default=7.0, ge=0, description="batch ids remembered to recognise an agent's retry: longer than any outage"
    )
    rollups_days: float = Field(default=90.0, ge=0, description="per-minute GPU and job rollups")
    incident_snapshots_days: float = Field(
        default=180.0, ge=0, description="GPU samples kept with incidents past diagnosis (post-mortem plots)"
    )


class NotifySettings(_Group):
    """Incident webhooks (server/notify/README.md). The URLs carry secrets: set them by environment or
    ``url_file``."""

    webhook_urls: list[str] = Field(default_factory=list, description="generic JSON webhooks (a JSON list)")
    slack_urls: list[str] = Field(default_factory=list, description="Slack-compatible incoming webhooks")
    url_file: Path | None = Field(default=None, description="more URLs, one a line (a mounted secret)")
    timeout_s: float = Field(default=5.0, gt=0, description="per request")
    retries: int = Field(default=3, ge=0, description="retries after a timeout, connection error, 5xx or 429")
    backoff_s: float = Field(default=1.0, ge=0, description="first wait between retries, doubled each time")
    alertmanager_url: str | None = Field(
        default=None,
        description="Alertmanager's base URL (http://alertmanager:9093): the server posts its own alerts "
        "(fatal Xid, GPU lost, job failed) there as it learns of them; off when unset",
    )
    alertmanager_timeout_s: float = Field(default=5.0, gt=0, description="per post to Alertmanager")
    alertmanager_resend_s: float = Field(
        default=30.0, gt=0, description="alerts are posted again this often, each valid for 4 times as long"
    )
    alertmanager_backoff_s: float = Field(
        default=1.0, gt=0, description="first wait after a failed post, doubled each time (at most 30 s), jittered"
    )
    alertmanager_labels: dict[str, str] = Field(
        default_factory=dict,
        description="labels added to every alert the server posts: Prometheus' external_labels, if it has any",
    )


class LlmSettings(_Group):
    """The LLM log analyser (gpuwatch/diagnosis/llm.py): off unless both ``base_url`` and ``model`` are
    set. The key is read only from the environment (GPUWATCH_LLM_API_KEY), never from the file."""

    base_url: str | None = Field(default=None, description="an OpenAI-compatible endpoint, e.g. http://host:8080/v1")
    model: str | None = Field(default=None, description="the model name the endpoint serves")
    api_key: SecretStr | None = Field(default=None, description="its key, if it needs one (environment only)")
    timeout_s: float = Field(default=20.0, gt=0, description="the analyser's deadline per question")
    budget_tokens: int = Field(
        default=3000, ge=100, description="how much of the log excerpt (and few-shot examples) the prompt may hold"
    )
    min_confidence: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="the LLM's answer is used only at or above this confidence (one that cites no line of the "
        "log is worth at most 0.5)",
    )

    @property
    def enabled(self) -> bool:
        return bool((self.base_url or "").strip() and (self.model or "").strip())


#: Each group, and the prefix of its fields' flat names.
GROUPS: dict[str, str] = {"server": "", "agent": "", "recovery": "recovery_", "notify": "notify_"}
GROUPS |= {"retention": "retention_", "llm": "llm_"}


class Settings(BaseSettings):
    """Configuration shared by the server, the agent and the CLI."""

    model_config = SettingsConfigDict(env_prefix="GPUWATCH_", env_nested_delimiter="__", extra="forbid")

    data_dir: Path = Field(default_factory=_default_data_dir, description="where SQLite and spools live")
    log_level: str = "INFO"
    rules_dir: Path | None = Field(
        default=None,
        description="user diagnosis rules (*.toml), loaded after the shipped ones; read again when they change",
    )
    server: ServerSettings = Field(default_factory=ServerSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    recovery: PolicyConfig = Field(default_factory=PolicyConfig, description="defaults; a job may override them")
    notify: NotifySettings = Field(default_factory=NotifySettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_names(cls, data: Any) -> Any:
        return nest(data) if isinstance(data, dict) else data

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Each source's flat names are nested on their own, so that a source's priority holds whichever
        # spelling it uses: a flat GPUWATCH_PORT beats the file's [server] port.
        sources: list[PydanticBaseSettingsSource] = [
            _Nested(init_settings),
            env_settings,
            _Nested(EnvSettingsSource(_flat_model(), env_prefix="GPUWATCH_", case_sensitive=False)),
        ]
        path = os.environ.get(CONFIG_ENV)
        if path:
            if not Path(path).is_file():
                raise FileNotFoundError(f"{CONFIG_ENV}={path}: no such configuration file")
            toml = TomlConfigSettingsSource(settings_cls, toml_file=path)
            _refuse_secrets(path, toml())
            sources.append(_Nested(toml))
        return tuple(sources)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (flat or nested names), validated like any other source."""
        return type(self).model_validate({**self.model_dump(warnings=False), **changes})

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Settings:
        """pydantic's copy, except that an ``update`` goes through `replace`: pydantic's would set a flat
        name as an attribute beside its group, unvalidated, and the group would not change."""
        return self.replace(**update) if update else super().model_copy(deep=deep)

    @property
    def effective_database_url(self) -> str:
        return self.server.database_url or f"sqlite:///{self.data_dir / 'gpuwatch.db'}"

    @property
    def effective_token(self) -> str | None:
        """The token given directly, else the first line of ``token_file``."""
        agent = self.agent
        if agent.token or agent.token_file is None:
            return agent.token
        return agent.token_file.read_text().strip() or None

    @property
    def agent_dir(self) -> Path:
        return self.data_dir / "agent" / self.agent.node

    @property
    def effective_spool_dir(self) -> Path:
        return self.agent.spool_dir or self.agent_dir / "spool"


def _group_fields(group: str) -> dict[str, tuple[Any, Any]]:
    """A group's fields: name → (type, default or FieldInfo)."""
    model = Settings.model_fields[group].annotation
    if dataclasses.is_dataclass(model):
        hints = typing.get_type_hints(model)
        return {f.name: (hints[f.name], Field(default=None)) for f in dataclasses.fields(model)}
    assert model is not None and issubclass(model, BaseModel)
    return {name: (info.annotation, Field(default=None)) for name, info in model.model_fields.items()}


def _flat_names() -> dict[str, tuple[str, str]]:
    """Each flat name → (group, field)."""
    return {prefix + name: (group, name) for group, prefix in GROUPS.items() for name in _group_fields(group)}


FLAT: dict[str, tuple[str, str]] = {}


def _flat_model() -> type[BaseSettings]:
    """A settings class with the flat names as fields (all optional), so that pydantic-settings reads
    and decodes ``GPUWATCH_<FLAT NAME>`` (JSON for lists and tables) exactly as it reads the others."""
    fields = {flat: _group_fields(group)[name] for flat, (group, name) in FLAT.items()}
    return create_model("FlatSettings", __base__=BaseSettings, **fields)  # type: ignore[call-overload]


def nest(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with its flat names moved into their groups (a flat name beats the same field given
    nested in the same source)."""
    out = {k: v for k, v in values.items() if k not in FLAT}
    for flat, value in values.items():
        if flat not in FLAT:
            continue
        group, name = FLAT[flat]
        current = out.get(group)
        if isinstance(current, BaseModel):
            current = current.model_dump()
        elif dataclasses.is_dataclass(current) and not isinstance(current, type):
            current = {f.name: getattr(current, f.name) for f in dataclasses.fields(current)}
        out[group] = {**(current or {}), name: value}
    return out


class _Nested(PydanticBaseSettingsSource):
    """Another source's values, with its flat names nested."""

    def __init__(self, inner: PydanticBaseSettingsSource) -> None:
        super().__init__(inner.settings_cls)
        self._inner = inner

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return nest(self._inner())


FLAT.update(_flat_names())


#: Keys that would put the LLM's API key in a file that is copied around, committed, shown in a ticket.
_FILE_SECRETS = ("llm_api_key", "openai_api_key", "api_key", "llm_key")


def _refuse_secrets(path: str, values: dict[str, Any]) -> None:
    for key, value in values.items():
        if isinstance(value, dict):  # a table, e.g. [llm] api_key = …
            _refuse_secrets(path, value)
        elif key.lower() in _FILE_SECRETS:
            raise ValueError(
                f"{path}: `{key}` is not read from the configuration file: the LLM's API key comes only from "
                "the environment (GPUWATCH_LLM_API_KEY, e.g. from a mounted secret); remove it from the file"
            )


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings; ``overrides`` that are None (flags not given) do not override anything."""
    if config_file is not None:
        os.environ[CONFIG_ENV] = str(config_file)  # children (the demo's processes) inherit it too
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
