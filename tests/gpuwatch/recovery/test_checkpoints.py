"""Checkpoint discovery and validation on real checkpoints: files written by torch.save, safetensors
bytes laid out by hand, torch.distributed.checkpoint directories, shard directories with a manifest,
a marker, or DeepSpeed's / Megatron-LM's tracker file. Each is then damaged the way a crash during a
save damages it, and the previous complete checkpoint must win, with the reason in words."""

from __future__ import annotations

import json
import logging
import os
import pickle
import struct
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gpuwatch.recovery.checkpoints import (
    MANIFEST,
    Checkpoint,
    Skipped,
    latest_valid,
    scan,
    step_of,
    validate,
    write_manifest,
)


@pytest.fixture(scope="module")
def torch() -> ModuleType:
    return pytest.importorskip("torch", reason="torch is not installed")


def _torch_save(torch: ModuleType, path: Path, step: int, numel: int = 4096) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"step": step, "w": torch.randn(numel), "b": torch.zeros(16)}, path)
    return path


def _safetensors(path: Path, tensors: dict[str, int]) -> Path:
    """A safetensors file as the format defines it: u64 LE header length, JSON header, tensor bytes."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, numel in tensors.items():
        header[name] = {"dtype": "F32", "shape": [numel], "data_offsets": [offset, offset + 4 * numel]}
        offset += 4 * numel
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + os.urandom(offset))
    return path


def _dcp_save(torch: ModuleType, directory: Path, step: int) -> Path:
    import torch.distributed.checkpoint as dcp

    state = {"step": step, "model": {"w": torch.randn(256, 64), "b": torch.zeros(64)}, "extra": [1, 2, 3]}
    with warnings.catch_warnings():  # "assuming the intent is to save in a single process"
        warnings.simplefilter("ignore")
        dcp.save(state, checkpoint_id=str(directory))
    return directory


def _shards(directory: Path, sizes: dict[str, int]) -> Path:
    """Files of about these sizes; those named like torch checkpoints are pickles, as torch's would be."""
    for rel, size in sizes.items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        data = _pickle_of_size(size) if Path(rel).suffix in (".pt", ".pth") else os.urandom(size)
        (directory / rel).write_bytes(data)
    return directory


def _pickle_of_size(size: int) -> bytes:
    """A pickle of random bytes that is exactly ``size`` bytes long."""
    payload = size
    while (data := pickle.dumps(os.urandom(payload))) and len(data) > size:
        payload -= len(data) - size
    assert len(data) == size, (size, len(data))
    return data


def _cut_in_half(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)


def _only(skipped: list[Skipped]) -> Skipped:
    assert len(skipped) == 1, skipped
    return skipped[0]


# --- names -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("step_000120.pt", 120),
        ("checkpoint-120.pt", 120),
        ("ckpt_120.pth", 120),
        ("model_120.safetensors", 120),
        ("checkpoint_120.pth.tar", 120),
        ("checkpoint-120", 120),  # Hugging Face Trainer
        ("global_step120", 120),  # DeepSpeed
        ("iter_0000120", 120),  # Megatron-LM
        ("step_120", 120),
        ("epoch=3-step=120.ckpt", 120),  # PyTorch Lightning
        ("latest", None),
        ("latest_checkpointed_iteration.txt", None),
        ("model.safetensors", None),
        ("tmp-checkpoint-120", None),  # a Trainer save still in its temporary directory
        ("step_120.pt.tmp", None),
        ("events.out.tfevents.1712345678.host", None),
    ],
)
def test_step_is_read_from_common_checkpoint_names_and_other_names_are_ignored(name: str, step: int | None) -> None:
    assert step_of(name) == step


def test_patterns_are_configurable_and_must_name_the_step(tmp_path: Path) -> None:
    (tmp_path / "weights.7.bin").write_bytes(b"x" * 10)
    (tmp_path / "weights.9.bin").write_bytes(b"x" * 10)
    (tmp_path / "step_100.pt").write_bytes(b"x" * 10)  # not matched by the job's own pattern
    best, skipped = latest_valid(tmp_path, patterns=[r"weights\.(?P<step>\d+)\.bin"])
    assert best is not None and (best.step, best.path.name, best.layout) == (9, "weights.9.bin", "file")
    assert skipped == []
    with pytest.raises(ValueError, match="no \\(\\?P<step>"):
        scan(tmp_path, patterns=[r"weights\.(\d+)\.bin"])


