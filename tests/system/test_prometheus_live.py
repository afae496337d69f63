"""Every dashboard query and every alert against a real Prometheus scraping a real gpuwatch server.

The scenario, all real processes on loopback: a server; three simulated agents (prom-node-a with
4 GPUs and InfiniBand counters from a fixture tree, prom-node-b with 2, prom-node-c with 1); a job
`llama-train` with two ranks on node a, one a straggler, 35% of each step in collectives; a job
`stuck-job` on node b that stops stepping (a hang); a job `etl-prep` on node b whose process names no
GPU (no LOCAL_RANK), so no GPU sample is attributed to it; a job `bert-ft` on node c, whose agent then
stops (a silent node with a job on it); Xid 79, Xid 74 and thermal throttling on node a's GPUs,
Xid 48 (a double-bit ECC error) on node b; a run of `resnet-ft` that fails (exit 137), whose
incident is diagnosed and decided on; ingest batches refused.

Then each PromQL expression of every panel, annotation and variable of dashboards/*.json and of
the standard dcgm-exporter dashboard (variables substituted as Grafana would), and every alert,
must parse, and must return data unless it is listed below as legitimately empty in this scenario.
The metric names they use must be ones the server's /metrics declares.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

import httpx
import pytest

from agent.collectors.simulated import write_fault
from gpuwatch.config import Settings
from gpuwatch.protocol import ClientReport, CollectiveStat, JobProcess, StepReport
from tests.helpers import (
    Proc,
    free_port,
    metric_values,
    migrated_sqlite,
    new_token,
    require_tool,
    start_server,
    wait_until,
)
from tests.prometheus_stack import Prometheus, QueryError, prometheus_config
from tests.promql import (
    ALERTS_FILE,
    DASHBOARD_FILES,
    DCGM_DASHBOARD,
    ROOT,
    Query,
    alert_rules,
    label_of_variable,
    load,
    metric_names,
    queries,
    substitute,
    variables_in,
)

pytestmark = pytest.mark.slow

NODE_A, NODE_B, NODE_C = "prom-node-a", "prom-node-b", "prom-node-c"
GPUS = {NODE_A: 4, NODE_B: 2, NODE_C: 1}
NODE_TIMEOUT_S = 3  # the server's: node c is down 3 s after its agent stops

# Metrics whose queries may legitimately return nothing in this scenario, and why.
MAYBE_EMPTY = {
    # A DCGM profiling field (tensor-pipe activity) that NVML cannot read: gpuwatch does not export
    # it, so the dcgm-exporter dashboard's "Tensor Core Utilization" panel stays empty.
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "not exported by gpuwatch",
    # Filled by the recovery policy: the failed run is decided on (the scenario waits for it), but
    # nothing is restarted or lost; the Xid incidents' exclusions are not waited for.
    "gpuwatch_restarts_total": "no restart in the scenario",
    "gpuwatch_lost_gpu_hours_total": "no lost work accounted in the scenario",
    "gpuwatch_excluded_nodes": "a node is excluded only once its Xid incident is diagnosed",
    # Only for jobs whose training client reports checkpoint saves (gpuwatch.client.AsyncCheckpointer).
    "gpuwatch_job_checkpoint_age_seconds": "no job in the scenario reports checkpoints",
    "gpuwatch_job_gpu_hours_at_risk": "no job in the scenario reports checkpoints",
    # Only when an agent's spool overflows.
    "gpuwatch_agent_dropped_total": "no agent drops data in the scenario",
}
# Alerts that do not fire in this scenario, and why.
QUIET_ALERTS = {
    "GpuwatchServerDown": "the server is up",
    "GpuwatchJobRestartLoop": "nothing restarts in the scenario",
    "GpuwatchCheckpointTooOld": "no job in the scenario reports checkpoints",
    "GpuwatchCheckpointSaveFailed": "no job in the scenario reports checkpoints",
    # Its promtool unit test and tests/system/test_alerts.py (Alertmanager) cover it.
    "GpuwatchSilenceDisruption": "one node of three goes silent, and disruption_min_nodes is 4 here",
    # Its promtool unit test covers it; tests/server/incidents/test_open_series.py the overflow count.
    "GpuwatchIncidentsOverflow": "a handful of incidents, far below the 100 exported",
    # Its promtool unit test covers it; tests/server/ingest/test_writer.py the counter it reads.
    "GpuwatchIngestSaturated": "three agents keep the ingest writer nearly idle",
}
# Exported-maybe-absent names: a dashboard may use them although this server's /metrics may not
# declare them (yet).
DECLARED_ELSEWHERE = {"up": "Prometheus's own"}
# Values Grafana would give the variables ($__rate_interval is at least 4 scrape intervals). A
# query with a variable of several choices must return data for one of them, as a user picking
# the job with the hang would see it (the job dashboard: llama-train straggles, stuck-job hangs,
# resnet-ft's run failed: its incident).
VARIABLES = {
    "__rate_interval": ["10s"],
    "__interval": ["2s"],
    "__range": ["5m"],
    "node": [NODE_A, NODE_B],
    "gpu": ["(0|1|2|3)"],
    "job": ["llama-train", "stuck-job", "resnet-ft"],
    "instance": [f"({NODE_A}|{NODE_B})"],
}


def _variants(expr: str) -> list[str]:
    """``expr`` with its variables substituted, once per combination of their choices."""
    names = sorted(variables_in(expr))
    return [
        substitute(expr, dict(zip(names, values, strict=True))) for values in product(*(VARIABLES[n] for n in names))
    ]


@dataclass
class Scenario:
    base: str
    tmp: Path
    prometheus: Prometheus | None
    metrics: str = ""
    procs: list[Proc] = field(default_factory=list)


def _agent(base: str, tmp: Path, token: str, node: str, client_port: int, *extra: str) -> Proc:
    args = ["agent", "--server", base, "--token", token, "--node", node, "--simulate", str(GPUS[node])]
    args += ["--client-port", str(client_port), "--flush", "0.5", "--interval", "0.5", "--data-dir", str(tmp)]
    return Proc([*args, *extra], tmp / f"{node}.log")


def _report(
    client_port: int, job: str, rank: int, gpu: int | None, pid: int, steps: list[tuple[float, float]], **kw: float
) -> None:
    """What gpuwatch.client would post for one rank: its process, and steps of (duration, comm) s
    ending now, half of the communication exposed, all of it one all-reduce of 64 MB."""
    now = time.time()
    proc = JobProcess(job=job, pid=pid, rank=rank, local_rank=gpu, world_size=2, gpu=gpu, **kw)
    reports = [
        StepReport(
            job=job,
            rank=rank,
            step=i,
            ts=now - (len(steps) - i) * duration,
            duration_s=duration,
            comm_s=comm,
            exposed_s=comm / 2,
            collectives={"all_reduce": CollectiveStat(count=1, seconds=comm, bytes=64 << 20, bus_bytes=64 << 20)},
            tokens=16384,
            samples=32,
        )
        for i, (duration, comm) in enumerate(steps)
    ]
    body = ClientReport(process=proc, steps=reports).model_dump_json()
    resp = httpx.post(f"http://127.0.0.1:{client_port}/v1/report", content=body, timeout=5)
    assert resp.status_code == 204, resp.text


def _refused_batch(base: str) -> None:
    resp = httpx.post(f"{base}/api/v1/ingest", json={}, headers={"Authorization": "Bearer gwn_not_a_token"})
    assert resp.status_code == 401


def _metric_value(text: str, name: str, **labels: str) -> float | None:
    """The first sample of ``name`` with ``labels``, or None."""
    return next(iter(metric_values(text, name, **labels)), None)


def _metric_sum(text: str, name: str, **labels: str) -> float:
    """The sum of every sample of ``name`` with ``labels`` (counters exported at 0 included)."""
    return sum(metric_values(text, name, **labels))


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    tmp = tmp_path_factory.mktemp("live")
    url = migrated_sqlite(tmp)
    tokens = {node: new_token(url, node) for node in GPUS}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"GPUWATCH_NODE_TIMEOUT_S": str(NODE_TIMEOUT_S), "GPUWATCH_INCIDENT_SETTLE_S": "0.2"}
    # Three nodes are too few to tell a disruption from node failures: node c's silence is its own.
    env["GPUWATCH_DISRUPTION_MIN_NODES"] = "4"
    env["GPUWATCH_HANG_CHECK_S"] = "0.5"
    client_ports = {node: free_port() for node in GPUS}
    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(5)]  # the ranks' processes: idle
    scene = Scenario(base, tmp, None)
    try:
        scene.procs.append(start_server(tmp, port, tmp / "server.log", env))
        binary = shutil.which("prometheus")
        if binary:  # the metric-name test needs no Prometheus; the others require it
            config = prometheus_config(f"127.0.0.1:{port}", [ALERTS_FILE])
            scene.prometheus = Prometheus(binary, config, tmp)
        sysfs = str(ROOT / "tests" / "fixtures" / "sysfs-ib")
        agents = {
            NODE_A: _agent(base, tmp, tokens[NODE_A], NODE_A, client_ports[NODE_A], "--sysfs-root", sysfs),
            NODE_B: _agent(base, tmp, tokens[NODE_B], NODE_B, client_ports[NODE_B]),
            NODE_C: _agent(base, tmp, tokens[NODE_C], NODE_C, client_ports[NODE_C]),
        }
        scene.procs += agents.values()
        _refused_batch(base)
        wait_until(lambda: len(httpx.get(f"{base}/api/v1/gpus").json()) == sum(GPUS.values()), 30, "all agents")
        for client_port in client_ports.values():
            wait_until(lambda p=client_port: httpx.get(f"http://127.0.0.1:{p}/v1/health").status_code == 200)
        if scene.prometheus:
            scene.prometheus.wait_ready()
            wait_until(lambda: scene.prometheus.query('DCGM_FI_DEV_GPU_UTIL{instance="prom-node-c"}'), 20, "a scrape")

        # Rank 1 computes 0.45 s per step against rank 0's 0.2 s: a straggler; 35% of the job's
        # step time is in collectives.
        _report(client_ports[NODE_A], "llama-train", 0, 0, sleepers[0].pid, [(0.5, 0.3)] * 8)
        _report(client_ports[NODE_A], "llama-train", 1, 1, sleepers[1].pid, [(0.5, 0.05)] * 8)
        _report(client_ports[NODE_B], "stuck-job", 0, 0, sleepers[2].pid, [(0.2, 0.01)] * 3, hang_timeout_s=1.0)
        _report(client_ports[NODE_C], "bert-ft", 0, 0, sleepers[3].pid, [(0.3, 0.05)] * 4)
        # No GPU named: the agent cannot tie any GPU sample to etl-prep (a long hang timeout: no hang).
        _report(client_ports[NODE_B], "etl-prep", 0, None, sleepers[4].pid, [(0.2, 0.0)] * 3, hang_timeout_s=3600.0)
        for node, gpu, fault, params in [
            (NODE_A, 3, "xid", {"code": 79}),
            (NODE_A, 2, "xid", {"code": 74}),
            (NODE_A, 1, "thermal", {"duration_s": 300.0}),
            (NODE_B, 1, "xid", {"code": 48}),
        ]:
            write_fault(Settings(data_dir=tmp, node=node).agent_dir / "faults", gpu, fault, **params)
        auth = {"Authorization": f"Bearer {tokens[NODE_B]}"}
        run = httpx.post(f"{base}/api/v1/runs", json={"job": "resnet-ft", "command": "python train.py"}, headers=auth)
        exit_ = httpx.post(f"{base}/api/v1/runs/{run.json()['id']}/exit", json={"exit_code": 137}, headers=auth)
        assert exit_.status_code == 202, exit_.text

        def metrics_show_everything() -> str | None:
            text = httpx.get(f"{base}/metrics").text
            ready = (
                _metric_value(text, "gpuwatch_gpus_unallocated", node=NODE_C) == 0.0  # bert-ft holds its GPU
                and (_metric_value(text, "gpuwatch_hang_events_total", job="stuck-job") or 0) >= 1
                and (_metric_value(text, "gpuwatch_straggler_events_total", job="llama-train") or 0) >= 1
                and _metric_sum(text, "gpuwatch_failures_total") >= 1
                and _metric_value(text, "gpuwatch_xid_events_total", instance=NODE_B, gpu="1", xid="48") == 1.0
                and _metric_value(text, "gpuwatch_incident_info", job="resnet-ft", trigger="run_failed", state="done")
                and _metric_value(text, "DCGM_FI_DEV_XID_ERRORS", instance=NODE_A, gpu="2") == 74.0
                and _metric_value(text, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", instance=NODE_B, gpu="1") == 1.0
                and _metric_value(text, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", instance=NODE_A, gpu="1") == 96.0
                and _metric_value(text, "gpuwatch_job_throughput", job="llama-train") is not None
                and _metric_value(text, "gpuwatch_job_gpu_attributed", job="llama-train") == 1.0
                and _metric_value(text, "gpuwatch_job_gpu_attributed", job="etl-prep") == 0.0
            )
            return text if ready else None

        wait_until(metrics_show_everything, 20, "the scenario on the server's /metrics", every=0.2)
        if scene.prometheus:
            prom = scene.prometheus
            wait_until(lambda: prom.query(f'gpuwatch_gpus_unallocated{{node="{NODE_C}"}} == 0'), 10, "bert-ft scraped")
        agents[NODE_C].stop()  # node c goes silent with bert-ft on its GPU
        _refused_batch(base)  # a second refusal, scraped apart from the first: a rate

        def node_c_down() -> str | None:
            text = httpx.get(f"{base}/metrics").text
            return text if _metric_value(text, "gpuwatch_node_up", node=NODE_C) == 0.0 else None

        scene.metrics = wait_until(node_c_down, NODE_TIMEOUT_S + 10, "node c to be down")
        yield scene
    finally:
        if scene.prometheus:
            scene.prometheus.stop()
        for proc in reversed(scene.procs):
            proc.stop()
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


def _prometheus(scene: Scenario) -> Prometheus:
    require_tool("prometheus")  # skips, or fails in CI, when it is not installed
    assert scene.prometheus is not None
    return scene.prometheus


def _all_queries() -> list[Query]:
    """Ours, and the standard dcgm-exporter dashboard's where ../shared is beside this checkout."""
    standard = [DCGM_DASHBOARD] if DCGM_DASHBOARD.exists() else []
    return [q for path in [*DASHBOARD_FILES, *standard] for q in queries(load(path))]


