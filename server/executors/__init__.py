"""How the server carries out a recovery decision on Slurm and on Kubernetes (see README.md here).

The local executor is the supervisor (`gpuwatch run`), which the server tells over the HTTP API."""

from server.executors.base import UNKNOWN, ActionResult, Executor, JobTarget
from server.executors.registry import executor_for

__all__ = ["UNKNOWN", "ActionResult", "Executor", "JobTarget", "executor_for"]