# --- single files ------------------------------------------------------------------------------------


def test_truncated_newest_torch_save_is_skipped_with_a_warning_and_the_previous_wins(
    torch: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for step in (100, 200, 300):
        _torch_save(torch, tmp_path / f"step_{step:06d}.pt", step)
    _cut_in_half(tmp_path / "step_000300.pt")

    with caplog.at_level(logging.WARNING, logger="gpuwatch.recovery.checkpoints"):
        best, skipped = latest_valid(tmp_path)

    assert isinstance(best, Checkpoint)
    assert (best.step, best.layout, best.path) == (200, "torch", tmp_path / "step_000200.pt")
    assert best.size_bytes == (tmp_path / "step_000200.pt").stat().st_size > 0
    assert best.files == (tmp_path / "step_000200.pt",)
    gone = _only(skipped)
    assert (gone.path.name, gone.step) == ("step_000300.pt", 300)
    assert "truncated or corrupt zip" in gone.why
    assert any("step_000300.pt" in r.getMessage() and "truncated" in r.getMessage() for r in caplog.records)
    # and the one that won really loads
    assert torch.load(best.path, weights_only=True)["step"] == 200


def test_scan_lists_valid_checkpoints_by_step_and_the_skipped_ones(torch: ModuleType, tmp_path: Path) -> None:
    _torch_save(torch, tmp_path / "ckpt_30.pth", 30)
    _torch_save(torch, tmp_path / "ckpt_5.pth", 5)
    _safetensors(tmp_path / "model_20.safetensors", {"w": 100})
    (tmp_path / "ckpt_40.pth").write_bytes(b"")  # created, never written
    (tmp_path / "notes.txt").write_text("not a checkpoint")

    valid, skipped = scan(tmp_path)

    assert [(c.step, c.layout) for c in valid] == [(5, "torch"), (20, "safetensors"), (30, "torch")]
    assert [(s.step, s.why) for s in skipped] == [(40, "ckpt_40.pth is 0 bytes")]


def test_latest_valid_stops_at_the_newest_valid_one_without_checking_older_ones(
    torch: ModuleType, tmp_path: Path
) -> None:
    for step in range(1, 9):
        _torch_save(torch, tmp_path / f"step_{step}.pt", step, numel=8)
        if step != 6:
            _cut_in_half(tmp_path / f"step_{step}.pt")

    best, skipped = latest_valid(tmp_path)

    assert best is not None and best.step == 6
    assert [s.step for s in skipped] == [8, 7]  # 1-5 are damaged too, but never looked at
    assert len(scan(tmp_path)[1]) == 7


def test_safetensors_must_fit_its_header_exactly(tmp_path: Path) -> None:
    _safetensors(tmp_path / "model_100.safetensors", {"a": 64, "b": 32})
    _safetensors(tmp_path / "model_200.safetensors", {"a": 64, "b": 32})
    _cut_in_half(tmp_path / "model_200.safetensors")
    _safetensors(tmp_path / "model_300.safetensors", {"a": 8})
    with open(tmp_path / "model_300.safetensors", "ab") as f:
        f.write(b"\0" * 4)  # bytes no tensor accounts for
    (tmp_path / "model_400.safetensors").write_bytes(struct.pack("<Q", 10_000) + b"{}")

    best, skipped = latest_valid(tmp_path)

    assert best is not None and (best.step, best.layout) == (100, "safetensors")
    why = {s.step: s.why for s in skipped}
    assert "header of 10000 bytes does not fit in 10 bytes" in why[400]
    size_300 = (tmp_path / "model_300.safetensors").stat().st_size
    assert why[300] == f"model_300.safetensors: safetensors header says {size_300 - 4} bytes, the file has {size_300}"
    assert "safetensors header says" in why[200]


def test_other_file_formats_need_only_a_non_zero_size(tmp_path: Path) -> None:
    (tmp_path / "checkpoint-1.bin").write_bytes(b"raw weights of some format")
    result = validate(tmp_path / "checkpoint-1.bin")
    assert isinstance(result, Checkpoint) and (result.step, result.layout) == (1, "file")


def test_torch_legacy_format_and_plain_pickles_are_checked_to_their_last_byte(
    torch: ModuleType, tmp_path: Path
) -> None:
    legacy = tmp_path / "step_1.pt"
    state = {"w": torch.randn(300), "n": torch.arange(7), "h": torch.zeros(5, dtype=torch.bfloat16)}
    torch.save(state, legacy, _use_new_zipfile_serialization=False)
    plain = tmp_path / "step_2.pth"
    plain.write_bytes(pickle.dumps({"step": 2, "weights": list(range(500))}))
    assert [validate(p).layout for p in (legacy, plain)] == ["torch", "pickle"]  # type: ignore[union-attr]

    size = legacy.stat().st_size
    os.truncate(legacy, size - 8)  # the last storage lost its tail
    _cut_in_half(plain)

    assert validate(legacy) == Skipped(
        legacy, 1, f"step_1.pt: its pickles name {size} bytes of storages, the file has {size - 8}"
    )
    assert validate(plain) == Skipped(
        plain, 2, "step_2.pth is a pickle cut short (no STOP at its end): the save did not finish"
    )


def _zero(path: Path, start: int, length: int) -> None:
    """Blocks a crash lost: the file keeps its size, those bytes read back as zeros."""
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(length))


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (_cut_in_half, "state.pt is a truncated or corrupt zip archive"),
        (
            lambda p: _zero(p, 0, 4096),
            "state.pt is neither a torch zip archive nor a pickle (it starts with 00 00 00 00)",
        ),
        (lambda p: _zero(p, 64, p.stat().st_size // 2), "no local header where the directory says"),
    ],
    ids=["cut-in-half", "first-block-lost", "middle-blocks-lost"],
)
def test_a_half_written_marker_checkpoint_is_skipped_and_the_previous_one_chosen(
    torch: ModuleType, tmp_path: Path, damage: Callable[[Path], None], why: str
) -> None:
    for step in (10, 20):
        _torch_save(torch, tmp_path / f"step_{step}" / "state.pt", step, numel=50_000)
        (tmp_path / f"step_{step}" / "COMPLETE").touch()  # the marker says done: the bytes say otherwise
    damage(tmp_path / "step_20" / "state.pt")

    best, skipped = latest_valid(tmp_path)

    assert best is not None and (best.step, best.layout) == (10, "marker")
    assert why in _only(skipped).why


