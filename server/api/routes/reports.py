"""Post-mortems of incidents and period reports, as Markdown or self-contained HTML."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Response
from starlette.concurrency import run_in_threadpool

from gpuwatch.protocol import Api
from server.api.deps import ServicesDep
from server.reports.period import parse_since, period_report, render_period_html, render_period_markdown
from server.reports.postmortem import build
from server.reports.render import gpu_plots, render_html, render_markdown

router = APIRouter(prefix=Api.PREFIX, tags=["reports"])

MEDIA = {"md": "text/markdown; charset=utf-8", "html": "text/html; charset=utf-8"}
Format = Annotated[Literal["md", "html"], Query(description="md or html")]


@router.get("/incidents/{incident_id}/report", response_class=Response)
async def incident_report(incident_id: int, svc: ServicesDep, format: Format = "md") -> Response:
    """The incident's post-mortem. In Markdown the GPU plots are links to `…/plots/{gpu}.png`; the HTML
    page embeds them and loads nothing from anywhere (no scripts)."""

    def work() -> str:
        with svc.sessions() as session:
            pm = build(session, incident_id, svc.settings)
        if pm is None:
            raise HTTPException(404, f"no incident {incident_id}")
        if format == "html":
            return render_html(pm)
        return render_markdown(pm, {g: Api.INCIDENT_PLOT.format(incident_id=incident_id, gpu=g) for g in pm.gpus})

    return Response(await run_in_threadpool(work), media_type=MEDIA[format])


@router.get("/incidents/{incident_id}/plots/{gpu}.png", response_class=Response)
async def incident_plot(incident_id: int, gpu: int, svc: ServicesDep) -> Response:
    """One GPU of the incident's node around the failure (the ring buffer when the incident opened)."""

    def work() -> bytes:
        with svc.sessions() as session:
            pm = build(session, incident_id, svc.settings)
        if pm is None:
            raise HTTPException(404, f"no incident {incident_id}")
        plots = gpu_plots(pm)
        if gpu not in plots:
            raise HTTPException(404, f"incident {incident_id} has no samples of GPU {gpu}")
        return plots[gpu]

    return Response(await run_in_threadpool(work), media_type="image/png")


@router.get("/reports/period", response_class=Response)
async def period(
    svc: ServicesDep,
    since: Annotated[str, Query(description="7d, 24h, 90m, or an ISO date")] = "7d",
    format: Literal["md", "html", "json"] = "md",
) -> Response:
    """Failures by reason and category, GPU-hours lost, MTBF, ETTR, top nodes, restart success."""
    now = datetime.now(UTC)
    try:
        start = parse_since(since, now)
    except ValueError as exc:
        raise HTTPException(422, f"since: {exc}") from None

    def work() -> Response:
        with svc.sessions() as session:
            report = period_report(session, start, now, svc.settings)
        if format == "json":
            return Response(json.dumps(report.to_json()), media_type="application/json")
        text = render_period_html(report) if format == "html" else render_period_markdown(report)
        return Response(text, media_type=MEDIA[format])

    return await run_in_threadpool(work)