def _declared(exposition: str) -> set[str]:
    """Every sample name the exposition declares (HELP/TYPE) or carries."""
    names = set(re.findall(r"^([a-zA-Z_:][\w:]*)[{ ]", exposition, re.M))
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.M):
        names.add(name)
        if kind in ("histogram", "summary"):
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


def test_dashboards_and_alerts_use_only_metrics_the_server_declares(scenario: Scenario) -> None:
    declared = _declared(scenario.metrics) | set(DECLARED_ELSEWHERE)
    ours = [q for path in DASHBOARD_FILES for q in queries(load(path))]
    used = {name: q.source for q in ours for name in metric_names(q.expr)}
    used |= {name: f"alert {rule.name}" for rule in alert_rules() for name in metric_names(rule.expr)}
    assert {name: where for name, where in used.items() if name not in declared} == {}
    if DCGM_DASHBOARD.exists():
        dcgm = {name for q in queries(load(DCGM_DASHBOARD)) for name in metric_names(q.expr)}
        assert dcgm - declared == {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"}, "the standard dashboard's other metrics exist"
    exported_dcgm = {name for name in declared if name.startswith("DCGM_FI_")}
    # The node dashboard plots PCIe from DCGM_FI_PROF_PCIE_*_BYTES; these are the same in KB/s.
    twins = {"DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT"}
    assert len(exported_dcgm) >= 19 and exported_dcgm - twins <= set(used), "every DCGM field is on a dashboard"


@pytest.mark.prometheus
def test_every_dashboard_query_parses_and_returns_data(scenario: Scenario) -> None:
    prom = _prometheus(scenario)
    all_queries = _all_queries()
    assert len(all_queries) > 80
    may_be_empty = [q for q in all_queries if metric_names(q.expr) & set(MAYBE_EMPTY)]
    print(f"{len(may_be_empty)} of {len(all_queries)} queries may be empty:", *(q.source for q in may_be_empty))
    assert len(may_be_empty) <= 16, "the scenario should show (almost) everything"
    listed = set(MAYBE_EMPTY) - (set() if DCGM_DASHBOARD.exists() else {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"})
    assert {name for q in may_be_empty for name in metric_names(q.expr)} >= listed, "no stale entry"

    def returns_data(q: Query, expr: str) -> bool:
        if q.kind == "variable":
            return bool(prom.label_values(label_of_variable(q), expr))
        return bool(prom.query(expr))  # raises QueryError if it does not parse

    def empty() -> list[str]:
        missing = []
        for q in all_queries:
            found = [returns_data(q, expr) for expr in _variants(q.expr)]  # every variant must parse
            if not any(found) and q not in may_be_empty:
                missing.append(f"{q.source}: {q.expr}")
        return missing

    try:
        wait_until(lambda: not empty(), timeout=20, what="every query to return data", every=1)
    except AssertionError:
        assert empty() == []


@pytest.mark.prometheus
def test_a_job_without_gpu_attribution_is_flagged_through_prometheus(scenario: Scenario) -> None:
    """The Job dashboard's attribution panel, for the job whose process names no GPU and for one whose does;
    the job's utilization answer says the same in words."""
    prom = _prometheus(scenario)
    [panel] = [p for p in load(ROOT / "dashboards" / "gpuwatch-job.json")["panels"] if p["title"] == "GPU attribution"]
    expr = panel["targets"][0]["expr"]

    def attributed(job: str) -> float | None:
        series = prom.query(substitute(expr, {"job": job}))
        return float(series[0]["value"][1]) if series else None

    wait_until(lambda: attributed("etl-prep") == 0.0 and attributed("llama-train") == 1.0, 20, "both jobs scraped")
    [job] = httpx.get(f"{scenario.base}/api/v1/jobs", params={"name": "etl-prep"}).json()
    answer = httpx.get(f"{scenario.base}/api/v1/jobs/{job['id']}/utilization").json()
    assert answer["gpu_attribution"] == "none" and answer["gpu_util_mean"] is None
    assert "no GPU sample is attributed" in answer["gpu_attribution_note"]


@pytest.mark.prometheus
def test_dcgm_exporter_dashboard_sees_nodes_not_the_server(scenario: Scenario) -> None:
    """The catch of shared/data/README.md: with honor_labels, `instance` is the node, as dcgm-exporter's."""
    prom = _prometheus(scenario)
    if not DCGM_DASHBOARD.exists():
        pytest.skip(f"{DCGM_DASHBOARD} is not beside this checkout")
    instances = prom.label_values("instance", "DCGM_FI_DEV_GPU_TEMP")
    assert {NODE_A, NODE_B} <= instances <= set(GPUS)
    for q in queries(load(DCGM_DASHBOARD)):
        if q.kind == "panel" and "TENSOR" not in q.expr:
            [expr] = _variants(q.expr)
            series = prom.query(expr)
            assert series, q.source
            assert {s["metric"].get("instance") for s in series} <= {NODE_A, NODE_B, None}, q.source


# The Job dashboard's communication panel, total beside exposed (issue 23; the dashboard rewrite adds
# it): each query with llama-train's values, 35% of each step in collectives and half of that waited for.
COMM_PANEL = {
    'gpuwatch_job_comm_overhead_ratio{job="$job", rank="all"}': {"": 0.35},
    'gpuwatch_job_comm_exposed_ratio{job="$job", rank="all"}': {"": 0.175},
    'gpuwatch_job_comm_exposed_ratio{job="$job", rank!="all"}': {"0": 0.3, "1": 0.05},
    # 16 all-reduces of 64 MiB in 8 x 0.3 + 8 x 0.05 s; two ranks: bus factor 1.
    'gpuwatch_job_comm_busbw_bytes_per_second{job="$job", op="all_reduce"}': {"": 16 * (64 << 20) / 2.8},
}


@pytest.mark.prometheus
def test_the_communication_panels_queries_return_total_and_exposed_shares(scenario: Scenario) -> None:
    prom = _prometheus(scenario)
    for expr, expected in COMM_PANEL.items():
        query = substitute(expr, {"job": "llama-train"})
        series = wait_until(lambda q=query: prom.query(q), timeout=10, what=query, every=0.5)
        got = {s["metric"].get("rank", ""): float(s["value"][1]) for s in series}
        got = {("" if k == "all" else k): v for k, v in got.items()}
        assert got == pytest.approx(expected, rel=1e-6), query


@pytest.mark.prometheus
def test_every_alert_parses_and_fires_in_the_scenario(scenario: Scenario) -> None:
    prom = _prometheus(scenario)
    rules = alert_rules()
    assert set(QUIET_ALERTS) <= {rule.name for rule in rules} and len(QUIET_ALERTS) <= 7
    for rule in rules:
        try:
            prom.query(rule.expr)
        except QueryError as exc:
            pytest.fail(f"{rule.name}: {exc}")
    expected = {rule.name for rule in rules} - set(QUIET_ALERTS)
    try:
        wait_until(lambda: set(prom.alerts()) >= expected, timeout=20, what="the scenario's alerts", every=0.5)
    finally:
        active = prom.alerts()
    assert set(active) & set(QUIET_ALERTS) == set(), "quiet alerts stay quiet"
    assert {r["name"]: r["health"] for r in prom.rules() if r["health"] != "ok"} == {}
    for name in expected:  # the expression itself, as sent to the API, returns the alert's series
        rule = next(r for r in rules if r.name == name)
        assert prom.query(rule.expr), name


# --- a server restart and a silent node are no repair (issue 22, point 3) ------------------------------

NODE_D, NODE_E = "prom-node-d", "prom-node-e"
HARDWARE_ALERTS = ("GpuFellOffTheBus", "GpuFatalXid", "GpuUncorrectableEccErrors")


def _firing(prom: Prometheus, name: str, **labels: str) -> bool:
    """Whether the alert fires now for a series with ``labels``, by its own expression (not only held by
    keep_firing_for)."""
    rule = next(r for r in alert_rules() if r.name == name)
    matching = [s for s in prom.query(rule.expr) if all(s["metric"].get(k) == v for k, v in labels.items())]
    states = {a["state"] for a in prom.api("/alerts")["alerts"] if a["labels"]["alertname"] == name}
    return bool(matching) and "firing" in states


@pytest.mark.prometheus
def test_a_server_restart_and_a_silent_node_keep_hardware_alerts_firing(tmp_path: Path) -> None:
    """Node d's GPU 1 falls off the bus (Xid 79) while node d goes on reporting; node e has an Xid 48 and
    uncorrectable ECC errors, then falls silent. The server is restarted. Every hardware alert fires
    again from the new server's own series, and node e's hold although it never spoke again."""
    binary = require_tool("prometheus")
    url = migrated_sqlite(tmp_path)
    tokens = {node: new_token(url, node) for node in (NODE_D, NODE_E)}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"GPUWATCH_NODE_TIMEOUT_S": str(NODE_TIMEOUT_S), "GPUWATCH_DISRUPTION_MIN_NODES": "4"}
    procs: list[Proc] = []
    prom = None
    try:
        server = start_server(tmp_path, port, tmp_path / "server.log", env)
        procs.append(server)
        prom = Prometheus(binary, prometheus_config(f"127.0.0.1:{port}", [ALERTS_FILE]), tmp_path)
        agents = {}
        for node, gpus in ((NODE_D, 2), (NODE_E, 1)):
            args = ["agent", "--server", base, "--token", tokens[node], "--node", node, "--simulate", str(gpus)]
            args += ["--client-port", "0", "--flush", "0.5", "--interval", "0.5", "--data-dir", str(tmp_path)]
            agents[node] = Proc(args, tmp_path / f"{node}.log")
        procs += agents.values()
        wait_until(lambda: len(httpx.get(f"{base}/api/v1/gpus").json()) == 3, 30, "both agents")
        faults = [(NODE_D, 1, "xid", {"code": 79}), (NODE_E, 0, "xid", {"code": 48}), (NODE_E, 0, "ecc_dbe", {})]
        for node, gpu, fault, params in faults:
            write_fault(Settings(data_dir=tmp_path, node=node).agent_dir / "faults", gpu, fault, **params)
        prom.wait_ready()
        expected = [
            ("GpuFellOffTheBus", {"instance": NODE_D, "gpu": "1"}),
            ("GpuFatalXid", {"instance": NODE_E, "gpu": "0", "xid": "48"}),
            ("GpuUncorrectableEccErrors", {"instance": NODE_E, "gpu": "0"}),
        ]

        def all_firing() -> bool:
            return all(_firing(prom, name, **labels) for name, labels in expected)

        wait_until(all_firing, 60, "the hardware alerts", every=0.5)
        agents[NODE_E].stop()  # node e falls silent
        wait_until(
            lambda: prom.query(f'gpuwatch_node_up{{node="{NODE_E}"}} == 0'), NODE_TIMEOUT_S + 15, "node e silent"
        )
        server.stop()
        procs.remove(server)
        started = time.time()
        server = start_server(tmp_path, port, tmp_path / "server-2.log", env)
        procs.append(server)
        # The new server scraped (its start time newer than the restart), its own series say it all.
        wait_until(
            lambda: any(float(s["value"][1]) >= started - 1 for s in prom.query("process_start_time_seconds")),
            30,
            "a scrape of the restarted server",
        )
        wait_until(all_firing, 30, "the hardware alerts from the restarted server", every=0.5)
        assert prom.query(f'gpuwatch_node_up{{node="{NODE_E}"}} == 0'), "node e is still silent"
        assert prom.query(f'gpuwatch_gpu_lost{{instance="{NODE_E}"}} == 0'), "a silent node's GPU is not lost"
        assert set(HARDWARE_ALERTS) <= set(prom.alerts())
    finally:
        if prom:
            prom.stop()
        for proc in reversed(procs):
            proc.stop()
