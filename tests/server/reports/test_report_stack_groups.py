"""The post-mortem's Stack groups section (a hang's ranks grouped by stack): present only for a hang with
a capture, after the root cause, and its frames (which come from a job's code) rendered as text only."""

from __future__ import annotations

import html

from server.reports.document import StackGroupRow, StackGroups
from server.reports.render import render_html, render_markdown
from tests.server.reports.test_report_render import full_postmortem

HOSTILE = "evil (x.py:1) ``` <script>alert(1)</script> [link](http://x)"
GROUPS = StackGroups(
    state="done",
    why="rank 1 never entered the collective the others wait in (all_reduce: rank 0)",
    groups=(
        StackGroupRow((0,), ("node-a",), "all_reduce", ("train_step (train.py:55)",), False),
        StackGroupRow((1,), ("node-b",), None, ("busy_loop (train.py:42)", HOSTILE), True, "entered 6, completed 6"),
    ),
    failed=("rank 2 (node-c): py-spy dump failed: Permission denied",),
)


def test_the_stack_groups_follow_the_root_cause_and_mark_the_suspect() -> None:
    md = render_markdown(full_postmortem(stack_groups=GROUPS), {})
    assert md.index("\n## Root cause\n") < md.index("\n## Stack groups\n") < md.index("\n## GPUs around the failure\n")
    section = md.split("\n## Stack groups\n", 1)[1].split("\n## ", 1)[0]
    suspect = next(line for line in section.splitlines() if line.startswith("SUSPECT"))
    assert "1" in suspect and "node-b" in suspect and "no collective; flight recorder: entered 6" in suspect
    assert "busy_loop (train.py:42)" in suspect
    assert "rank 2 (node-c): py-spy dump failed: Permission denied" in section
    page = render_html(full_postmortem(stack_groups=GROUPS))
    assert '<section id="stack-groups"><h2>Stack groups</h2>' in page
    assert "<script>" not in page and html.escape("<script>alert(1)</script>") in page


def test_the_frames_cannot_leave_their_code_block_in_markdown() -> None:
    md = render_markdown(full_postmortem(stack_groups=GROUPS), {})
    section = md.split("\n## Stack groups\n", 1)[1].split("\n## ", 1)[0]
    fence = next(line for line in section.splitlines() if line.startswith("```"))
    assert fence.startswith("````"), "the fence is longer than the frame's backtick run"
    assert "[link](http://x)" in section.split(fence)[1], "inside the block, as text"


def test_an_incident_without_a_capture_has_no_such_section() -> None:
    assert "Stack groups" not in render_markdown(full_postmortem(), {})
    assert 'id="stack-groups"' not in render_html(full_postmortem())
