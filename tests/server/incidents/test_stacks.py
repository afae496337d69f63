"""server.incidents.stacks: ranks grouped by stack, the suspect named (or honestly none)."""

from __future__ import annotations

from server.incidents.stacks import Capture, Flight, Frame, localise, main_frames

C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
LOGGER = "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py"


def _in(op: str, *user: Frame) -> tuple[Frame, ...]:
    """A stack waiting in torch.distributed's ``op``, called from ``user`` (innermost first)."""
    return (
        Frame(op, "torch/distributed/distributed_c10d.py", 2800, C10D),
        Frame("wrapper", "torch/distributed/c10d_logger.py", 81, LOGGER),
        *user,
    )


STEP = Frame("train_step", "train.py", 55, "/job/train.py")
MAIN = Frame("main", "train.py", 90, "/job/train.py")
MODULE = Frame("<module>", "train.py", 99, "/job/train.py")


def test_the_rank_in_a_busy_loop_while_the_other_waits_in_all_reduce_is_the_suspect() -> None:
    busy = (Frame("busy_loop", "train.py", 42, "/job/train.py"), STEP, MAIN, MODULE)
    result = localise([Capture(0, "node-a", _in("all_reduce", STEP, MAIN, MODULE)), Capture(1, "node-b", busy)])
    assert result.suspects == (1,)
    assert result.suspect_nodes == ("node-b",)
    assert result.evidence[0] == "rank 1 (node-b): busy_loop (train.py:42)"
    assert "never entered the collective the others wait in (all_reduce" in result.why
    (suspect,) = [g for g in result.groups if g.suspect]
    assert suspect.ranks == (1,) and suspect.collective is None
    (waiting,) = [g for g in result.groups if not g.suspect]
    assert waiting.collective == "all_reduce" and waiting.top[0] == "train_step (train.py:55)"


def test_a_rank_asleep_in_its_data_loader_is_named_by_its_innermost_user_frame_not_libc() -> None:
    asleep = (
        Frame("clock_nanosleep", "libc.so.6", 0, "/usr/lib/x86_64-linux-gnu/libc.so.6", native=True),
        Frame("time_sleep", "libpython3.11.so.1.0", 0, "/usr/lib/libpython3.11.so.1.0", native=True),
        Frame("load_batch", "train.py", 30, "/job/train.py"),
        Frame("__next__", "torch/utils/data/dataloader.py", 630, "/venv/site-packages/torch/utils/data/dataloader.py"),
        STEP,
        MAIN,
    )
    result = localise([Capture(0, "n0", _in("all_reduce", STEP, MAIN)), Capture(1, "n0", asleep)])
    assert result.suspects == (1,)
    assert result.evidence[:2] == ("rank 1 (n0): load_batch (train.py:30)", "rank 1 (n0): train_step (train.py:55)")


def test_line_numbers_do_not_split_a_group_but_functions_do() -> None:
    waiting = [Capture(r, "n0", _in("barrier", Frame("f", "t.py", 10 + r, "/j/t.py"))) for r in range(3)]
    result = localise(waiting)
    assert [g.ranks for g in result.groups] == [(0, 1, 2)]
    assert result.suspects == ()
    assert "every rank" in result.why and "barrier" in result.why


def test_every_rank_in_the_same_collective_names_nobody_unless_the_flight_recorder_shows_one_behind() -> None:
    same = [Capture(r, f"n{r // 2}", _in("all_reduce", STEP)) for r in range(4)]
    assert localise(same).suspects == ()
    flights = [
        Capture(r, f"n{r // 2}", _in("all_reduce", STEP), flight=Flight(entered=7 if r != 2 else 6, completed=6))
        for r in range(4)
    ]
    result = localise(flights)
    assert result.suspects == (2,) and result.suspect_nodes == ("n1",)
    assert "rank 2 never entered collective 7" in result.why and "(flight recorder)" in result.why
    assert result.groups[0].flight == "entered 6, completed 6; entered 7, completed 6"


def test_a_desync_names_the_smaller_group_and_a_tie_names_nobody() -> None:
    ranks = [Capture(r, "n0", _in("all_reduce", STEP)) for r in range(3)] + [Capture(3, "n1", _in("barrier", MAIN))]
    result = localise(ranks)
    assert result.suspects == (3,) and result.suspect_nodes == ("n1",)
    assert "wait in a different collective" in result.why
    tie = [Capture(r, "n0", _in("all_reduce" if r < 2 else "barrier", STEP)) for r in range(4)]
    tied = localise(tie)
    assert tied.suspects == () and "tied" in tied.why


def test_without_collectives_the_one_smallest_stack_group_is_the_suspect_and_a_tie_is_not() -> None:
    a = (Frame("wait_for_data", "train.py", 12, "/j/train.py"), MAIN)
    b = (Frame("deadlock", "train.py", 20, "/j/train.py"), MAIN)
    result = localise([Capture(0, "n0", a), Capture(1, "n0", a), Capture(2, "n1", a), Capture(3, "n1", b)])
    assert result.suspects == (3,)
    assert localise([Capture(0, "n0", a), Capture(1, "n1", b)]).suspects == ()


def test_a_single_rank_or_none_with_a_stack_names_no_suspect_and_failures_are_listed() -> None:
    one = localise([Capture(0, "n0", (Frame("busy_loop", "t.py", 1, "/j/t.py"),))])
    assert one.suspects == () and "nothing to compare" in one.why
    failed = localise([Capture(0, "n0", error="py-spy is not installed on this node"), Capture(1, "n1", error="gone")])
    assert failed.suspects == () and failed.groups == ()
    assert failed.failed == ((0, "n0", "py-spy is not installed on this node"), (1, "n1", "gone"))
    assert failed.to_json()["failed"][0] == {"rank": 0, "node": "n0", "error": "py-spy is not installed on this node"}


def test_the_main_thread_is_the_one_compared() -> None:
    main, other = (Frame("a", "x.py", 1),), (Frame("b", "y.py", 2),)
    assert main_frames([("", True, False, other), ("", False, True, main)]) == main  # its thread id is the pid
    assert main_frames([("Thread-1", True, False, other), ("MainThread", False, False, main)]) == main
    assert main_frames([("pt_autograd_0", False, False, other), ("worker", True, False, main)]) == main
    assert main_frames([]) == ()
