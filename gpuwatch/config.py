"""The one configuration object for every gpuwatch process.

Values come, highest priority first, from command-line flags (passed as overrides), ``GPUWATCH_*``
environment variables, the TOML file named by ``GPUWATCH_CONFIG`` (or ``--config``), and the defaults
below. The README's configuration table lists every field.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

CONFIG_ENV = "GPUWATCH_CONFIG"


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "gpuwatch"


class Settings(BaseSettings):
    """Configuration shared by the server, the agent and the CLI."""

    model_config = SettingsConfigDict(env_prefix="GPUWATCH_", extra="forbid")

    # shared
    data_dir: Path = Field(default_factory=_default_data_dir, description="where SQLite and spools live")
    log_level: str = "INFO"

    # server
    database_url: str | None = Field(default=None, description="SQLAlchemy URL; default SQLite in data_dir")
    host: str = "127.0.0.1"
    port: int = Field(default=8600, ge=0, le=65535)
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
    max_rank_series: int = Field(default=64, ge=1, description="jobs with more ranks export job-level series only")
    read_auth: bool = Field(default=False, description="GET /api/v1/… needs a token too (any role)")
    rate_limit_per_s: float = Field(default=50.0, ge=0, description="requests per second per node token; 0: off")
    rate_limit_burst: int = Field(default=500, ge=1, description="requests a node may make at once above the rate")
    ssl_certfile: Path | None = Field(default=None, description="serve HTTPS with this certificate (PEM)")
    ssl_keyfile: Path | None = Field(default=None, description="… and this private key (PEM)")

    # retention (server/store/retention.py): days each kind of row is kept, 0 keeps it forever
    retention_interval_s: float = Field(default=3600.0, ge=0, description="how often the server prunes; 0: never")
    retention_chunk_rows: int = Field(default=5000, ge=1, description="rows deleted per transaction")
    retention_log_lines_days: float = Field(default=30.0, ge=0, description="agents' log lines")
    retention_events_days: float = Field(default=90.0, ge=0, description="Xid, ECC, hang, straggler … events")
    retention_ingest_batches_days: float = Field(
        default=7.0, ge=0, description="batch ids remembered to recognise an agent's retry: longer than any outage"
    )
    retention_rollups_days: float = Field(default=90.0, ge=0, description="per-minute GPU and job rollups")
    retention_incident_snapshots_days: float = Field(
        default=180.0, ge=0, description="GPU samples kept with incidents past diagnosis (post-mortem plots)"
    )

    # notifications (server/notify/README.md); the URLs carry secrets: set them by environment or notify_url_file
    public_url: str | None = Field(default=None, description="this server's URL for links; default http://host:port")
    notify_webhook_urls: list[str] = Field(default_factory=list, description="generic JSON webhooks (a JSON list)")
    notify_slack_urls: list[str] = Field(default_factory=list, description="Slack-compatible incoming webhooks")
    notify_url_file: Path | None = Field(default=None, description="more URLs, one a line (a mounted secret)")
    notify_timeout_s: float = Field(default=5.0, gt=0, description="per request")
    notify_retries: int = Field(default=3, ge=0, description="retries after a timeout, connection error, 5xx or 429")
    notify_backoff_s: float = Field(default=1.0, ge=0, description="first wait between retries, doubled each time")

    # agent
    server_url: str = "http://127.0.0.1:8600"
    token: str | None = None
    token_file: Path | None = Field(default=None, description="read the token from this file (a mounted secret)")
    node: str = Field(default_factory=lambda: socket.gethostname().split(".")[0])
    interval_s: float = Field(default=1.0, gt=0, description="GPU sampling period")
    flush_s: float = Field(default=2.0, gt=0, description="how often the agent ships a batch")
    heartbeat_s: float = Field(default=10.0, gt=0)
    spool_dir: Path | None = Field(default=None, description="default: <data_dir>/agent/<node>/spool")
    spool_max_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)
    backoff_max_s: float = Field(default=30.0, gt=0, description="longest wait between retries")
    log_files: list[Path] = Field(default_factory=list, description="job logs the agent tails")
    kernel_log: Path | None = Field(
        default=None, description="/dev/kmsg, or a file of kernel lines, to follow (stream 'kernel')"
    )
    incident_settle_s: float = Field(default=0.5, ge=0, description="wait for in-flight logs before diagnosing")
    incident_dedupe_s: float = Field(default=600.0, ge=0, description="one Xid incident per node in this window")
    # recovery (defaults of gpuwatch.recovery.PolicyConfig; a job may override them)
    recovery_max_restarts: int = Field(default=10, ge=0, description="restarts per job in all")
    recovery_window_s: float = Field(default=3600.0, gt=0, description="window of recovery_max_in_window")
    recovery_max_in_window: int = Field(default=5, ge=0, description="restarts per job within the window")
    recovery_backoff_base_s: float = Field(default=0.0, ge=0, description="backoff before restart n: base·2ⁿ⁻¹")
    recovery_backoff_max_s: float = Field(default=300.0, ge=0, description="longest backoff")
    recovery_crash_loop_n: int = Field(default=3, ge=0, description="same reason this many times in a row: stop")
    recovery_no_progress_n: int = Field(default=3, ge=0, description="checkpoint step stuck over N restarts: stop")
    recovery_exclude_ttl_s: float = Field(default=3600.0, ge=0, description="how long a blamed node stays excluded")
    recovery_dry_run: bool = Field(default=False, description="decide and record, but never act")
    # reports
    gpu_hour_price: float = Field(default=3.0, ge=0, description="price of one GPU-hour, for the cost of lost work")
    currency: str = Field(default="USD", max_length=8, description="currency of gpu_hour_price")
    executor: str | None = Field(
        default=None, description="the cluster's scheduler (slurm, kubernetes) that drains or cordons blamed nodes"
    )
    slurm_bin_dir: Path | None = Field(default=None, description="where scontrol and squeue are (default: PATH)")
    kubeconfig: Path | None = Field(
        default=None, description="kubeconfig for the Kubernetes executor (default: in-cluster)"
    )
    kube_context: str | None = Field(default=None, description="context in the kubeconfig")
    simulate: int = Field(default=0, ge=0, le=64, description="simulated GPUs instead of NVML")
    client_port: int = Field(default=8601, ge=0, le=65535, description="loopback port for training clients")
    sysfs_root: Path = Field(default=Path("/sys"), description="where InfiniBand counters are read from")
    collectors: dict[str, bool] = Field(
        default_factory=dict, description="agent collectors on or off by name, over their defaults"
    )
    metrics_address: str | None = Field(
        default=None, description="HOST:PORT where the agent also serves /metrics (the client port is loopback)"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = os.environ.get(CONFIG_ENV)
        if path:
            if not Path(path).is_file():
                raise FileNotFoundError(f"{CONFIG_ENV}={path}: no such configuration file")
            toml = TomlConfigSettingsSource(settings_cls, toml_file=path)
            _refuse_secrets(path, toml())
            sources.append(toml)
        return tuple(sources)

    @property
    def effective_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'gpuwatch.db'}"

    @property
    def effective_token(self) -> str | None:
        """The token given directly, else the first line of ``token_file``."""
        if self.token or self.token_file is None:
            return self.token
        return self.token_file.read_text().strip() or None

    @property
    def agent_dir(self) -> Path:
        return self.data_dir / "agent" / self.node

    @property
    def effective_spool_dir(self) -> Path:
        return self.spool_dir or self.agent_dir / "spool"


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
