"""docker-compose.yml's services as processes on this host, for machines without a Docker engine.

Each service runs the command compose would run (the image's entrypoint, the service's command), with
the environment compose would give it (the image's ENV, the service's `environment`, after compose's
variable interpolation), and its health check runs as written. What a container has that a host
process has not is mapped, explicitly and nowhere else than in `HostMap`:

- names: every service name (`server`, `postgres`, …) is 127.0.0.1;
- ports: every container port a service listens on gets a free host port (compose's own 8600, 9090, …
  may be taken on a shared machine); `server:8600` and, inside the server, `127.0.0.1:8600` both become
  `127.0.0.1:<its host port>`;
- paths: every volume, secret and bind mount is a path of the test's own (bind-mounted files are copied,
  so that the addresses in them can be mapped too); container paths in commands, environment values
  and mounted files are rewritten to them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import REPO, Proc, reserved_port

COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
VENV_BIN = Path(sys.executable).parent

# Compose's interpolation (https://docs.docker.com/reference/compose-file/interpolation/): `$$` is a
# literal `$`; `$VAR`, `${VAR}`; `${VAR:-default}` / `${VAR-default}` (unset or empty / unset);
# `${VAR:?error}` / `${VAR?error}`; `${VAR:+replacement}` / `${VAR+replacement}`.
_VARIABLE = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?", re.S)


class ComposeError(ValueError):
    """docker-compose.yml asks for something compose itself would refuse."""


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """``value`` (a parsed compose file or any part of it) with variables substituted as compose does."""
    if isinstance(value, str):
        return _VARIABLE.sub(lambda m: _substitute(m, env), value)
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    return value


def _substitute(match: re.Match[str], env: Mapping[str, str]) -> str:
    if match["escaped"]:
        return "$"
    if match["named"]:
        return env.get(match["named"], "")
    braced = _BRACED.fullmatch(match["braced"])
    if braced is None:
        raise ComposeError(f"invalid interpolation format: {match[0]!r}")
    name, op, arg = braced["name"], braced["op"], braced["arg"]
    value = env.get(name)
    if op is None:
        return value or ""
    missing = value is None or (op.startswith(":") and value == "")
    if op.endswith("-"):
        return arg if missing else str(value)
    if op.endswith("?"):
        if missing:
            raise ComposeError(f"required variable {name} is missing a value: {arg}")
        return str(value)
    return "" if missing else arg  # `+`


def load_compose(env: Mapping[str, str]) -> dict[str, Any]:
    """docker-compose.yml, its YAML anchors and merge keys resolved and ``env`` interpolated."""
    return interpolate(yaml.safe_load(COMPOSE_FILE.read_text()), env)


@dataclass(frozen=True)
class Image:
    """What of an image a service inherits: its entrypoint and environment."""

    entrypoint: list[str]
    env: dict[str, str] = field(default_factory=dict)


def gpuwatch_image() -> Image:
    """The ENTRYPOINT and ENV of the repository's Dockerfile (the image compose builds)."""
    text = DOCKERFILE.read_text()
    [entrypoint] = re.findall(r"^ENTRYPOINT (\[.*\])$", text, re.M)
    env: dict[str, str] = {}
    for line in re.findall(r"^ENV (.+)$", text, re.M):
        env |= dict(item.split("=", 1) for item in shlex.split(line))
    return Image(json.loads(entrypoint), env)


#: The other images, as their Dockerfiles declare them (prometheus/prometheus and prometheus/alertmanager,
#: both FROM quay.io/prometheus/busybox): ENTRYPOINT, and the host binary that stands in for it.
IMAGES = {
    "prom/prometheus": Image(["/bin/prometheus"]),
    "prom/alertmanager": Image(["/bin/alertmanager"]),
}
HOST_BINARIES = {"/bin/prometheus": "prometheus", "/bin/alertmanager": "prometheus-alertmanager"}


