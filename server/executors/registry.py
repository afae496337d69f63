"""The executors by name: built on demand, so that the Kubernetes client (~0.5 s to import) is loaded
only by a server that uses it."""

from __future__ import annotations

from typing import Any

from gpuwatch.config import Settings
from server.executors.base import Executor


def executor_for(name: str, **options: Any) -> Executor:
    """The executor called ``name``, built with ``options`` (its constructor's keyword arguments)."""
    if name == "slurm":
        from server.executors.slurm import SlurmExecutor

        return SlurmExecutor(**options)
    if name == "kubernetes":
        from server.executors.kubernetes import KubernetesExecutor  # imports the kubernetes client: ~0.5 s

        return KubernetesExecutor(**options)
    if name == "local":
        raise ValueError("the local executor is the supervisor (`gpuwatch run`), told over the HTTP API")
    raise ValueError(f"unknown executor {name!r}: expected 'slurm' or 'kubernetes'")


def executor_from_settings(name: str, settings: Settings) -> Executor:
    """``executor_for(name)`` with the options the settings give (`slurm_bin_dir`, `kubeconfig`, …)."""
    if name == "slurm" and settings.server.slurm_bin_dir is not None:
        bin_dir = settings.server.slurm_bin_dir
        return executor_for(name, scontrol=str(bin_dir / "scontrol"), squeue=str(bin_dir / "squeue"))
    if name == "kubernetes":
        kubeconfig = str(settings.server.kubeconfig) if settings.server.kubeconfig else None
        return executor_for(name, kubeconfig=kubeconfig, context=settings.server.kube_context)
    return executor_for(name)


_built: dict[tuple[str, ...], Executor] = {}


def executor(settings: Settings, name: str) -> Executor:
    """One executor per scheduler and configuration, built on first use (a Kubernetes client is costly)."""
    server = settings.server
    key = (name, str(server.slurm_bin_dir), str(server.kubeconfig), str(server.kube_context))
    if key not in _built:
        _built[key] = executor_from_settings(name, settings)
    return _built[key]
