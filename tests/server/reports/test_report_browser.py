"""The HTML post-mortem in a real browser: headless Chromium draws it (plots included) and runs none of
the log text, and its Content-Security-Policy stops a script even if one slipped past the escaping."""

from __future__ import annotations

import html
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from server.reports.document import EvidenceLine
from server.reports.render import render_html
from tests.helpers import require_tool, wait_until
from tests.server.reports.test_report_render import OUR_TAGS, _data_pngs, _png_size, _tags, full_postmortem

pytestmark = pytest.mark.slow

TITLE = "Incident 42: job llama-70b-pretrain, xid_79_fell_off_bus"
PWN = "<script>document.title='pwned'</script>"
ONERROR = "<img src=x onerror=\"document.title='pwned-img'\">"
TAB_BLUE, TAB_ORANGE = (31, 119, 180), (255, 127, 14)  # matplotlib's colours of the utilization and power lines


def _chromium(tmp_path: Path, page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One headless Chromium run on ``page`` with a profile of its own and no network."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    cmd = [
        require_tool("chromium"),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        "--no-first-run",
        "--no-default-browser-check",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
        page.as_uri(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"chromium exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


def _dom_title(dom: str) -> str:
    found = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert found, dom[:2000]
    return html.unescape(found.group(1))


def _pixels_near(rgb: np.ndarray, colour: tuple[int, int, int], tolerance: int = 14) -> int:
    return int(np.count_nonzero(np.all(np.abs(rgb.astype(int) - np.array(colour)) <= tolerance, axis=-1)))


def test_chromium_draws_the_report_and_runs_none_of_the_log_text(tmp_path: Path) -> None:
    pm = full_postmortem()
    pm = replace(
        pm,
        evidence=(
            EvidenceLine("rank0.log", 17, f"Traceback {PWN}", 0, "gpu-node-17"),
            EvidenceLine("rank1.log", 18, f"bad image {ONERROR}", 1, "gpu-node-17"),
            *pm.evidence,
        ),
        evidence_total=len(pm.evidence) + 2,
        timeline=(*pm.timeline[:-1], replace(pm.timeline[-1], detail=PWN)),
    )
    page = tmp_path / "postmortem.html"
    page.write_text(render_html(pm), encoding="utf-8")

    shot = tmp_path / "shot.png"
    _chromium(tmp_path, page, f"--screenshot={shot}", "--window-size=1200,2400")
    wait_until(lambda: shot.is_file() and shot.stat().st_size > 0, timeout=10, what="the screenshot file")
    assert _png_size(shot.read_bytes()) == (1200, 2400)
    rgb = (imread(shot)[..., :3] * 255).round().astype(np.uint8)
    non_white = np.count_nonzero(np.any(rgb < 245, axis=-1)) / (rgb.shape[0] * rgb.shape[1])
    assert non_white > 0.05, f"only {non_white:.1%} of the screenshot is not white"
    packed = (rgb[..., 0].astype(np.uint32) << 16) | (rgb[..., 1].astype(np.uint32) << 8) | rgb[..., 2]
    assert len(np.unique(packed)) > 200  # text, tables and plots: many distinct colours, not a blank page
    # the plots were decoded and drawn: their line colours are on screen (a broken image has none)
    assert _pixels_near(rgb, TAB_BLUE) > 300 and _pixels_near(rgb, TAB_ORANGE) > 300

    dom = _chromium(tmp_path, page, "--dump-dom").stdout
    assert _dom_title(dom) == TITLE
    parsed = _tags(dom)
    assert {tag for tag, _ in parsed.tags} <= OUR_TAGS  # the log text created no element
    assert not [(t, a) for t, a in parsed.tags for name in a if name.startswith("on")]
    text = "".join(parsed.text)
    assert f"Traceback {PWN}" in text and f"bad image {ONERROR}" in text  # shown, as text
    images = [attrs for tag, attrs in parsed.tags if tag == "img"]
    assert len(images) == len(pm.plots) == 4
    assert all((a.get("src") or "").startswith("data:image/png;base64,") for a in images)
    assert [_png_size(png) for png in _data_pngs(dom)] == [(900, 500)] * 4
    # what the plots show is said, and the recommendations' Markdown is rendered, not shown raw
    assert "Plotted: the job's GPUs 0, 1, 2, 3;" in text and "Window: 2025-03-04 10:57:05 UTC to" in text
    assert "`" not in text and "**" not in text and "](" not in text
    assert "<code>dcgmi diag -r 3</code>" in dom and "<strong>8 min</strong>" in dom


def test_chromium_draws_a_one_gpu_jobs_report_in_one_screen(tmp_path: Path) -> None:
    """The report of a job on one GPU of an 8-GPU node: one plot, and the whole page about two screens tall
    (eight plots made it about 5,000 px)."""
    pm = full_postmortem(
        plots=full_postmortem().plots[3:],
        job_gpus=(3,),
        gpus=tuple(range(8)),
        plotted="the job's GPU 3; 7 other GPUs of the node left out (?gpus=all shows them)",
    )
    page = tmp_path / "postmortem.html"
    page.write_text(render_html(pm), encoding="utf-8")
    shot = tmp_path / "one-gpu.png"
    _chromium(tmp_path, page, f"--screenshot={shot}", "--window-size=1100,2800")
    wait_until(lambda: shot.is_file() and shot.stat().st_size > 0, timeout=10, what="the screenshot file")
    rgb = (imread(shot)[..., :3] * 255).round().astype(np.uint8)
    rows = np.flatnonzero(np.any(rgb < 245, axis=(1, 2)))
    assert 1500 < rows.max() < 2700, f"the page ends at {rows.max()} px"
    assert _pixels_near(rgb, TAB_BLUE) > 300 and _pixels_near(rgb, TAB_ORANGE) > 300
    dom = _chromium(tmp_path, page, "--dump-dom").stdout
    assert len(_data_pngs(dom)) == 1


def test_the_content_security_policy_stops_a_script_that_slipped_through(tmp_path: Path) -> None:
    report = render_html(full_postmortem(plots=()))
    slipped = report.replace("<body>", f"<body>{PWN}{ONERROR}", 1)
    guarded, unguarded = tmp_path / "guarded.html", tmp_path / "unguarded.html"
    guarded.write_text(slipped, encoding="utf-8")
    unguarded.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", slipped), encoding="utf-8")

    assert _dom_title(_chromium(tmp_path, guarded, "--dump-dom").stdout) == TITLE
    # the control: without the policy the same page does run the script, so the check above means something
    assert _dom_title(_chromium(tmp_path, unguarded, "--dump-dom").stdout).startswith("pwned")
