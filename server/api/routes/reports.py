"""Post-mortems of incidents and period reports, as Markdown or self-contained HTML."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Header, HTTPException, Query, Response
from starlette.concurrency import run_in_threadpool

from gpuwatch.protocol import Api
from server.api.deps import ServicesDep
from server.api.negotiate import negotiate
from server.reports.period import parse_since, period_report, render_period_html, render_period_markdown
from server.reports.postmortem import build
from server.reports.render import gpu_plot, render_html, render_markdown

router = APIRouter(prefix=Api.PREFIX, tags=["reports"])

MEDIA = {"md": "text/markdown; charset=utf-8", "html": "text/html; charset=utf-8"}


@router.get("/incidents/{incident_id}/report", response_class=Response)
async def incident_report(
    incident_id: int,
    svc: ServicesDep,
    format: Annotated[Literal["md", "html"] | None, Query(description="md or html; wins over Accept")] = None,
    gpus: Annotated[Literal["job", "all"], Query(description="job: the job's GPUs only; all: the node's")] = "job",
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """The incident's post-mortem, as Markdown (the default) or HTML: `?format=` if given, else what the
    `Accept` header prefers (a browser's `text/html` gets the page). In Markdown the GPU plots are links
    to `…/plots/{gpu}.png`; the HTML page embeds them and loads nothing from anywhere (no scripts). The
    plots show the job's GPUs; `?gpus=all` shows every GPU of the node."""
    chosen = format or negotiate(accept)

    def work() -> str:
        with svc.sessions() as session:
            pm = build(session, incident_id, svc.settings, all_gpus=gpus == "all")
        if pm is None:
            raise HTTPException(404, f"no incident {incident_id}")
        if chosen == "html":
            return render_html(pm)
        links = {s.gpu: Api.INCIDENT_PLOT.format(incident_id=incident_id, gpu=s.gpu) for s in pm.plots}
        return render_markdown(pm, links)

    headers = {"Vary": "Accept"} if format is None else None
    return Response(await run_in_threadpool(work), media_type=MEDIA[chosen], headers=headers)


@router.get("/incidents/{incident_id}/plots/{gpu}.png", response_class=Response)
async def incident_plot(incident_id: int, gpu: int, svc: ServicesDep) -> Response:
    """One GPU of the incident's node around the failure, over the report's window (any GPU of the
    node, the job's or not)."""

    def work() -> bytes:
        with svc.sessions() as session:
            pm = build(session, incident_id, svc.settings, all_gpus=True)
        if pm is None:
            raise HTTPException(404, f"no incident {incident_id}")
        png = gpu_plot(pm, gpu)  # that GPU's alone: drawing the node's eight took seconds
        if png is None:
            raise HTTPException(404, f"incident {incident_id} has no samples of GPU {gpu}")
        return png

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
