"""What the agent must remember across restarts: sequence numbers per stream, log file
positions and the last kernel record read.

Saved after the batches that used them are spooled. If the agent dies in between, it re-reads the
same lines and gives them the same sequence numbers, which the server recognises as already stored:
a crash neither loses nor doubles a line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from agent.collectors.kernel import KmsgPosition
from agent.collectors.logfile import TailPosition


@dataclass(slots=True)
class AgentState:
    path: Path
    seq: dict[str, int] = field(default_factory=dict)
    files: dict[str, TailPosition] = field(default_factory=dict)
    kmsg: KmsgPosition = field(default_factory=KmsgPosition)

    @classmethod
    def load(cls, path: Path) -> AgentState:
        if not path.exists():
            return cls(path)
        raw = json.loads(path.read_text())
        files = {k: TailPosition(**v) for k, v in raw.get("files", {}).items()}
        return cls(path, dict(raw.get("seq", {})), files, KmsgPosition(**raw.get("kmsg", {})))

    def next_seq(self, stream: str) -> int:
        n = self.seq.get(stream, 0)
        self.seq[stream] = n + 1
        return n

    def save(self) -> None:
        data = {
            "seq": self.seq,
            "files": {k: {"inode": p.inode, "offset": p.offset, "head": p.head} for k, p in self.files.items()},
            "kmsg": {"boot_id": self.kmsg.boot_id, "seq": self.kmsg.seq},
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.path)
