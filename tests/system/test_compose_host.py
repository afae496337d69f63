"""`docker compose up`, on a host without Docker: every service of docker-compose.yml started as its
command says, with its environment, ports, volumes and secrets (mapped in tests/compose_host.py,
nowhere else), and every health check run as written until it says healthy.

PostgreSQL is a private server of the test's own, set up as the postgres image's entrypoint sets one
up on an empty volume (initdb, a socket-only temporary server that creates the database, then the
server itself), rather than a database on the machine's shared server: that is the only way to run
the health check as written (`pg_isready -h 127.0.0.1 -p 5432 …` against the service's own port) and
to see it refuse the temporary server, which is what made the old socket check unsafe.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from tests.compose_host import (
    VENV_BIN,
    ComposeError,
    HostMap,
    Image,
    PostgresEntrypoint,
    ServiceProcess,
    alertmanager_version,
    duration_s,
    gpuwatch_image,
    healthcheck_argv,
    image_of,
    inline_url_files,
    interpolate,
    load_compose,
    postgres_bin_dir,
    run_healthcheck,
)
from tests.helpers import REQUIRE_TOOLS_ENV, require_tool, wait_until

#: The user's shell when they type `docker compose up`: nothing set, so each ${VAR:-default} is its default.
SHELL_ENV: dict[str, str] = {}

#: The programs each image has for a health check to call, from the images' own build files:
#: python:3.11-slim has no curl or wget; postgres:15 has the PostgreSQL client programs;
#: prom/prometheus and prom/alertmanager are FROM quay.io/prometheus/busybox (busybox's wget);
#: grafana/grafana 11 adds `ca-certificates bash curl tzdata musl-utils` to Alpine (grafana/grafana#65547).
IMAGE_PROGRAMS = {
    "gpuwatch:dev": {"python", "gpuwatch"},
    "postgres": {"pg_isready", "psql"},
    "prom/prometheus": {"wget"},
    "prom/alertmanager": {"wget"},
    "grafana/grafana": {"curl", "bash"},
}

#: What a container has to itself and a host process must not take: every address, and ports of its
#: own. These are the only changes to the services' environment and commands besides HostMap's.
HOST_ONLY_ENV = {
    "server": lambda hosts: {"GPUWATCH_HOST": "127.0.0.1", "GPUWATCH_PORT": str(hosts.host_port("server"))},
    "agent": lambda hosts: {"GPUWATCH_CLIENT_PORT": "0"},  # its training clients' loopback port (8601)
}
HOST_ONLY_ARGS = {
    "prometheus": lambda hosts: [f"--web.listen-address=127.0.0.1:{hosts.host_port('prometheus')}"],
    "alertmanager": lambda hosts: [
        f"--web.listen-address=127.0.0.1:{hosts.host_port('alertmanager')}",
        "--cluster.listen-address=",  # gossip on 0.0.0.0:9094 by default: one stack per container, many here
    ],
}

READY_WITHIN_S = 60.0


def container_ports(compose: dict[str, Any]) -> dict[str, int]:
    """The port each service listens on in its container: its published `ports`, and PostgreSQL's 5432
    (the image's default PGPORT, reached only by the other services)."""
    ports = {"postgres": 5432}
    for name, service in compose["services"].items():
        for mapping in service.get("ports", []):
            ports[name] = int(str(mapping).split(":")[-1])
    return ports


@pytest.fixture
def compose_root() -> Iterator[Path]:
    """The stack's files: not under pytest's tmp_path, which only root may enter, since PostgreSQL runs
    as its own user and must reach its data directory."""
    root = Path(tempfile.mkdtemp(prefix="gpuwatch-compose-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


class Stack:
    """The services of one compose file started on this host, and their health checks."""

    def __init__(self, compose: dict[str, Any], root: Path) -> None:
        self.compose, self.root = compose, root
        self.hosts = HostMap(compose, root, container_ports(compose))
        self.logs = root / "logs"
        self.logs.mkdir()
        self.procs: dict[str, ServiceProcess] = {}

    def spec(self, service: str) -> dict[str, Any]:
        return self.compose["services"][service]

    def environment(self, service: str) -> dict[str, str]:
        image = Image([]) if service == "postgres" else image_of(self.spec(service))
        overrides = HOST_ONLY_ENV.get(service, lambda hosts: {})(self.hosts)
        return self.hosts.environment(service, image, overrides)

    def start(self, service: str) -> ServiceProcess:
        spec = self.spec(service)
        image = image_of(spec)
        if "build" in spec:  # the gpuwatch image's data directory, where no volume covers it
            data_dir = image.env["GPUWATCH_DATA_DIR"]
            if data_dir not in self.hosts.paths(service):
                self.hosts.private_dir(service, data_dir)
        argv = self.hosts.command(service, image) + HOST_ONLY_ARGS.get(service, lambda hosts: [])(self.hosts)
        proc = ServiceProcess(argv, self.environment(service), self.logs / f"{service}.log")
        self.procs[service] = proc
        return proc

    def healthcheck(self, service: str) -> subprocess.CompletedProcess[str]:
        spec = self.spec(service)
        argv = self.hosts.translate_argv(healthcheck_argv(spec), service)
        timeout = duration_s(spec["healthcheck"].get("timeout", "30s"))
        return run_healthcheck(argv, self.environment(service), timeout)

    def wait_healthy(self, service: str, within_s: float = READY_WITHIN_S) -> float:
        """Run the service's health check until it passes; the seconds that took."""
        start, last = time.monotonic(), None

        def healthy() -> bool:
            nonlocal last
            proc = self.procs.get(service)
            if proc is not None and proc.popen.poll() is not None:
                raise AssertionError(f"{service} exited with {proc.popen.returncode}:\n{proc.output()[-3000:]}")
            last = self.healthcheck(service)
            return last.returncode == 0

        try:
            wait_until(healthy, timeout=within_s, what=f"{service}'s health check", every=0.5)
        except AssertionError as exc:
            detail = f"{last.args}: {last.returncode} {last.stdout}{last.stderr}" if last else ""
            log = self.procs[service].output()[-3000:] if service in self.procs else ""
            raise AssertionError(f"{exc}\nlast check: {detail}\n{service}'s log:\n{log}") from None
        return time.monotonic() - start

    def wait_exit(self, service: str, within_s: float) -> int:
        proc = self.procs[service]
        try:
            return proc.popen.wait(within_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{service} still running after {within_s} s:\n{proc.output()[-3000:]}") from None

    def stop(self) -> None:
        for service, proc in reversed(self.procs.items()):
            proc.stop(signal.SIGINT if service == "postgres" else signal.SIGTERM)  # SIGINT: PostgreSQL's fast stop
        self.hosts.release()


def _require_postgres_server() -> Path:
    found = postgres_bin_dir()
    if found is None:
        reason = "PostgreSQL server programs (initdb, pg_ctl, postgres) not installed (Debian package postgresql)"
        if os.environ.get(REQUIRE_TOOLS_ENV) == "1":
            pytest.fail(f"{reason} [{REQUIRE_TOOLS_ENV}=1]", pytrace=False)
        pytest.skip(reason)
    return found


@pytest.mark.prometheus
@pytest.mark.slow
def test_compose_stack_comes_up_healthy_on_the_host(compose_root: Path) -> None:
    for program in ("prometheus", "prometheus-alertmanager", "pg_isready", "wget"):
        require_tool(program)
    pg_bin = _require_postgres_server()
    stack = Stack(load_compose(SHELL_ENV), compose_root)
    hosts = stack.hosts
    pg_paths = hosts.paths("postgres")
    postgres = PostgresEntrypoint(
        pg_bin,
        stack.environment("postgres"),
        data=pg_paths["/var/lib/postgresql/data"],
        sockets=hosts.private_dir("postgres", "/var/run/postgresql"),
        port=hosts.host_port("postgres"),
        logs=stack.logs / "postgres",
    )
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(stack.stop)
        postgres.initdb()
        postgres.start_temporary()
        temporary = cleanup.enter_context(contextlib.ExitStack())
        temporary.callback(postgres.stop_temporary)
        assert stack.healthcheck("postgres").returncode != 0, "the socket-only temporary server counts as healthy"
        # the old check, `pg_isready -U gpuwatch`, asked over the socket: the temporary server answers it
        old_check = ["pg_isready", "-h", str(postgres.sockets), "-p", str(postgres.port), "-U", "gpuwatch"]
        assert run_healthcheck(old_check, stack.environment("postgres"), 10).returncode == 0
        # init, started as early as the old socket check let it: it waits for the database, not fails
        init = stack.start("init")
        wait_until(lambda: "waiting for the database" in init.output(), timeout=30, what="init to wait", every=0.2)
        postgres.create_database()
        temporary.close()
        stack.procs["postgres"] = postgres.start()
        stack.wait_healthy("postgres")

        alertmanager_yml = hosts.paths("alertmanager")["/etc/alertmanager/alertmanager.yml"]
        if alertmanager_version(require_tool("prometheus-alertmanager")) < (0, 26):
            inline_url_files(alertmanager_yml)  # the image is 0.27; Debian 12's 0.25 predates url_file
        stack.start("alertmanager")  # neither depends on anything
        stack.start("prometheus")
        assert stack.wait_exit("init", within_s=60) == 0, stack.procs["init"].output()
        secrets = hosts.paths("init")["/secrets"]
        tokens = {path.stem: path.read_text().strip() for path in secrets.glob("*.token")}
        assert set(tokens) == {"compose-node-1", "compose-node-2", "gpu-node"} and all(tokens.values()), tokens

        started = time.monotonic()
        stack.start("server")
        stack.wait_healthy("server", within_s=READY_WITHIN_S)
        ready = httpx.get(hosts.url("server", "/readyz"), timeout=5)
        assert ready.status_code == 200, ready.text
        assert time.monotonic() - started < READY_WITHIN_S

        stack.start("agent")
        command = stack.spec("agent")["command"]
        gpus = int(command[command.index("--simulate") + 1])
        stack.wait_healthy("alertmanager")
        stack.wait_healthy("prometheus")

        def agent_reports() -> bool:
            metrics = httpx.get(hosts.url("server", "/metrics"), timeout=5).text
            return (
                sum(
                    line.startswith("DCGM_FI_DEV_GPU_UTIL{") and 'instance="compose-node-1"' in line
                    for line in metrics.splitlines()
                )
                == gpus
            )

        wait_until(agent_reports, timeout=30, what="the simulated agent's GPUs on the server's /metrics", every=0.5)

        prometheus = httpx.Client(base_url=hosts.url("prometheus", "/api/v1"), timeout=5)
        cleanup.callback(prometheus.close)
        rules = yaml.safe_load((hosts.paths("prometheus")["/etc/prometheus"] / "alerts.yml").read_text())
        expected = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
        loaded = {r["name"] for g in prometheus.get("/rules").json()["data"]["groups"] for r in g["rules"]}
        assert loaded == expected
        managers = prometheus.get("/alertmanagers").json()["data"]["activeAlertmanagers"]
        assert [m["url"] for m in managers] == [hosts.url("alertmanager", "/api/v2/alerts")]

        def scraped() -> bool:  # the first scrape may precede the server: the next comes one interval later
            result = prometheus.get("/query", params={"query": 'up{job="gpuwatch"}'}).json()["data"]["result"]
            return [r["value"][1] for r in result] == ["1"]

        wait_until(scraped, timeout=35, what="Prometheus to scrape the server", every=0.5)


def test_the_grafana_healthcheck_is_curl_on_its_port(tmp_path: Path) -> None:
    """No Grafana server can be installed here: the command is checked for its shell syntax, its
    program (the image has curl, not wget), its port and path, and is run as written against a stand-in
    answering /api/health as Grafana does (200 when its database is ok, 503 when not)."""
    compose = load_compose(SHELL_ENV)
    grafana = compose["services"]["grafana"]
    argv = healthcheck_argv(grafana)
    syntax = subprocess.run(["bash", "-n", "-c", shlex.join(argv)], capture_output=True, text=True, timeout=10)
    assert syntax.returncode == 0, syntax.stderr
    assert argv[0] == "curl" and any(a == "--fail" or (a.startswith("-f") and a[1:].isalpha()) for a in argv), argv
    url = urlsplit(argv[-1])
    assert (url.hostname, url.port, url.path) == ("127.0.0.1", container_ports(compose)["grafana"], "/api/health")

    status = {"code": 200}

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status["code"] if self.path == "/api/health" else 404)
            self.end_headers()
            self.wfile.write(b'{"database": "ok"}' if status["code"] == 200 else b'{"database": "failing"}')

        def log_message(self, *args: object) -> None:
            pass

    hosts = HostMap(compose, tmp_path, {"grafana": container_ports(compose)["grafana"]})
    require_tool("curl")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", hosts.host_port("grafana")), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        check = hosts.translate_argv(argv, "grafana")
        assert run_healthcheck(check, {"PATH": os.environ["PATH"]}, 10).returncode == 0
        status["code"] = 503
        assert run_healthcheck(check, {"PATH": os.environ["PATH"]}, 10).returncode != 0
    finally:
        server.shutdown()
        server.server_close()
        hosts.release()


def test_host_ports_are_held_from_the_map_until_released(tmp_path: Path) -> None:
    """A port chosen minutes before its service starts was once taken meanwhile by another test's outgoing
    connection ("address already in use"): the map holds each port until `release`, and a server that sets
    SO_REUSEADDR, as every service here does, still listens on it."""
    hosts = HostMap(load_compose(SHELL_ENV), tmp_path, {"server": 8600, "prometheus": 9090})
    port = hosts.host_port("server")
    assert port != hosts.host_port("prometheus")
    with socket.socket() as other, pytest.raises(OSError):  # no other bind, so no connection's port either
        other.bind(("127.0.0.1", port))
    with socket.socket() as service:
        service.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        service.bind(("127.0.0.1", port))
        service.listen()
    hosts.release()
    with socket.socket() as other:
        other.bind(("127.0.0.1", port))


def test_every_healthcheck_calls_a_program_its_image_ships() -> None:
    services = load_compose(SHELL_ENV)["services"]
    for name, service in services.items():
        if "healthcheck" not in service:
            continue
        image = "gpuwatch:dev" if "build" in service else service["image"].split(":")[0]
        program = healthcheck_argv(service)[0]
        assert program in IMAGE_PROGRAMS[image], f"{name}: {program} is not in {image}"


def test_postgres_is_healthy_over_tcp_only() -> None:
    """The socket check passed while the image's entrypoint ran its temporary socket-only server."""
    argv = healthcheck_argv(load_compose(SHELL_ENV)["services"]["postgres"])
    assert argv[0] == "pg_isready" and argv[argv.index("-h") + 1] == "127.0.0.1", argv


def test_long_running_services_restart_and_init_runs_once() -> None:
    compose = load_compose(SHELL_ENV)
    for name, service in compose["services"].items():
        expected = "no" if name == "init" else "unless-stopped"
        assert service.get("restart") == expected, name
    init = compose["services"]["init"]
    assert "gpuwatch db upgrade --wait" in init["command"][0]
    assert init["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert compose["services"]["server"]["depends_on"]["init"]["condition"] == "service_completed_successfully"


def test_gpuwatch_image_entrypoint_and_environment_come_from_the_dockerfile() -> None:
    image = gpuwatch_image()
    assert image.entrypoint == ["gpuwatch"]
    assert image.env["GPUWATCH_DATA_DIR"] == "/var/lib/gpuwatch"
    assert (VENV_BIN / "gpuwatch").is_file()


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("$${NODE} and $$node", {}, "${NODE} and $node"),
        ("${NODE:-gpu-node}", {}, "gpu-node"),
        ("${NODE:-gpu-node}", {"NODE": ""}, "gpu-node"),
        ("${NODE-gpu-node}", {"NODE": ""}, ""),
        ("${NODE:-gpu-node}", {"NODE": "a100-7"}, "a100-7"),
        ("/secrets/$NODE.token", {"NODE": "n1"}, "/secrets/n1.token"),
        ("${NODE:+set}${OTHER+also}", {"NODE": "x", "OTHER": ""}, "setalso"),
    ],
)
def test_interpolation_follows_compose(text: str, env: dict[str, str], expected: str) -> None:
    assert interpolate(text, env) == expected


def test_interpolation_refuses_what_compose_refuses() -> None:
    with pytest.raises(ComposeError, match="NODE"):
        interpolate("${NODE:?set the GPU node's name}", {})
    with pytest.raises(ComposeError, match="invalid interpolation"):
        interpolate("${1NODE}", {})
