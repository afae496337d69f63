"""Which checkpoint a restart resumes from: the newest one that is complete.

A job that crashed while saving leaves a half-written newest checkpoint behind; resuming from it fails
again (`checkpoint_load_error`) or, worse, loads garbage. So a checkpoint counts only when it proves it
is complete, by what its writer does last:

- a single file (`step_000120.pt`, `model_120.safetensors`): torch.save writes a zip archive whose
  end-of-central-directory record comes last, so a truncated one has none, and every member the
  central directory lists must start with its local header and end before the directory (a block
  lost in a crash reads back as zeros); the archive's pickle (`data.pkl`, small) is read whole, its
  CRC checked and it must end with the pickle STOP. A file named like a torch checkpoint (`.pt`,
  `.pth`, `.ckpt`) must be such an archive or a pickle: torch's legacy format (a run of pickles, then
  every storage behind an 8-byte count) must hold exactly the bytes its pickles name, another pickle
  (also `.pkl`) must end with STOP. A safetensors file's JSON header says exactly how many data bytes
  follow. Other formats: non-zero size only (raw bytes can start like anything).
- a directory of shards: gpuwatch's manifest (`gpuwatch-manifest.json`, written last by
  `write_manifest`: every listed file must have exactly its listed size); torch.distributed.checkpoint's
  `.metadata` (written after every rank's shard; every byte range it points at must be there); a
  marker file (`COMPLETE`, `.complete`); or the tracker file that DeepSpeed (`latest`) and Megatron-LM
  (`latest_checkpointed_iteration.txt`) write in the parent after a save, which vouches for that step
  and every earlier one. Without a manifest, every file must be non-zero.

Every file's content is checked that way whatever the layout (marker, tracker, manifest): a marker
vouches only that the writer finished, not that every byte reached the disk. None of it reads a
tensor's bytes, so the cost is a few small reads per file (bench/checkpoint.py reports it).

A candidate modified less than `settle_s` ago is stat'ed again after the rest of that time and must
not have changed (clock and wait are injectable).

`.metadata` is a pickle written by the job; it is read with an unpickler that builds inert stand-ins
and imports nothing, so reading a user's checkpoint never runs the user's code in the server, and the
answer does not depend on whether torch is installed where the check runs.

Only reading here: no network, no database. A missing checkpoint directory is an empty result (a job
that has not saved yet), a path that is not a directory is NotADirectoryError.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import pickle
import re
import struct
import time
import zipfile
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

MANIFEST = "gpuwatch-manifest.json"
DCP_METADATA = ".metadata"
DEEPSPEED_TRACKER = "latest"
MEGATRON_TRACKER = "latest_checkpointed_iteration.txt"
DEFAULT_MARKERS: tuple[str, ...] = ("COMPLETE", ".complete")

_EXT = r"(?:\.(?:pt|pth|bin|ckpt|safetensors|tar|pth\.tar))?"
#: Names a checkpoint may have, matched against the whole entry name; group `step` is the step.
DEFAULT_PATTERNS: tuple[re.Pattern[str], ...] = (
    # step_000120.pt, checkpoint-120(.pt|/), ckpt_120.pth, model_120.safetensors, global_step120/, iter_0000120/
    re.compile(rf"(?:checkpoint|ckpt|step|global_step|iter|iteration|model)[-_]?(?P<step>\d+){_EXT}", re.IGNORECASE),
    re.compile(r"epoch=\d+-step=(?P<step>\d+)\.ckpt"),  # PyTorch Lightning
)

Clock = Callable[[], float]
Wait = Callable[[float], None]
Patterns = Sequence[str | re.Pattern[str]]

_ZIP_MAGIC = b"PK\x03\x04"
_ZIP_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, (fixed fields), name length, extra length
_PICKLE_PROTO = 0x80
_PICKLE_STOP = b"."
#: Names only torch.save uses: such a file must be a zip archive or a pickle. Not ".ckpt": Lightning
#: writes it with torch.save, but TensorFlow, Keras and users' own formats (gpuwatch's demo job writes
#: JSON) use it too, so a .ckpt is checked by what its content says it is.
_TORCH_SUFFIXES = frozenset({".pt", ".pth"})
_PICKLE_SUFFIXES = frozenset({".pkl", ".pickle", ".ckpt"})
_TORCH_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # the first pickle of torch's pre-1.6 format
#: Bytes per element of the storage types torch's legacy format names (persistent ids).
_STORAGE_BYTES = {
    "DoubleStorage": 8, "FloatStorage": 4, "HalfStorage": 2, "BFloat16Storage": 2, "LongStorage": 8,
    "IntStorage": 4, "ShortStorage": 2, "CharStorage": 1, "ByteStorage": 1, "BoolStorage": 1,
    "ComplexDoubleStorage": 16, "ComplexFloatStorage": 8, "UntypedStorage": 1,
}  # fmt: skip
_MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024  # the format's own limit
_MAX_DCP_METADATA = 1 << 30


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A complete checkpoint. `step` is None only from `validate` of an unnumbered path with no step given."""

    path: Path
    step: int | None
    layout: str  # torch | zip | safetensors | file | manifest | dcp | marker | deepspeed | megatron
    files: tuple[Path, ...]
    size_bytes: int
    mtime: float  # of its newest file


