"""Which rank holds a hung job up: the ranks' stacks (py-spy) and flight recorder dumps, compared.

Pure functions over captured stacks, no I/O. In a hang, the ranks that did their part wait in the same
collective (all_reduce, barrier, ...); the rank that holds them up is elsewhere: in a busy loop, asleep
in a data loader, waiting on something of its own. So:

1. Ranks in a collective and ranks outside any: the ones outside never entered the collective the others
   wait in. They are the suspects.
2. Every rank in a collective, but not the same one (a desync): the ranks of the smaller group.
3. No rank in a collective: the ranks of the one smallest group of identical (normalised) stacks.
4. The flight recorder, when the ranks' dumps say which collective each last entered: the ranks behind
   the others (a lower sequence number) never entered the one the others wait in. Used when the stacks
   alone name nobody (every rank waits in the same collective, as NCCL's asynchronous ones make look).

A tie, a single rank, or every rank alike names nobody: "no suspect" rather than a guess.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

#: torch.distributed calls a rank waits in while it takes part in a collective.
COLLECTIVES = frozenset(
    {
        "all_reduce",
        "all_reduce_coalesced",
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_object",
        "all_to_all",
        "all_to_all_single",
        "barrier",
        "monitored_barrier",
        "broadcast",
        "broadcast_object_list",
        "reduce",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "gather",
        "gather_object",
        "scatter",
        "scatter_object_list",
        "send",
        "recv",
        "batch_isend_irecv",
    }
)
#: Path parts of library code: a frame in one is not the user's.
_LIBRARY = ("site-packages/", "dist-packages/", "/lib/python3", "<frozen", "/torch/", "/gpuwatch/client/")
#: Innermost user frames kept as a group's label and a suspect's evidence.
TOP_FRAMES = 3


@dataclass(frozen=True, slots=True)
class Frame:
    function: str
    file: str  # as py-spy shortens it: train.py
    line: int = 0
    path: str = ""  # the full path, when known
    native: bool = False

    def text(self) -> str:
        """The frame as py-spy prints it: ``busy_loop (train.py:42)``."""
        return f"{self.function} ({self.file}:{self.line})" if self.line else f"{self.function} ({self.file})"

    @property
    def user(self) -> bool:
        """Whether the frame is the job's own code (not Python's, torch's or a package's)."""
        where = self.path or self.file
        return not self.native and not any(part in where for part in _LIBRARY)


@dataclass(frozen=True, slots=True)
class Flight:
    """A rank's flight recorder: the sequence numbers of the last collective entered and completed."""

    entered: int | None
    completed: int | None
    op: str | None = None  # the last operation recorded, e.g. nccl:all_reduce


@dataclass(frozen=True, slots=True)
class Capture:
    """One rank's capture: its main thread's frames (innermost first), or the error that stood instead."""

    rank: int
    node: str
    frames: tuple[Frame, ...] = ()
    error: str | None = None
    flight: Flight | None = None

    def collective(self) -> str | None:
        """The collective the rank waits in (the innermost torch.distributed call of its stack), if any."""
        for f in self.frames:
            if f.function in COLLECTIVES and "distributed" in (f.path or f.file):
                return f.function
        return None

    def key(self) -> tuple[str, ...]:
        """The stack, normalised: Python frames as function and file, no line numbers (a loop moves them)."""
        return tuple(f"{f.function} ({f.file})" for f in self.frames if not f.native)

    def top(self, n: int = TOP_FRAMES) -> tuple[str, ...]:
        """The innermost user frames, else the innermost Python frames."""
        user = [f.text() for f in self.frames if f.user]
        return tuple(user[:n] or [f.text() for f in self.frames if not f.native][:n])


@dataclass(frozen=True, slots=True)
class Group:
    """Ranks with the same normalised stack."""

    ranks: tuple[int, ...]
    nodes: tuple[str, ...]
    collective: str | None  # the collective they wait in, if any
    top: tuple[str, ...]  # their innermost user frames
    flight: str = ""  # what their flight recorders say, in words
    suspect: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "ranks": list(self.ranks),
            "nodes": list(self.nodes),
            "collective": self.collective,
            "top": list(self.top),
            "flight": self.flight,
            "suspect": self.suspect,
        }


@dataclass(frozen=True, slots=True)
class Localisation:
    groups: tuple[Group, ...]
    suspects: tuple[int, ...]  # ranks; empty: no suspect
    suspect_nodes: tuple[str, ...]
    why: str  # how the suspects were found, or why none was
    evidence: tuple[str, ...]  # "rank 1 (node-a): busy_loop (train.py:42)", the suspects' innermost user frames
    failed: tuple[tuple[int, str, str], ...] = ()  # (rank, node, error) of ranks without a stack

    def to_json(self) -> dict[str, object]:
        return {
            "groups": [g.to_json() for g in self.groups],
            "suspects": list(self.suspects),
            "suspect_nodes": list(self.suspect_nodes),
            "why": self.why,
            "evidence": list(self.evidence),
            "failed": [{"rank": r, "node": n, "error": e} for r, n, e in self.failed],
        }


