"""What ``import gpuwatch.client`` adds to a training script's start, against a bare interpreter.

Starts the same interpreter ``--repeats`` times each with ``-c pass`` and with ``-c "import
gpuwatch.client"``, interleaved so drift hits both alike, and reports the medians of each process's
wall time (start to exit, as the parent sees it) and CPU time (user + system, from ``wait4``: less
disturbed by other load on a shared machine). Each child also says whether pydantic ended up in
``sys.modules`` and how long the import statement itself took; a third process times importing the
wire models (`gpuwatch.protocol`) after the client: what the reporter's thread pays at its first
report. Bytecode is cached, as in any installed package, in a temporary ``PYTHONPYCACHEPREFIX`` that
a first, untimed run of each command fills (also where ``PYTHONDONTWRITEBYTECODE`` is set). ``--tree
DIR`` (repeatable) imports the ``gpuwatch`` of other checkouts (e.g. one of another commit unpacked
with ``git archive``), interleaved in the same run with the same interpreter.

    .venv/bin/python bench/client_import.py [--repeats 10] [--tree DIR ...]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMPORT = (
    "import sys, time; t0 = time.perf_counter(); import gpuwatch.client; "
    "print('pydantic' in sys.modules, (time.perf_counter() - t0) * 1e3)"
)
#: What the reporter's thread imports at its first report, after the client.
DEFERRED = (
    "import time, gpuwatch.client; t0 = time.perf_counter(); import gpuwatch.protocol; "
    "print((time.perf_counter() - t0) * 1e3)"
)


def run_once(code: str, tree: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds and stdout of one ``python -c code`` run in ``tree``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=tree, env=env)
    out = proc.stdout.read() if proc.stdout is not None else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"python -c {code!r} exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, out.decode()


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--tree", type=Path, action="append", help="checkout whose gpuwatch is imported (repeatable; default: this one)"
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    trees = [t.resolve() for t in args.tree or [ROOT]]
    for tree in trees:
        if not (tree / "gpuwatch" / "client" / "__init__.py").is_file():
            parser.error(f"{tree} holds no gpuwatch/client package")

    pycache = tempfile.TemporaryDirectory(prefix="gpuwatch-pycache-")
    # Each child runs in its tree, with it on PYTHONPATH: its gpuwatch wins over an editable install's.
    envs = {t: {**os.environ, "PYTHONPATH": str(t), "PYTHONPYCACHEPREFIX": pycache.name} for t in trees}
    for env in envs.values():
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    # (label, code, tree): the bare interpreter once, then the import of each tree.
    variants = [("bare interpreter (`-c pass`)", "pass", trees[0])]
    variants += [(f"`import gpuwatch.client` ({t})", IMPORT, t) for t in trees]
    for _, code, tree in variants:  # warm the page cache and write the .pyc files first
        run_once(code, tree, envs[tree])
    for tree in trees:
        run_once(DEFERRED, tree, envs[tree])
    walls: dict[str, list[float]] = {label: [] for label, _, _ in variants}
    cpus: dict[str, list[float]] = {label: [] for label, _, _ in variants}
    pydantic: dict[Path, set[str]] = {t: set() for t in trees}
    inside: dict[Path, list[float]] = {t: [] for t in trees}
    deferred: dict[Path, list[float]] = {t: [] for t in trees}
    for _ in range(args.repeats):
        for label, code, tree in variants:  # interleaved, so drift hits every variant alike
            wall, cpu, out = run_once(code, tree, envs[tree])
            walls[label].append(wall * 1e3)
            cpus[label].append(cpu * 1e3)
            if code == IMPORT:
                flag, ms = out.split()
                pydantic[tree].add(flag)
                inside[tree].append(float(ms))
        for tree in trees:
            deferred[tree].append(float(run_once(DEFERRED, tree, envs[tree])[2]))

    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    print(f"median (min-max) of {args.repeats} processes each, interleaved; times in ms")
    print()
    print("| process | wall | CPU | added wall | added CPU | import statement | pydantic loaded | then protocol |")
    print("|---|---|---|---|---|---|---|---|")
    bare = variants[0][0]
    base_wall, base_cpu = statistics.median(walls[bare]), statistics.median(cpus[bare])
    print(f"| {bare} | {_ms(walls[bare])} | {_ms(cpus[bare])} | | | | | |")
    for label, _, tree in variants[1:]:
        w, c = walls[label], cpus[label]
        print(
            f"| {label} | {_ms(w)} | {_ms(c)} | {statistics.median(w) - base_wall:+.1f} "
            f"| {statistics.median(c) - base_cpu:+.1f} | {_ms(inside[tree])} | {'/'.join(sorted(pydantic[tree]))} "
            f"| {statistics.median(deferred[tree]):.1f} |"
        )
    print()
    print("then protocol: `import gpuwatch.protocol` after the client, in another process (what the")
    print("reporter's thread pays at its first report where the client does not import it).")


if __name__ == "__main__":
    main()
