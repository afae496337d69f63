"""Every collector of the agent, by name, with its default on or off: the one place a collector is added
(node_exporter's ``collector/collector.go``).

The ``collectors`` setting changes the defaults by name (``{"infiniband": false}``), and so do
``gpuwatch agent --collector NAME`` and ``--no-collector NAME``. A name that is not registered here
stops the agent at start-up with the list of known names, rather than being silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.collectors.base import Collector
from agent.collectors.infiniband import InfinibandCollector
from agent.collectors.kernel import KernelLogCollector
from agent.collectors.logfile import LogFileCollector, TailPosition
from agent.state import AgentState
from gpuwatch.config import Settings

#: Builds a collector from the settings and the agent's saved state; None: nothing to collect on this
#: node as configured (no log files given), so it is not run at all.
Factory = Callable[[Settings, AgentState], Collector | None]


class UnknownCollector(ValueError):
    """A collector named in the settings or flags that no one registered (a typo, most likely)."""


@dataclass(frozen=True, slots=True)
class Spec:
    name: str
    default: bool  # on unless the settings say otherwise
    help: str
    factory: Factory
    follows: bool = False  # a follower of appended lines: run every pass of the loop (≤ 0.2 s), not every interval_s


class Registry:
    """Collectors by name, in the order they run."""

    def __init__(self, specs: Iterable[Spec] = ()) -> None:
        self._specs: dict[str, Spec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: Spec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"collector {spec.name!r} is registered twice")
        self._specs[spec.name] = spec

    def __iter__(self) -> Iterator[Spec]:
        return iter(self._specs.values())

    def names(self) -> list[str]:
        return list(self._specs)

    def select(self, choices: Mapping[str, bool]) -> list[Spec]:
        """The collectors to run: each one's default, unless ``choices`` names it."""
        unknown = sorted(set(choices) - set(self._specs))
        if unknown:
            raise UnknownCollector(
                f"unknown collector{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                f"the collectors are: {', '.join(self._specs)}"
            )
        return [spec for spec in self._specs.values() if choices.get(spec.name, spec.default)]

    def build(self, settings: Settings, state: AgentState) -> list[tuple[Spec, Collector]]:
        """The selected collectors, built; if one cannot be (no NVIDIA driver), those built are closed."""
        built: list[tuple[Spec, Collector]] = []
        try:
            for spec in self.select(settings.agent.collectors):
                collector = spec.factory(settings, state)
                if collector is not None:
                    built.append((spec, collector))
        except BaseException:
            for _, collector in built:
                collector.close()
            raise
        return built


def _gpu(settings: Settings, state: AgentState) -> Collector:
    if settings.agent.simulate:
        from agent.collectors.simulated import SimulatedCollector

        return SimulatedCollector(settings.agent.node, settings.agent.simulate, fault_dir=settings.agent_dir / "faults")
    from agent.collectors.nvml import NvmlCollector  # needs no driver to import, only to start

    return NvmlCollector()


def _infiniband(settings: Settings, state: AgentState) -> Collector:
    return InfinibandCollector(settings.agent.sysfs_root)


def _kernel(settings: Settings, state: AgentState) -> Collector | None:
    if settings.agent.kernel_log is None:
        return None
    path = Path(settings.agent.kernel_log)
    return KernelLogCollector(path, state.kmsg, state.files.get(str(path), TailPosition()))


def _logfile(settings: Settings, state: AgentState) -> Collector | None:
    return LogFileCollector(map(Path, settings.agent.log_files), state.files) if settings.agent.log_files else None


REGISTRY = Registry(
    [
        Spec("gpu", True, "GPU samples and events (Xid, ECC, lost GPUs): NVML, or `simulate` GPUs", _gpu),
        Spec("infiniband", True, "InfiniBand port counters and link events under `sysfs_root`", _infiniband),
        Spec("kernel", True, "the `kernel_log` (NVRM Xid, OOM-killer lines), if set", _kernel, follows=True),
        Spec("logfile", True, "the job logs of `log_files`, if any", _logfile, follows=True),
    ]
)