def main_frames(threads: Sequence[tuple[str, bool, bool, Sequence[Frame]]]) -> tuple[Frame, ...]:
    """The frames of a process's main thread: the one whose OS thread id is the pid (``main``), else the
    one named MainThread, else the first active one, else the first. ``threads``: (name, active, main,
    frames); py-spy cannot always read Python's thread names."""
    if not threads:
        return ()
    for pick in (lambda t: t[2], lambda t: t[0] == "MainThread", lambda t: t[1], lambda t: True):
        found = [t for t in threads if pick(t)]
        if found:
            return tuple(found[0][3])
    return ()


def localise(captures: Sequence[Capture]) -> Localisation:
    """Group the ranks by stack and name the suspects (module docstring); ranks without a stack are listed
    apart and judged by their flight recorder only."""
    failed = tuple(sorted((c.rank, c.node, c.error or "no stack") for c in captures if not c.frames))
    stacked = sorted((c for c in captures if c.frames), key=lambda c: c.rank)
    by_rank = {c.rank: c for c in captures}
    groups = _groups(stacked)
    suspects, why = _by_stacks(stacked, groups)
    if not suspects:
        behind, flight_why = _by_flight(captures)
        if behind:
            suspects, why = behind, flight_why
        elif flight_why:
            why = f"{why}; {flight_why}"
    chosen = set(suspects)
    groups = tuple(
        Group(g.ranks, g.nodes, g.collective, g.top, g.flight, suspect=bool(chosen & set(g.ranks))) for g in groups
    )
    evidence = tuple(
        f"rank {r} ({by_rank[r].node}): {line}" for r in suspects for line in by_rank[r].top() or ("no stack",)
    )
    nodes = tuple(sorted({by_rank[r].node for r in suspects}))
    return Localisation(groups, tuple(suspects), nodes, why, evidence, failed)


def _groups(stacked: Sequence[Capture]) -> tuple[Group, ...]:
    """Ranks by normalised stack, the largest group first (then by lowest rank)."""
    members: dict[tuple[str, ...], list[Capture]] = {}
    for c in stacked:
        members.setdefault(c.key(), []).append(c)
    out = []
    for same in members.values():
        first = same[0]
        out.append(
            Group(
                ranks=tuple(c.rank for c in same),
                nodes=tuple(sorted({c.node for c in same})),
                collective=first.collective(),
                top=first.top(),
                flight=_flight_words(same),
            )
        )
    return tuple(sorted(out, key=lambda g: (-len(g.ranks), g.ranks)))


def _by_stacks(stacked: Sequence[Capture], groups: Sequence[Group]) -> tuple[list[int], str]:
    """The suspects the stacks name (rules 1-3), and how; no suspect: an empty list and why not."""
    if len(stacked) < 2:
        return [], f"{len(stacked)} rank's stack captured: nothing to compare it with, no suspect"
    waiting = [c for c in stacked if c.collective()]
    outside = [c for c in stacked if not c.collective()]
    if waiting and outside:
        op, _ = Counter(c.collective() for c in waiting).most_common(1)[0]
        ranks = [c.rank for c in outside]
        return ranks, (
            f"{_ranks(ranks)} never entered the collective the others wait in ({op}: "
            f"{_ranks([c.rank for c in waiting])})"
        )
    if len(groups) < 2:
        what = f"in {groups[0].collective}" if groups and groups[0].collective else "in the same place"
        return [], f"every rank's stack is alike ({what}): the stacks name no suspect"
    if waiting:  # all in collectives: a desync if they differ in which
        ops = Counter(c.collective() for c in waiting)
        if len(ops) < 2:
            return [], f"every rank waits in {next(iter(ops))}: the stacks name no suspect"
        return _minority(
            {op: [c.rank for c in waiting if c.collective() == op] for op in ops}, "wait in a different collective"
        )
    return _minority({g.top: list(g.ranks) for g in groups}, "are elsewhere than the others")


def _minority(groups: dict[object, list[int]], what: str) -> tuple[list[int], str]:
    """The ranks of the one smallest group; none on a tie for smallest."""
    sizes = sorted(len(r) for r in groups.values())
    if sizes[0] == sizes[1]:
        return [], f"{len(groups)} groups of ranks, the smallest tied ({sizes[0]} and {sizes[1]} ranks): no suspect"
    (ranks,) = [r for r in groups.values() if len(r) == sizes[0]]
    return sorted(ranks), f"{_ranks(ranks)} {what} (the smallest group of {len(groups)})"


def _by_flight(captures: Sequence[Capture]) -> tuple[list[int], str]:
    """The ranks whose flight recorder shows them behind the others in collectives entered."""
    entered = {c.rank: c.flight.entered for c in captures if c.flight is not None and c.flight.entered is not None}
    if len(entered) < 2:
        return [], ""
    last = max(entered.values())
    behind = sorted(r for r, seq in entered.items() if seq < last)
    if not behind:
        return [], f"every rank's flight recorder entered collective {last}: it names no suspect"
    return behind, (
        f"{_ranks(behind)} never entered collective {last}, which {_ranks([r for r in entered if r not in behind])} "
        "entered (flight recorder)"
    )


def _flight_words(same: Sequence[Capture]) -> str:
    seen = sorted({(c.flight.entered, c.flight.completed, c.flight.op) for c in same if c.flight is not None}, key=str)
    return "; ".join(f"entered {e}, completed {d}" + (f" ({op})" if op else "") for e, d, op in seen)


def _ranks(ranks: Sequence[int]) -> str:
    ranks = sorted(ranks)
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