@dataclass(frozen=True, slots=True)
class Skipped:
    """A candidate that is not a usable checkpoint, and why, in words for the operator."""

    path: Path
    step: int | None
    why: str


class _Invalid(Exception):
    """Raised inside a check with the operator-facing reason."""


def step_of(name: str, patterns: Patterns = DEFAULT_PATTERNS) -> int | None:
    """The step number in a checkpoint's file or directory name, or None when no pattern matches."""
    for pattern in _compile(patterns):
        m = pattern.fullmatch(name)
        if m:
            return int(m.group("step"))
    return None


def validate(
    path: Path,
    step: int | None = None,
    *,
    patterns: Patterns = DEFAULT_PATTERNS,
    markers: Sequence[str] = DEFAULT_MARKERS,
    settle_s: float = 0.0,
    clock: Clock = time.time,
    wait: Wait = time.sleep,
) -> Checkpoint | Skipped:
    """Check one checkpoint (a file or a directory), e.g. one the training client reported.

    `step` defaults to the number in the name, else the manifest's. A Skipped result is also logged.
    """
    path = Path(path)
    if step is None:
        step = step_of(path.name, patterns)
    try:
        checkpoint = _check(path, step, patterns, markers)
        if settle_s > 0:
            _settle(checkpoint, settle_s, clock, wait)
        return checkpoint
    except _Invalid as e:
        skipped = Skipped(path, step, str(e))
    except OSError as e:  # vanished or unreadable while being checked
        skipped = Skipped(path, step, f"unreadable: {e.strerror or e} ({e.filename or path.name})")
    log.warning("skipping checkpoint %s: %s", path, skipped.why)
    return skipped


def scan(
    directory: Path,
    *,
    patterns: Patterns = DEFAULT_PATTERNS,
    markers: Sequence[str] = DEFAULT_MARKERS,
    settle_s: float = 0.0,
    clock: Clock = time.time,
    wait: Wait = time.sleep,
) -> tuple[list[Checkpoint], list[Skipped]]:
    """Every checkpoint in `directory`: the valid ones by step (oldest first) and the skipped ones."""
    valid: list[Checkpoint] = []
    skipped: list[Skipped] = []
    for step, path in reversed(_candidates(Path(directory), patterns)):
        result = validate(path, step, patterns=patterns, markers=markers, settle_s=settle_s, clock=clock, wait=wait)
        if isinstance(result, Checkpoint):
            valid.append(result)
        else:
            skipped.append(result)
    return valid, skipped


def latest_valid(
    directory: Path,
    *,
    patterns: Patterns = DEFAULT_PATTERNS,
    markers: Sequence[str] = DEFAULT_MARKERS,
    settle_s: float = 0.0,
    clock: Clock = time.time,
    wait: Wait = time.sleep,
    exclude: Collection[str | Path] = (),
) -> tuple[Checkpoint | None, list[Skipped]]:
    """The newest valid checkpoint in `directory` and the newer ones skipped on the way to it.

    Validates newest first and stops at the first valid one, so hundreds of old checkpoints cost one
    directory listing. `exclude`: checkpoints never to choose (a recovery decision's `skip_checkpoint`:
    it passed these checks and still failed to load).
    """
    skipped: list[Skipped] = []
    excluded = {str(Path(p).resolve()) for p in exclude}
    for step, path in _candidates(Path(directory), patterns):
        if excluded and str(path.resolve()) in excluded:
            skipped.append(Skipped(path, step, "it failed to load before: the recovery decision skips it"))
            continue
        result = validate(path, step, patterns=patterns, markers=markers, settle_s=settle_s, clock=clock, wait=wait)
        if isinstance(result, Checkpoint):
            return result, skipped
        skipped.append(result)
    return None, skipped