def image_of(service: Mapping[str, Any]) -> Image:
    if "build" in service:
        return gpuwatch_image()
    return IMAGES[service["image"].split(":")[0]]


def healthcheck_argv(service: Mapping[str, Any]) -> list[str]:
    """The health check's command as Docker runs it: `CMD` execs the rest, `CMD-SHELL` runs it in sh."""
    test = service["healthcheck"]["test"]
    if isinstance(test, str):
        return ["sh", "-c", test]
    if test[0] == "CMD":
        return list(test[1:])
    if test[0] == "CMD-SHELL":
        return ["sh", "-c", test[1]]
    raise ComposeError(f"health check {test!r}: neither CMD nor CMD-SHELL")


def duration_s(text: str) -> float:
    """A compose duration (`2s`, `1m30s`, `500ms`) in seconds."""
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ComposeError(f"invalid duration {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


class HostMap:
    """The one place where container names, ports and paths become this host's (see the module's doc)."""

    def __init__(self, compose: Mapping[str, Any], root: Path, container_ports: Mapping[str, int]) -> None:
        self.compose, self.root = compose, root
        #: the host ports, held until `release` so that no other process's connection takes one meanwhile
        self._held = {name: reserved_port() for name in container_ports}
        #: service → (container port, host port)
        self.ports = {name: (port, self._held[name].getsockname()[1]) for name, port in container_ports.items()}
        self._paths: dict[str, dict[str, Path]] = {}
        (root / "home").mkdir(parents=True, exist_ok=True)

    def host_port(self, service: str) -> int:
        return self.ports[service][1]

    def release(self) -> None:
        """Let go of the host ports (after the services listening on them have stopped)."""
        for held in self._held.values():
            held.close()

    def url(self, service: str, path: str = "") -> str:
        return f"http://127.0.0.1:{self.host_port(service)}{path}"

    def paths(self, service: str) -> dict[str, Path]:
        """Container path → host path for each volume, bind mount and secret of ``service``, created on
        first use: named volumes as directories under ``root``, bind mounts as copies."""
        if service not in self._paths:
            self._paths[service] = self._mount(service)
        return self._paths[service]

    def _mount(self, service: str) -> dict[str, Path]:
        spec = self.compose["services"][service]
        mounts: dict[str, Path] = {}
        for volume in spec.get("volumes", []):
            if not isinstance(volume, str):
                raise ComposeError(f"{service}: only the short volume syntax is mapped here: {volume!r}")
            source, target = volume.split(":")[:2]
            if source.startswith("./"):
                mounts[target] = self._copy(service, REPO / source)
            elif source.startswith("/"):  # the host's own path (the gpu profile's /var/log, /sys)
                mounts[target] = Path(source)
            else:
                mounts[target] = self.root / "volumes" / source
                mounts[target].mkdir(parents=True, exist_ok=True)
        for name in spec.get("secrets", []):
            mounts[f"/run/secrets/{name}"] = REPO / self.compose["secrets"][name]["file"]
        for host in mounts.values():  # mapped once every path of the service is known
            if host.is_relative_to(self.root / "mounts"):
                for text_file in [host] if host.is_file() else sorted(p for p in host.rglob("*") if p.is_file()):
                    text_file.write_text(self.translate(text_file.read_text(), service, mounts))
        return mounts

    def _copy(self, service: str, source: Path) -> Path:
        dest = self.root / "mounts" / service / source.relative_to(REPO)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            # What git does not track is not the repository's: the bytecode a test run left in dashboards/
            # (its build.py imported) is no text to translate, and no container would see it either.
            shutil.copytree(source, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, dest)
        return dest

    def private_dir(self, service: str, container_path: str) -> Path:
        """A directory of the container's own filesystem that no volume covers (the image's data dir)."""
        path = self.root / "private" / service / container_path.strip("/")
        path.mkdir(parents=True, exist_ok=True)
        self.paths(service)[container_path] = path
        return path

    def translate(self, text: str, service: str, paths: Mapping[str, Path] | None = None) -> str:
        """``text`` as seen from ``service``, with other services' names and its own loopback ports and
        paths mapped to the host's."""
        for name, (container, host) in self.ports.items():
            text = re.sub(rf"(?<![\w.-]){re.escape(name)}:{container}\b", f"127.0.0.1:{host}", text)
        if service in self.ports:
            container, host = self.ports[service]
            text = re.sub(rf"\b(127\.0\.0\.1|localhost):{container}\b", f"127.0.0.1:{host}", text)
        mounts = self.paths(service) if paths is None else paths
        for container_path in sorted(mounts, key=len, reverse=True):
            text = re.sub(rf"(?<![\w./-]){re.escape(container_path)}(?![\w.-])", str(mounts[container_path]), text)
        return text

    def translate_argv(self, argv: list[str], service: str) -> list[str]:
        """Each argument translated; a bare container port after `-p`/`--port` becomes the host port."""
        out = [self.translate(arg, service) for arg in argv]
        if service in self.ports:
            container, host = self.ports[service]
            for i in range(1, len(out)):
                if out[i - 1] in ("-p", "--port") and out[i] == str(container):
                    out[i] = str(host)
        return out

    def environment(self, service: str, image: Image, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        """The container's environment: the image's ENV, then the service's, translated; a PATH that finds
        the image's programs (this venv's `gpuwatch` and `python` first); then ``overrides``."""
        env = {**image.env, **{k: str(v) for k, v in self.compose["services"][service].get("environment", {}).items()}}
        env = {k: self.translate(v, service) for k, v in env.items()}
        base = {"PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}", "LANG": "C.UTF-8"}
        return {**base, "HOME": str(self.root / "home"), **env, **(overrides or {})}

    def command(self, service: str, image: Image) -> list[str]:
        """entrypoint + command as compose composes them, translated, the entrypoint's program mapped
        to the host's: this venv's `gpuwatch`, Debian's `prometheus`, …"""
        spec = self.compose["services"][service]
        entrypoint = spec.get("entrypoint", image.entrypoint)
        command = spec.get("command", [])
        command = command if isinstance(command, list) else shlex.split(command)
        argv = self.translate_argv([*entrypoint, *command], service)
        program = argv[0]
        if program == "gpuwatch":
            argv[0] = str(VENV_BIN / "gpuwatch")
        elif program in HOST_BINARIES:
            argv[0] = shutil.which(HOST_BINARIES[program]) or HOST_BINARIES[program]
        return argv


class ServiceProcess(Proc):
    """A service's main process, its output in a file; run as ``user`` when given (PostgreSQL will not
    run as root)."""

    def __init__(self, argv: list[str], env: Mapping[str, str], log: Path, user: str | None = None) -> None:
        self.args, self.log_path = argv, log
        self._out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT, env=dict(env), user=user)


def run_healthcheck(argv: list[str], env: Mapping[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """One run of a health check; exit status 0 is healthy, as Docker reads it."""
    try:
        return subprocess.run(argv, env=dict(env), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(argv, 124, str(exc.stdout or ""), f"timed out after {timeout_s} s")


def postgres_bin_dir() -> Path | None:
    """The directory of this host's PostgreSQL server programs (initdb, pg_ctl, postgres, psql), if any."""
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True)
    for directory in candidates:
        if all((directory / name).is_file() for name in ("initdb", "pg_ctl", "postgres", "psql")):
            return directory
    return None


class PostgresEntrypoint:
    """What the postgres image's docker-entrypoint.sh does on an empty volume (docker-library/postgres,
    15/bookworm/docker-entrypoint.sh), with this host's PostgreSQL: initdb as POSTGRES_USER with
    POSTGRES_PASSWORD, `host all all all <password_encryption>` appended to pg_hba.conf, a temporary
    server with listen_addresses='' (socket only) that creates POSTGRES_DB, then the server itself,
    listening on every address of the container (here: loopback, on the mapped port).

    One deliberate difference: initdb's default pg_hba.conf trusts TCP from 127.0.0.1, which inside the
    container is only the container itself; here loopback stands for the compose network, so host
    connections need the password (`--auth-host=scram-sha-256`), as the other services' would."""

    def __init__(self, bin_dir: Path, env: Mapping[str, str], data: Path, sockets: Path, port: int, logs: Path) -> None:
        self.bin, self.env, self.data, self.sockets, self.port = bin_dir, dict(env), data, sockets, port
        self.logs = logs
        self.user = "postgres" if os.geteuid() == 0 else None  # initdb and postgres refuse to run as root
        for path in (data, sockets, logs):
            path.mkdir(parents=True, exist_ok=True)
            if self.user:
                shutil.chown(path, self.user)
        data.chmod(0o700)

    def _run(self, *argv: str, timeout: float = 60) -> str:
        out = subprocess.run(
            [str(a) for a in argv], env=self.env, capture_output=True, text=True, timeout=timeout, user=self.user
        )
        if out.returncode != 0:
            raise AssertionError(f"{argv[0]} exited with {out.returncode}:\n{out.stdout}{out.stderr}")
        return out.stdout

    def initdb(self) -> None:
        password = self.data.parent / "pwfile"
        password.write_text(self.env["POSTGRES_PASSWORD"] + "\n")
        if self.user:
            shutil.chown(password, self.user)
        self._run(
            self.bin / "initdb",
            f"--pgdata={self.data}",
            f"--username={self.env['POSTGRES_USER']}",
            f"--pwfile={password}",
            "--auth-host=scram-sha-256",
            "--no-sync",  # a test's cluster: durability is not the point, two shared cores are
        )
        password.unlink()
        with open(self.data / "pg_hba.conf", "a") as hba:
            hba.write("\nhost all all all scram-sha-256\n")

    def start_temporary(self) -> None:
        options = f"-c listen_addresses='' -p {self.port} -c unix_socket_directories={self.sockets}"
        self._run(
            self.bin / "pg_ctl", "-D", self.data, "-o", options, "-l", self.logs / "postgres-temp.log", "-w", "start"
        )

    def create_database(self) -> None:
        name = self.env.get("POSTGRES_DB") or self.env["POSTGRES_USER"]
        self._run(
            *(self.bin / "psql", "-v", "ON_ERROR_STOP=1", "--no-psqlrc", "-h", self.sockets, "-p", str(self.port)),
            *("-U", self.env["POSTGRES_USER"], "-d", "postgres", "-c", f'CREATE DATABASE "{name}"'),
        )

    def stop_temporary(self) -> None:
        self._run(self.bin / "pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def start(self) -> ServiceProcess:
        argv = [
            str(self.bin / "postgres"),
            *("-D", str(self.data), "-p", str(self.port)),
            *("-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.sockets}"),
            *("-c", "fsync=off"),
        ]
        return ServiceProcess(argv, self.env, self.logs / "postgres.log", user=self.user)


def inline_url_files(config: Path) -> None:
    """Alertmanager before 0.26 has no `url_file` (the compose file's image is 0.27, Debian 12's is
    0.25): write each webhook's URL, read from its file, into the config instead."""
    text = config.read_text()
    config.write_text(re.sub(r"url_file: (\S+)", lambda m: f"url: {json.dumps(Path(m[1]).read_text().strip())}", text))


def alertmanager_version(binary: str) -> tuple[int, int]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    found = re.search(r"version (\d+)\.(\d+)", out.stdout + out.stderr)
    if found is None:
        raise AssertionError(f"{binary} --version: no version in {out.stdout + out.stderr!r}")
    return int(found[1]), int(found[2])
