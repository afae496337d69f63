"""What ``import gpuwatch.client`` adds to a training script's start, against a bare interpreter.

Starts the same interpreter ``--repeats`` times each with ``-c pass`` and with ``-c "import
gpuwatch.client"``, interleaved so drift hits both alike, and reports the medians of each process's
wall time (start to exit, as the parent sees it) and CPU time (user + system, from ``wait4``: less
disturbed by other load on a shared machine). Each child also says whether pydantic ended up in
``sys.modules`` and how long the import statement itself took; a third process times importing the
wire models (`gpuwatch.protocol`) after the client: what the reporter's thread pays at its first
report. Bytecode is cached, as in any installed package, in a temporary ``PYTHONPYCACHEPREFIX`` that
a first, untimed run of each command fills (also where ``PYTHONDONTWRITEBYTECODE`` is set). ``--tree
DIR`` imports the ``gpuwatch`` of another checkout (e.g. one unpacked with ``git archive``) to
measure another commit with the same interpreter.

    .venv/bin/python bench/client_import.py [--repeats 10] [--tree DIR]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout whose gpuwatch is imported")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if not (args.tree / "gpuwatch" / "client" / "__init__.py").is_file():
        parser.error(f"{args.tree} holds no gpuwatch/client package")

    # Run in the tree, and with it on PYTHONPATH: its gpuwatch wins over the editable install's finder.
    tree = args.tree.resolve()
    pycache = tempfile.TemporaryDirectory(prefix="gpuwatch-pycache-")
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONPYCACHEPREFIX": pycache.name}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    variants = {"bare interpreter (`-c pass`)": "pass", "`import gpuwatch.client`": IMPORT}
    for code in (*variants.values(), DEFERRED):  # warm the page cache and write the .pyc files first
        run_once(code, tree, env)
    walls: dict[str, list[float]] = {name: [] for name in variants}
    cpus: dict[str, list[float]] = {name: [] for name in variants}
    pydantic: set[str] = set()
    inside: list[float] = []
    deferred: list[float] = []
    for _ in range(args.repeats):
        for name, code in variants.items():
            wall, cpu, out = run_once(code, tree, env)
            walls[name].append(wall * 1e3)
            cpus[name].append(cpu * 1e3)
            if code == IMPORT:
                flag, ms = out.split()
                pydantic.add(flag)
                inside.append(float(ms))
        deferred.append(float(run_once(DEFERRED, tree, env)[2]))

    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; tree {tree}")
    print(f"median of {args.repeats} processes each, interleaved; pydantic imported: {' / '.join(sorted(pydantic))}")
    print()
    print("| process | wall ms (min-max) | CPU ms (min-max) |")
    print("|---|---|---|")
    for name in variants:
        w, c = walls[name], cpus[name]
        print(
            f"| {name} | {statistics.median(w):.1f} ({min(w):.1f}-{max(w):.1f}) "
            f"| {statistics.median(c):.1f} ({min(c):.1f}-{max(c):.1f}) |"
        )
    bare, imp = variants
    print(
        f"| added by the import | {statistics.median(walls[imp]) - statistics.median(walls[bare]):+.1f} "
        f"| {statistics.median(cpus[imp]) - statistics.median(cpus[bare]):+.1f} |"
    )
    print()
    print(f"the import statement alone, inside the process: {statistics.median(inside):.1f} ms median", end="")
    print(f" ({min(inside):.1f}-{max(inside):.1f})")
    print(f"then `import gpuwatch.protocol` (the reporter's first report): {statistics.median(deferred):.1f} ms median")


if __name__ == "__main__":
    main()