def write_manifest(directory: Path, step: int, *, fsync: bool = True) -> Path:
    """Mark a directory checkpoint complete: list its files and sizes in `gpuwatch-manifest.json`.

    Call it after every shard is written. The files are fsync'ed first (a manifest must not vouch for
    data still in the page cache), then the manifest is written to a temporary name, fsync'ed and
    renamed, so a reader sees either no manifest or a whole one.
    """
    directory = Path(directory)
    files = {rel: p.stat().st_size for rel, p in _walk(directory) if rel != MANIFEST and not _is_manifest_tmp(rel)}
    if not files:
        raise ValueError(f"{directory}: no files to list in a manifest")
    if fsync:
        for rel in files:
            _fsync_path(directory / rel)
    body = json.dumps({"version": 1, "step": int(step), "files": files}, indent=1, sort_keys=True).encode()
    target = directory / MANIFEST
    tmp = directory / f".{MANIFEST}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    if fsync:
        _fsync_dir(directory)
    return target


# --- candidates -------------------------------------------------------------------------------------


def _compile(patterns: Patterns) -> list[re.Pattern[str]]:
    compiled = [p if isinstance(p, re.Pattern) else re.compile(p) for p in patterns]
    for p in compiled:
        if "step" not in p.groupindex:
            raise ValueError(f"checkpoint pattern {p.pattern!r} has no (?P<step>...) group")
    return compiled


def _candidates(directory: Path, patterns: Patterns) -> list[tuple[int, Path]]:
    """Numbered entries of `directory`, newest (highest step) first; a missing directory has none."""
    if not directory.exists():
        return []
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory}: not a directory")
    compiled = _compile(patterns)
    found = []
    with os.scandir(directory) as entries:
        for entry in entries:
            step = step_of(entry.name, compiled)
            if step is not None:
                found.append((step, entry.name))
    found.sort(reverse=True)
    return [(step, directory / name) for step, name in found]


# --- checks -----------------------------------------------------------------------------------------


def _check(path: Path, step: int | None, patterns: Patterns, markers: Sequence[str]) -> Checkpoint:
    if not path.exists():
        raise _Invalid("does not exist")
    if path.is_dir():
        return _check_dir(path, step, patterns, markers)
    size = path.stat().st_size
    if size == 0:
        raise _Invalid(f"{path.name} is 0 bytes")
    layout = _check_content(path, size)
    return _checkpoint(path, step, layout, [path])


def _check_dir(path: Path, step: int | None, patterns: Patterns, markers: Sequence[str]) -> Checkpoint:
    files = dict(_walk(path))
    if not files:
        raise _Invalid("empty directory")
    vouched: dict[str, int | None]  # file → exact size it must have (None: any non-zero size)
    if MANIFEST in files:
        layout = "manifest"
        step, vouched = _read_manifest(path, step)
        checked = [*vouched, MANIFEST]
    else:
        layout = _completion(path, step, files, patterns, markers)
        if layout == "dcp":
            # Shards .metadata does not name (a rank with nothing to write) may be empty.
            named = _dcp_storage(path, files)
            vouched = {rel: None for rel in files if rel not in named and not rel.endswith(".distcp")}
        else:
            vouched = {rel: None for rel in files if rel not in markers}
        if not vouched and layout != "dcp":
            raise _Invalid(f"nothing but the completion marker in {path.name}")
        checked = list(files)
    for rel, size in vouched.items():
        actual = _size(path, rel)
        if size is not None and actual != size:
            raise _Invalid(f"{rel} is {actual} bytes, the manifest lists {size}")
        if size is None and actual == 0:
            raise _Invalid(f"{rel} is 0 bytes")
        if actual:
            _check_content(path / rel, actual)
    if layout == "manifest" and DCP_METADATA in vouched:
        _dcp_storage(path, files)
    return _checkpoint(path, step, layout, [path / rel for rel in sorted(checked)])


def _completion(
    path: Path, step: int | None, files: dict[str, Path], patterns: Patterns, markers: Sequence[str]
) -> str:
    """What says this directory is complete; _Invalid when nothing does."""
    if DCP_METADATA in files:
        return "dcp"
    if any(m in files for m in markers):
        return "marker"
    tracker = _tracker(path.parent, patterns)
    if tracker is not None:
        layout, tracked = tracker
        if step is not None and step <= tracked:
            return layout
    names = ", ".join([MANIFEST, DCP_METADATA, *markers])
    why = f"no completion marker ({names})"
    if tracker is not None:
        tracker_file = DEEPSPEED_TRACKER if tracker[0] == "deepspeed" else MEGATRON_TRACKER
        why += f" and it is newer than step {tracker[1]} named by {tracker_file}"
    raise _Invalid(why + ": the save did not finish")