# --- torch.distributed.checkpoint --------------------------------------------------------------------


def test_distributed_checkpoint_with_a_cut_shard_is_skipped(torch: ModuleType, tmp_path: Path) -> None:
    _dcp_save(torch, tmp_path / "step_10", 10)
    _dcp_save(torch, tmp_path / "step_20", 20)
    shard = next((tmp_path / "step_20").glob("*.distcp"))
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size - 100)  # the last tensor lost its tail: still far from empty

    best, skipped = latest_valid(tmp_path)

    assert best is not None and (best.step, best.layout) == (10, "dcp")
    assert {p.name for p in best.files} == {".metadata", "__0_0.distcp"}
    assert "a shard was cut short" in _only(skipped).why and shard.name in _only(skipped).why


def test_distributed_checkpoint_with_a_missing_shard_or_no_metadata_is_skipped(
    torch: ModuleType, tmp_path: Path
) -> None:
    _dcp_save(torch, tmp_path / "step_10", 10)
    _dcp_save(torch, tmp_path / "step_20", 20)
    _dcp_save(torch, tmp_path / "step_30", 30)
    next((tmp_path / "step_20").glob("*.distcp")).unlink()
    (tmp_path / "step_30" / ".metadata").unlink()  # the coordinator died before writing it

    valid, skipped = scan(tmp_path)

    assert [c.step for c in valid] == [10]
    why = {s.step: s.why for s in skipped}
    assert why[20] == "__0_0.distcp is missing (named in .metadata)"
    assert why[30].startswith("no completion marker")


