"""gpuwatch: observability and failure diagnosis for GPU training clusters."""

__version__ = "0.1.0"