def _tracker(parent: Path, patterns: Patterns) -> tuple[str, int] | None:
    """The newest step that DeepSpeed's `latest` or Megatron's tracker file vouches for."""
    for layout, name in (("deepspeed", DEEPSPEED_TRACKER), ("megatron", MEGATRON_TRACKER)):
        try:
            text = (parent / name).read_text(errors="replace").strip()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            continue
        tracked = int(text) if text.isdigit() else step_of(text, patterns)
        if tracked is not None:
            return layout, tracked
    return None


def _read_manifest(path: Path, step: int | None) -> tuple[int | None, dict[str, int | None]]:
    try:
        data = json.loads((path / MANIFEST).read_bytes())
        listed = data["files"]
        manifest_step = data.get("step")
        if (
            not isinstance(listed, dict)
            or not listed
            or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for k, v in listed.items()
            )
        ):
            raise ValueError("'files' must map paths to sizes in bytes")
        if manifest_step is not None and (not isinstance(manifest_step, int) or isinstance(manifest_step, bool)):
            raise ValueError("'step' must be an integer")
    except (ValueError, KeyError, TypeError) as e:
        raise _Invalid(f"unreadable {MANIFEST}: {e}") from None
    if step is not None and manifest_step is not None and step != manifest_step:
        raise _Invalid(f"{MANIFEST} says step {manifest_step}, the name says {step}")
    root = path.resolve()
    for rel in listed:
        target = (path / rel).resolve()
        if os.path.isabs(rel) or not target.is_relative_to(root) or target == root:
            raise _Invalid(f"{MANIFEST} lists {rel!r}, outside the checkpoint")
        if not target.is_file():
            raise _Invalid(f"{rel} is missing (listed in {MANIFEST})")
    return (step if step is not None else manifest_step), dict(listed)


def _check_content(path: Path, size: int) -> str:
    """Format checks that read headers, directories and pickles, never tensor data; returns the layout."""
    if path.suffix == ".safetensors":
        _check_safetensors(path, size)
        return "safetensors"
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == _ZIP_MAGIC:
        return _check_zip(path)
    named = path.suffix in _TORCH_SUFFIXES or path.suffix in _PICKLE_SUFFIXES  # raw data may start 0x80
    if named and magic[:1] == bytes([_PICKLE_PROTO]):
        return _check_pickle(path, size)
    if path.suffix in _TORCH_SUFFIXES:
        raise _Invalid(
            f"{path.name} is neither a torch zip archive nor a pickle (it starts with {magic.hex(' ')}): "
            "the save did not reach the disk"
        )
    return "file"


