"""Line normalisation: strip what varies between runs but says nothing about the failure (ANSI colour,
timestamps, launcher prefixes), and keep the rank a launcher prefix names."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# A tqdm bar that a message was glued to (the bar ends in "\r", the collector kept one line):
# "Epoch 3:  41%|████      | 2011/4900 [31:12<44:50,  1.07it/s, loss=0.611]Traceback (most ...".
# A traceback's header that a bar drew its residue after ("Traceback (most recent call last):    | 0.00/7.75M
# [00:00<?, ?iB/s]", case 613) is not part of a bar: the bar prefix never runs over it. Nor is the shell's
# job-control report of a process it lost, with a bar's residue after it ('webui.sh: line 255: 26147 Killed
# "${python_cmd}" ...████| 1/1 [00:04<00:00,  4.76s/it]', case 945), nor zsh's, which writes its report over
# an unfinished bar whose bracket never closes ("| 0/10 [00:00<?, ?it/szsh: bus error  python:   0%|", case 1182).
_TQDM_BAR = re.compile(
    r"^(?:(?!Traceback \(most recent call|(?:line|行|ligne|Zeile|línea) \d+: +\d+ \S|zsh: )[^\n])*?"
    r"\d+(?:\.\d+)?[kMGT]?(?:B|it)?/\d+(?:\.\d+)?[kMGT]?(?:B|it)? \[(?:\d+:)?\d+:\d+<(?P<stats>(?:(?!zsh: )[^\]])*)\]"
)
# What a bar says after its remaining time and rate is the run's own postfix ("loss=nan, lr=1e-4"): a bar
# with nothing glued after it reads as its postfix, so that a rule can see the metrics it shows (YOLO-NAS's
# "PPYoloELoss/loss=nan", case 831); a message glued after a bar still reads alone.
_BAR_POSTFIX = re.compile(r"^[^,]*,[^,]*,\s*(?P<postfix>.+)$")
# A second bar on one line after a first was taken off: what stands before it is a message glued between two bars
# ("... 0/10 [00:00<?, ?it/s]F0717 16:08:46.411695 76098 array.h:414] Check failed: n < sizes_size   | 0/118844
# [00:00<?, ?it/s]", XLA's check under two nested bars, case 4003), not that bar's description: only the bar goes.
_BAR_TAIL = re.compile(
    r"\s*(?:\d+%\|[^|]*)?\|\s*\d+(?:\.\d+)?[kMGT]?(?:B|it)?/\d+(?:\.\d+)?[kMGT]?(?:B|it)? \[[^\]]*\]\s*$"
)
# syslog's "May  1 12:34:56 host kernel: ..." and journalctl's short-iso/precise forms: the host field.
_SYSLOG_HOST = re.compile(
    r"^(?:[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r" (?P<host>[A-Za-z][\w.-]*) (?:kernel|nvidia-\w+|nv-fabricmanager|slurmd|kubelet|dcgm\w*|systemd)(?:\[\d+\])?:"
)
# Time zones that consoles and log exports write after a timestamp ("2022-10-13 12:51:44.934 CEST").
_ZONE = r"(?:Z|UTC|GMT|[ECW]ES?T|[ECMP][SD]T|BST|IST|MSK|[AH]K[SD]?T|JST|KST|SGT|AE[SD]T|AC[SD]T|AWST|NZ[SD]T)"
# One prefix at a time from the left, until none matches.
_PREFIXES = (
    # ISO dates, and Go's log package's 2024/03/04; an offset or a zone may follow
    re.compile(
        r"^\[?\d{4}([-/])\d{2}\1\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
        rf"(?:\s?{_ZONE}\b)?(?:\s?[+-]\d{{2}}:?\d{{2}})?\]?[ :,-]*"
    ),
    # US dates: Hugging Face's example scripts' "10/13/2022 12:51:44 - ", rich's "[10/13/22 12:51:44] "
    re.compile(r"^\[?\d{2}/\d{2}/\d{2,4},? \d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?[ :,-]*"),
    re.compile(r"^\[\s*\d+\.\d+\]\s*"),  # kernel: [12345.678901]
    # journalctl -o short-iso after its timestamp: "thot python3[2761]: "
    re.compile(r"^[A-Za-z][\w.-]* [\w./@-]+\[\d+\]: "),
    # loguru after its timestamp: "| ERROR    | __main__:main:12 - "
    re.compile(r"^\|\s*(?:TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL)\s*\|\s*[\w.<>-]+:[\w.<>-]+:\d+\s+-\s+"),
    # logging.basicConfig's "LEVEL:logger:" ("ERROR:root:", "WARNING:tensorflow:")
    re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:"),
    # the logging cookbook's "%(asctime)s - %(name)s - %(levelname)s - %(message)s" after its timestamp: "SimpleTuner
    # - INFO - " before each line of a traceback the trainer logged (case 3019)
    re.compile(r"^[\w.<>-]+ - (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - "),
    re.compile(r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}\]\s*"),  # dmesg -T
    # syslog: "May  1 12:34:56 host kernel: ", "Jan 31 18:00:47 thot python3.10[2761]: " (the program's tag); a
    # paste that dropped the host ("Mar 27 17:40:36 kernel: NVRM: Xid ...", case 3053) keeps the kernel's own tag
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} (?:(?!kernel:)\S+ )?(?:[\w./@-]+(?:\[\d+\])?: )?"),
    re.compile(r"^\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?\s+"),
    # a bracketed level that says nothing of an error: "[INFO] " (fluxgym's log of its trainer's output, a whole
    # traceback behind it, case 3243); "[ERROR] " stays, enroot's rules read it
    re.compile(r"^\[(?:INFO|DEBUG|TRACE|WARN|WARNING)\]\s+"),
    # a collector's stream name: "[stderr   ] " (facechain's logs, case 3316)
    re.compile(r"^\[(?:stdout|stderr)\s*\]\s*"),
    # kubectl logs --prefix: "[pod/trainer-0/pytorch] "; docker compose: "trainer-1  | "
    re.compile(r"^\[pod/[\w.-]+/[\w.-]+\] "),
    re.compile(r"^[a-z][\w.-]*\s+\| "),
    re.compile(r"^(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\s*[:|-]?\s+", re.I),
    # vLLM's logger after its level: "04-21 06:02:08 [engine.py:161] " (older: "11-05 12:03:00 client.py:250] ")
    re.compile(r"^\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\s+\[?[\w.-]+\.py:\d+\]\s*"),
    _TQDM_BAR,
    # Ray and vLLM name the process that wrote a line: "(RayTrainWorker pid=41233, ip=10.4.3.95) ",
    # "(EngineCore pid=169) " (vLLM's "(VllmWorker rank=3 pid=226)" carries a rank: below). SkyPilot, on
    # Ray, names its task with a comma and, on a multi-node task, the node's rank (not a process's global
    # rank, so it is not kept): "(train, pid=4439) ", "(worker1, rank=1, pid=22249, ip=10.31.0.9) " (round 21)
    re.compile(r"^\((?:[A-Za-z_][\w.-]*(?:, rank=\d+)?,?\s)?pid=\d+(?:, ip=[\d.]+)?\)\s*"),
)
# Launcher prefixes that carry the rank: torch's [rank3]:, torchrun's [default3]:, mpirun's [1,3]<stderr>:,
# srun -l's "3: " (padded to the widest label when there are ten tasks or more: " 93: ", case 3118).
_RANK_PREFIXES = (
    re.compile(r"^\[rank(\d+)\]:\s?"),
    re.compile(r"^\[default(\d+)\]:\s?"),
    re.compile(r"^\[\d+,(\d+)\]<std(?:out|err)>:\s?"),
    re.compile(r"^\[\d+,mpirank:(\d+),[\w.-]+\]<std(?:out|err)>:\s?"),  # SageMaker's mpirun: [1,mpirank:0,algo-1]
    # horovodrun's own (gloo) launcher, a ctime stamp before the rank: "Fri Sep 11 07:07:20 2020[0]<stderr>:" (round 84)
    re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\[(\d+)\]<std(?:out|err)>:\s?"),
    # NeMo-Run's local executor, the task's dotted name and rank: "nemo.collections.llm.api.finetune/0 " (round 87)
    re.compile(r"^(?:[a-z_][a-z0-9_]*\.){2,}[a-z_][a-z0-9_]*/(\d+) +"),
    re.compile(r"^ *(\d{1,5}): "),
    re.compile(r"^\[(\d{1,5})\] "),  # Intel MPI's -prepend-rank: "[3] "
    re.compile(r"^\(\w+ rank=(\d+) pid=\d+\)\s*"),
)


def normalize(line: str) -> tuple[str, int | None]:
    """The line's text without colour, timestamps and launcher prefixes, and the rank a prefix named.
    A line that carriage returns split (a tqdm bar redrawn, then a message: the collector kept one line)
    is what a terminal shows last: its last part that says something."""
    text = _ANSI.sub("", line).rstrip("\r\n")
    if "\r" in text:
        for part in reversed(text.split("\r")):
            said = normalize(part)
            if said[0]:
                return said
        return "", None
    rank: int | None = None
    changed = True
    bars = 0
    while changed:
        changed = False
        for pattern in _PREFIXES:
            m = pattern.match(text)
            if m and m.end() > 0:
                if pattern is _TQDM_BAR and bars and (head := _BAR_TAIL.sub("", text)) != text:
                    text, changed = head, True  # a message between two bars
                    continue
                rest = text[m.end() :]
                if pattern is _TQDM_BAR:
                    bars += 1
                    if not rest.strip():
                        post = _BAR_POSTFIX.match(m.group("stats"))
                        rest = post.group("postfix") if post else rest
                text, changed = rest, True
        for pattern in _RANK_PREFIXES:
            m = pattern.match(text)
            if m:
                rank = rank if rank is not None else int(m.group(1))
                text, changed = text[m.end() :], True
    return text.strip(), rank


def syslog_host(line: str) -> str | None:
    """The host field of a syslog or journalctl line (the node that wrote it), else None."""
    m = _SYSLOG_HOST.match(_ANSI.sub("", line))
    return m.group("host") if m else None