def test_distributed_checkpoint_metadata_reader_sees_what_torch_sees(torch: ModuleType, tmp_path: Path) -> None:
    """The inert reader against torch's own, on a save spread over several shard files."""
    import torch.distributed.checkpoint as dcp

    from gpuwatch.recovery.checkpoints import _dcp_extents

    state = {"a": torch.randn(100, 100), "b": torch.randn(50), "c": torch.randn(10, 10), "n": {"x": 3}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(state, storage_writer=dcp.FileSystemWriter(str(tmp_path / "step_1"), thread_count=3))
    ranges = dcp.FileSystemReader(str(tmp_path / "step_1")).read_metadata().storage_data.values()
    expected: dict[str, int] = {}
    for info in ranges:
        expected[info.relative_path] = max(expected.get(info.relative_path, 0), info.offset + info.length)

    assert len(expected) == 3
    assert _dcp_extents((tmp_path / "step_1" / ".metadata").read_bytes()) == expected
    assert {p.name: p.stat().st_size for p in (tmp_path / "step_1").glob("*.distcp")} == expected
    result = validate(tmp_path / "step_1")
    assert isinstance(result, Checkpoint) and len(result.files) == 4


def test_distributed_checkpoint_metadata_is_read_without_running_its_pickle(tmp_path: Path) -> None:
    """`.metadata` is written by the job: reading it must not execute anything it contains."""
    sentinel = tmp_path / "pwned"

    class Payload:
        def __reduce__(self) -> tuple[Any, ...]:
            return (exec, (f"open({str(sentinel)!r}, 'w').close()",))

    ckpt = tmp_path / "step_5"
    ckpt.mkdir()
    (ckpt / ".metadata").write_bytes(pickle.dumps(Payload()))
    (ckpt / "__0_0.distcp").write_bytes(b"x" * 64)

    result = validate(ckpt)

    assert not sentinel.exists()
    # a shape it does not know: checked as without metadata, every shard non-empty
    assert isinstance(result, Checkpoint) and result.layout == "dcp"
    (ckpt / "__0_0.distcp").write_bytes(b"")
    assert validate(ckpt) == Skipped(ckpt, 5, "__0_0.distcp is 0 bytes")


# --- shard directories -------------------------------------------------------------------------------


def test_manifest_directory_is_valid_only_with_every_listed_file_at_its_size(tmp_path: Path) -> None:
    for step in (100, 200, 300, 400, 500):
        d = _shards(tmp_path / f"checkpoint-{step}", {"optimizer.pt": 3000, "rng/rank_0.pth": 100})
        _safetensors(d / "model-00001-of-00002.safetensors", {"w": 256})
        write_manifest(d, step, fsync=False)
    (tmp_path / "checkpoint-500" / "optimizer.pt").unlink()  # a shard deleted
    (tmp_path / "checkpoint-400" / "rng" / "rank_0.pth").write_bytes(b"")  # a shard zeroed
    with open(tmp_path / "checkpoint-300" / "optimizer.pt", "ab") as f:
        f.write(b"more")  # rewritten after the manifest
    (tmp_path / "checkpoint-200" / "unlisted.log").write_text("files the manifest does not list are ignored")

    best, skipped = latest_valid(tmp_path)

    assert best is not None and (best.step, best.layout) == (200, "manifest")
    assert {p.relative_to(best.path).as_posix() for p in best.files} == {
        "model-00001-of-00002.safetensors",
        "optimizer.pt",
        "rng/rank_0.pth",
        MANIFEST,
    }
    assert [(s.step, s.why) for s in skipped] == [
        (500, f"optimizer.pt is missing (listed in {MANIFEST})"),
        (400, "rng/rank_0.pth is 0 bytes, the manifest lists 100"),
        (300, "optimizer.pt is 3004 bytes, the manifest lists 3000"),
    ]


def test_write_manifest_lists_files_and_sizes_atomically(tmp_path: Path) -> None:
    d = _shards(tmp_path / "ckpt", {"a.bin": 10, "sub/b.bin": 20})
    path = write_manifest(d, 7)
    assert path == d / MANIFEST
    data = json.loads(path.read_text())
    assert (data["step"], data["files"]) == (7, {"a.bin": 10, "sub/b.bin": 20})
    assert sorted(p.name for p in d.iterdir()) == ["a.bin", MANIFEST, "sub"]  # no temporary left behind
    _shards(d, {"c.bin": 5})
    assert json.loads(write_manifest(d, 8).read_text())["files"] == {"a.bin": 10, "c.bin": 5, "sub/b.bin": 20}
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no files"):
        write_manifest(tmp_path / "empty", 1)


def test_manifest_that_disagrees_with_the_name_or_points_outside_is_refused(tmp_path: Path) -> None:
    d = _shards(tmp_path / "checkpoint-100", {"a.bin": 10})
    write_manifest(d, 99)
    assert validate(d) == Skipped(d, 100, f"{MANIFEST} says step 99, the name says 100")

    (tmp_path / "secret").write_bytes(b"x" * 10)
    (d / MANIFEST).write_text(json.dumps({"step": 100, "files": {"../secret": 10}}))
    assert validate(d) == Skipped(d, 100, f"{MANIFEST} lists '../secret', outside the checkpoint")

    (d / MANIFEST).write_text('{"step": 100, "files": {"a.bin": 10')  # a manifest written in place and cut
    result = validate(d)
    assert isinstance(result, Skipped) and result.why.startswith(f"unreadable {MANIFEST}")


def test_a_reported_path_without_a_number_takes_the_manifest_step(tmp_path: Path) -> None:
    d = _shards(tmp_path / "latest-save", {"a.bin": 10})
    write_manifest(d, 1234)
    result = validate(d)
    assert isinstance(result, Checkpoint) and result.step == 1234
    assert validate(d, 1234) == result


def test_marker_directory_needs_the_marker_and_every_file_non_empty(torch: ModuleType, tmp_path: Path) -> None:
    for step in (1, 2, 3, 4):
        d = tmp_path / f"checkpoint-{step}"
        _shards(d, {"optimizer.pt": 100, "scheduler.pt": 60})
        _torch_save(torch, d / "pytorch_model.bin", step)
        (d / ".complete").touch()  # markers themselves may be empty
    (tmp_path / "checkpoint-4" / ".complete").unlink()  # crashed before the marker
    (tmp_path / "checkpoint-3" / "scheduler.pt").write_bytes(b"")
    _cut_in_half(tmp_path / "checkpoint-2" / "pytorch_model.bin")  # marker written, a file truncated anyway

    best, skipped = latest_valid(tmp_path)

    assert best is not None and (best.step, best.layout) == (1, "marker")
    why = {s.step: s.why for s in skipped}
    assert why[4] == (f"no completion marker ({MANIFEST}, .metadata, COMPLETE, .complete): the save did not finish")
    assert why[3] == "scheduler.pt is 0 bytes"
    assert "pytorch_model.bin is a truncated or corrupt zip archive" in why[2]
    custom = latest_valid(tmp_path, markers=["DONE"])[0]
    assert custom is None  # with another marker name none of them is complete
    only_marker = tmp_path / "checkpoint-5"
    only_marker.mkdir()
    (only_marker / "COMPLETE").touch()
    assert validate(only_marker) == Skipped(only_marker, 5, "nothing but the completion marker in checkpoint-5")


def test_deepspeed_latest_vouches_for_its_tag_and_earlier_ones(tmp_path: Path) -> None:
    for step in (100, 200, 300):
        _shards(tmp_path / f"global_step{step}", {"mp_rank_00_model_states.pt": 50, "zero_pp_rank_0_optim.pt": 80})
    (tmp_path / "latest").write_text("global_step200")  # 300 was being saved when the job died

    best, skipped = latest_valid(tmp_path)

    assert best is not None and (best.step, best.layout) == (200, "deepspeed")
    assert _only(skipped).why == (
        f"no completion marker ({MANIFEST}, .metadata, COMPLETE, .complete) "
        "and it is newer than step 200 named by latest: the save did not finish"
    )
    assert isinstance(validate(tmp_path / "global_step100"), Checkpoint)


def test_megatron_tracker_file_vouches_for_its_iteration(tmp_path: Path) -> None:
    for step in (1000, 2000):
        _shards(
            tmp_path / f"iter_{step:07d}", {"mp_rank_00/model_optim_rng.pt": 64, "mp_rank_01/model_optim_rng.pt": 64}
        )
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("2000\n")
    (tmp_path / "iter_0002000" / "mp_rank_01" / "model_optim_rng.pt").write_bytes(b"")

    best, skipped = latest_valid(tmp_path)

    assert best is not None and (best.step, best.layout) == (1000, "megatron")
    assert _only(skipped).why == "mp_rank_01/model_optim_rng.pt is 0 bytes"


# --- settling ----------------------------------------------------------------------------------------


class _Writer:
    """The injected wait: records how long it was asked to wait and, if told to, keeps writing."""

    def __init__(self, grow: Path | None = None) -> None:
        self.grow = grow
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.grow is not None:
            with open(self.grow, "ab") as f:
                f.write(b"\0" * 1024)


def test_a_checkpoint_still_growing_is_skipped_and_the_previous_wins(torch: ModuleType, tmp_path: Path) -> None:
    _torch_save(torch, tmp_path / "step_1.pt", 1)
    _safetensors(tmp_path / "step_2.safetensors", {"w": 64})
    growing = _shards(tmp_path / "step_3", {"shard0.bin": 100, "shard1.bin": 100, "COMPLETE": 1})
    newest = max(p.stat().st_mtime for p in growing.iterdir())
    clock = lambda: newest + 2.0  # noqa: E731 - a fixed clock: the newest file is 2 s old
    writer = _Writer(grow=growing / "shard1.bin")
    old = newest - 3600
    for p in [tmp_path / "step_1.pt", tmp_path / "step_2.safetensors"]:
        os.utime(p, (old, old))

    best, skipped = latest_valid(tmp_path, settle_s=10.0, clock=clock, wait=writer)

    assert best is not None and best.step == 2
    assert _only(skipped).why == "still being written: shard1.bin went from 100 to 1124 bytes in 8 s"
    assert writer.waits == [pytest.approx(8.0)]  # only the young one waited, and only the rest of settle_s


def test_a_recent_checkpoint_that_does_not_change_is_valid_after_the_wait(tmp_path: Path) -> None:
    _safetensors(tmp_path / "step_2.safetensors", {"w": 64})
    mtime = (tmp_path / "step_2.safetensors").stat().st_mtime
    writer = _Writer()
    assert isinstance(
        validate(tmp_path / "step_2.safetensors", settle_s=5.0, clock=lambda: mtime + 1, wait=writer), Checkpoint
    )
    assert writer.waits == [pytest.approx(4.0)]
    future = _Writer()  # a file stamped ahead of this clock (skew) waits settle_s, no longer
    assert isinstance(
        validate(tmp_path / "step_2.safetensors", settle_s=5.0, clock=lambda: mtime - 60, wait=future), Checkpoint
    )
    assert future.waits == [5.0]
    idle = _Writer()
    assert isinstance(
        validate(tmp_path / "step_2.safetensors", settle_s=5.0, clock=lambda: mtime + 6, wait=idle), Checkpoint
    )
    assert idle.waits == []


# --- directories -------------------------------------------------------------------------------------


def test_empty_and_missing_directories_have_no_checkpoint(tmp_path: Path) -> None:
    assert latest_valid(tmp_path) == (None, [])
    assert scan(tmp_path / "not-yet-created") == ([], [])
    assert latest_valid(tmp_path / "not-yet-created") == (None, [])
    (tmp_path / "step_1").mkdir()
    assert latest_valid(tmp_path) == (None, [Skipped(tmp_path / "step_1", 1, "empty directory")])
    assert validate(tmp_path / "step_9.pt") == Skipped(tmp_path / "step_9.pt", 9, "does not exist")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        scan(tmp_path / "file")