def _check_zip(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as archive:  # reads only the end record and the central directory
            members = archive.infolist()
            directory_at = archive.start_dir  # type: ignore[attr-defined]  # where the central directory begins
            with open(path, "rb") as f:
                for info in members:
                    f.seek(info.header_offset)
                    raw = f.read(_ZIP_LOCAL_HEADER.size)
                    if len(raw) < _ZIP_LOCAL_HEADER.size:
                        raise zipfile.BadZipFile(f"{info.filename}: local header past the end")
                    signature, name_len, extra_len = _ZIP_LOCAL_HEADER.unpack(raw)
                    end = info.header_offset + _ZIP_LOCAL_HEADER.size + name_len + extra_len + info.compress_size
                    if signature != _ZIP_MAGIC or end > directory_at:
                        raise zipfile.BadZipFile(f"{info.filename}: no local header where the directory says")
            pickles = [m for m in members if m.filename.endswith("data.pkl")]
            for info in pickles:
                data = archive.read(info)  # checks its CRC; the tensors' bytes are other members
                if not data.endswith(_PICKLE_STOP):
                    raise zipfile.BadZipFile(f"{info.filename} does not end with a pickle STOP")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as e:
        raise _Invalid(f"{path.name} is a truncated or corrupt zip archive ({e}): the save did not finish") from None
    return "torch" if pickles else "zip"


def _check_pickle(path: Path, size: int) -> str:
    """torch's legacy format must hold exactly the storages its pickles name; any other pickle must end
    with STOP (a pickle's last opcode)."""
    with open(path, "rb") as f:
        try:  # the magic number is a pickle of a few bytes: never load a whole user pickle here
            first = _InertUnpickler(io.BytesIO(f.read(64))).load()
        except Exception:  # not a small first pickle
            first = None
        if first != _TORCH_LEGACY_MAGIC:
            f.seek(size - 1)
            if f.read(1) != _PICKLE_STOP:
                raise _Invalid(f"{path.name} is a pickle cut short (no STOP at its end): the save did not finish")
            return "pickle"
        f.seek(0)
        _InertUnpickler(f).load()  # past the magic number
        try:
            expected = _legacy_torch_size(f)
        except Exception as e:  # anything the unpickler meets in a damaged file
            raise _Invalid(f"{path.name}: unreadable torch pickle ({type(e).__name__}: {e})") from None
    if expected is not None and expected != size:
        raise _Invalid(f"{path.name}: its pickles name {expected} bytes of storages, the file has {size}")
    return "torch"


def _legacy_torch_size(f: IO[bytes]) -> int | None:
    """The size torch's legacy format must have, read after its magic number; None for a storage type
    this reader does not know (then the pickles alone were checked)."""
    unpickler = _InertUnpickler(f)
    unpickler.load()  # protocol version
    unpickler.load()  # sys info
    ids: dict[str, int | None] = {}
    unpickler.persistent_ids = ids
    unpickler.load()  # the object, its storages as persistent ids
    keys = unpickler.load()
    if not isinstance(keys, list):
        raise ValueError("the storage keys are not a list")
    at = f.tell()
    for key in keys:
        nbytes = ids.get(str(key))
        if nbytes is None:
            return None
        at += 8 + nbytes
    return at


def _check_safetensors(path: Path, size: int) -> None:
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _Invalid(f"{path.name} is {size} bytes, too short for a safetensors header")
        (header_len,) = struct.unpack("<Q", head)
        if header_len > _MAX_SAFETENSORS_HEADER or 8 + header_len > size:
            raise _Invalid(f"{path.name}: safetensors header of {header_len} bytes does not fit in {size} bytes")
        raw = f.read(header_len)
    try:
        header = json.loads(raw)
        ends = [int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"]
        if any(int(t["data_offsets"][0]) > int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"):
            raise ValueError("a tensor ends before it starts")
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        raise _Invalid(f"{path.name}: unreadable safetensors header ({e})") from None
    expected = 8 + header_len + max(ends, default=0)
    if expected != size:
        raise _Invalid(f"{path.name}: safetensors header says {expected} bytes, the file has {size}")


def _dcp_storage(path: Path, files: dict[str, Path]) -> set[str]:
    """Check every byte range `.metadata` points at; returns the shard files it names."""
    meta = path / DCP_METADATA
    size = meta.stat().st_size
    if size == 0:
        raise _Invalid(f"{DCP_METADATA} is 0 bytes")
    if size > _MAX_DCP_METADATA:
        raise _Invalid(f"{DCP_METADATA} is {size} bytes, more than a checkpoint's metadata can be")
    try:
        ends = _dcp_extents(meta.read_bytes())
    except Exception as e:  # anything the unpickler meets in a damaged file
        raise _Invalid(f"unreadable {DCP_METADATA} ({type(e).__name__}: {e})") from None
    if ends is None:  # a metadata shape this reader does not know: every shard must be non-empty
        shards = {rel for rel in files if rel.endswith(".distcp")}
        if not shards:
            raise _Invalid(f"{DCP_METADATA} but no .distcp shard")
        for rel in sorted(shards):
            if _size(path, rel) == 0:
                raise _Invalid(f"{rel} is 0 bytes")
        return shards
    for rel, end in sorted(ends.items()):
        if rel not in files:
            raise _Invalid(f"{rel} is missing (named in {DCP_METADATA})")
        actual = _size(path, rel)
        if actual < end:
            raise _Invalid(f"{rel} is {actual} bytes, {DCP_METADATA} needs {end}: a shard was cut short")
    return set(ends)


def _checkpoint(path: Path, step: int | None, layout: str, files: list[Path]) -> Checkpoint:
    stats = [f.stat() for f in files]
    return Checkpoint(
        path=path,
        step=step,
        layout=layout,
        files=tuple(files),
        size_bytes=sum(s.st_size for s in stats),
        mtime=max(s.st_mtime for s in stats),
    )


def _settle(checkpoint: Checkpoint, settle_s: float, clock: Clock, wait: Wait) -> None:
    """A recently modified checkpoint must not change over the rest of `settle_s`."""
    age = clock() - checkpoint.mtime
    if age >= settle_s:
        return
    before = {f: (s.st_size, s.st_mtime_ns) for f in checkpoint.files for s in [f.stat()]}
    pause = min(settle_s, settle_s - age)  # a file stamped in the future waits settle_s, not longer
    wait(pause)
    for f, (size, mtime_ns) in before.items():
        try:
            now = f.stat()
        except FileNotFoundError:
            raise _Invalid(f"{f.name} disappeared while the checkpoint settled") from None
        if now.st_size != size:
            raise _Invalid(f"still being written: {f.name} went from {size} to {now.st_size} bytes in {pause:.3g} s")
        if now.st_mtime_ns != mtime_ns:
            raise _Invalid(f"still being written: {f.name} was modified again within {pause:.3g} s")


# --- helpers ----------------------------------------------------------------------------------------


def _walk(directory: Path) -> Iterable[tuple[str, Path]]:
    """Regular files under `directory` (recursively), as (relative POSIX path, path), sorted."""
    found = []
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in names:
            p = Path(root, name)
            if p.is_file():
                found.append((p.relative_to(directory).as_posix(), p))
    return sorted(found)


def _size(directory: Path, rel: str) -> int:
    return (directory / rel).stat().st_size


def _is_manifest_tmp(rel: str) -> bool:
    return rel.startswith(f".{MANIFEST}.") and rel.endswith(".tmp")


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # some file systems cannot fsync a directory; the rename is still atomic
        _fsync_path(directory)


# --- torch.distributed.checkpoint metadata, without running its pickle --------------------------------


class _Inert:
    """Stands in for any class or function the pickle names: keeps what it is given, runs nothing."""

    __slots__ = ("args", "items", "state")

    args: tuple[Any, ...]
    state: dict[str, Any]
    items: list[Any]

    def __new__(cls, *args: Any, **kwargs: Any) -> _Inert:  # pickle's NEWOBJ calls only __new__
        self = super().__new__(cls)
        self.args, self.state, self.items = args, dict(kwargs), []
        return self

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2:  # (__dict__, slots) of a class with __slots__
            for part in state:
                if isinstance(part, dict):
                    self.state.update(part)
        elif isinstance(state, dict):
            self.state.update(state)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.items.append((key, value))

    def append(self, value: Any) -> None:
        self.items.append(value)

    def extend(self, values: Iterable[Any]) -> None:
        self.items.extend(values)


class _InertUnpickler(pickle.Unpickler):
    _SAFE: dict[tuple[str, str], Any] = {  # noqa: RUF012 - a class-level lookup table
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("builtins", "list"): list,
        ("builtins", "dict"): dict,
        ("builtins", "tuple"): tuple,
        ("collections", "OrderedDict"): dict,
    }

    def find_class(self, module: str, name: str) -> Any:
        safe = self._SAFE.get((module, name))
        if safe is not None:
            return safe
        return type(name, (_Inert,), {"__slots__": ()})

    #: Set to collect torch's legacy storage ids (key → bytes, None when unknown); else refused.
    persistent_ids: dict[str, int | None] | None = None

    def persistent_load(self, pid: Any) -> Any:
        if self.persistent_ids is None:
            raise pickle.UnpicklingError("persistent ids are not part of checkpoint metadata")
        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage":
            raise pickle.UnpicklingError(f"not a torch storage id: {pid!r}"[:200])
        kind, key, numel = pid[1], pid[2], pid[4]
        per = _STORAGE_BYTES.get(getattr(kind, "__name__", ""))
        self.persistent_ids[str(key)] = per * numel if per is not None and isinstance(numel, int) else None
        return _Inert()


def _dcp_extents(raw: bytes) -> dict[str, int] | None:
    """For each shard file, the end of the last byte range the metadata points into; None when the
    pickle is not the shape torch.distributed.checkpoint writes (then only non-zero sizes are checked)."""
    metadata = _InertUnpickler(io.BytesIO(raw)).load()
    storage = metadata.state.get("storage_data") if isinstance(metadata, _Inert) else None
    if not isinstance(storage, dict) or not storage:
        return None
    ends: dict[str, int] = {}
    for info in storage.values():
        fields = info.state if isinstance(info, _Inert) else {}
        rel, offset, length = fields.get("relative_path"), fields.get("offset"), fields.get("length")
        if not isinstance(rel, str) or not isinstance(offset, int) or not isinstance(length, int):
            return None
        ends[rel] = max(ends.get(rel, 0), offset + length)
    return ends
