"""A server restart is no repair: what the hardware alerts read is rebuilt from the database at start-up
(a lost GPU, uncorrectable ECC counts, Xid counts), before any agent reconnects; and a silent node's
lost GPUs and fault counts stay exported."""

from __future__ import annotations

import time

import httpx
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, Event, GpuInfo, GpuSample, GpuSeries, to_series
from server.telemetry.exporter import MetricsExporter
from server.telemetry.latest import Telemetry
from tests.helpers import InProcessServer, add_samples, new_token, wait_until

NODE = "restore-node"


def _samples(srv: InProcessServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(name, sorted (label, value) pairs without UUID and the like) → value, of gpuwatch's series."""
    out = {}
    for family in text_string_to_metric_families(httpx.get(f"{srv.url}/metrics").text):
        for s in family.samples:
            keep = tuple(sorted((k, v) for k, v in s.labels.items() if k in ("gpu", "xid", "instance")))
            out[(s.name.removesuffix("_TOTAL_total"), keep)] = s.value  # the parser's name for DCGM's counters
    return out


def _gpu(name: str, gpu: int, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted({"gpu": str(gpu), "instance": NODE, **labels}.items()))


def _post(client: httpx.Client, batch: Batch) -> None:
    resp = client.post("/api/v1/ingest", content=batch.model_dump_json(), headers={"Content-Type": "application/json"})
    assert resp.status_code == 200, resp.text


class Gpu1Reports:
    """The agent's next batch: GPU 1's sample of now (GPU 0 says nothing any more)."""

    def __init__(self, client: httpx.Client) -> None:
        self.client, self.batch_id = client, 10

    def __call__(self) -> bool:
        self.batch_id += 1
        sample = GpuSample(ts=time.time(), gpu=1, uuid="GPU-R1", util_gpu=90.0, ecc_dbe_volatile=2)
        _post(self.client, Batch(batch_id=self.batch_id, series=to_series([sample], GpuSeries)))
        return True


def _xid(seq: int, gpu: int, code: int) -> Event:
    return Event(stream="nvml", seq=seq, ts=time.time(), kind="xid", gpu=gpu, message=f"Xid {code}", data={"xid": code})


def test_a_restart_keeps_a_lost_gpu_its_ecc_errors_and_its_xid_counts(settings: Settings) -> None:
    config = settings.replace(node_timeout_s=1.0)
    token = new_token(config.effective_database_url, NODE)
    headers = {"Authorization": f"Bearer {token}"}
    now = time.time()
    # GPU 0's last sample was read two minutes ago (it fell off the bus then); GPU 1 reports, with
    # 2 uncorrectable ECC errors. Xid 79 on GPU 0, Xid 48 on GPU 1.
    samples = [
        GpuSample(ts=now - 120, gpu=0, uuid="GPU-R0", util_gpu=90.0, ecc_dbe_volatile=0),
        GpuSample(ts=now, gpu=1, uuid="GPU-R1", util_gpu=90.0, ecc_dbe_volatile=2),
    ]
    first = Batch(batch_id=1, series=to_series(samples, GpuSeries), events=[_xid(1, 0, 79), _xid(2, 1, 48)])
    lost, ecc = _gpu("gpuwatch_gpu_lost", 0), _gpu("DCGM_FI_DEV_ECC_DBE_VOL", 1)
    xid79, xid48 = _gpu("gpuwatch_xid_events_total", 0, xid="79"), _gpu("gpuwatch_xid_events_total", 1, xid="48")
    with InProcessServer(config) as srv, httpx.Client(base_url=srv.url, headers=headers) as client:
        _post(client, first)
        # The agent goes on reporting GPU 1, GPU 0 says nothing more: it is lost.
        report = Gpu1Reports(client)
        before = wait_until(lambda: report() and (m := _samples(srv)).get(lost) == 1.0 and m, 10, "GPU 0 lost")
        assert before[_gpu("gpuwatch_gpu_lost", 1)] == 0.0
        assert (before[xid79], before[xid48], before[ecc]) == (1.0, 1.0, 2.0)

    with InProcessServer(config) as srv, httpx.Client(base_url=srv.url, headers=headers) as client:
        after = _samples(srv)  # no agent has spoken to this server yet
        assert after[lost] == 1.0, "a lost GPU is still lost after a restart"
        assert after[_gpu("gpuwatch_gpu_lost", 1)] == 0.0
        assert after[ecc] == 2.0, "its ECC errors are still there"
        assert (after[xid79], after[xid48]) == (1.0, 1.0), "the Xid counts go on from where they were"
        assert _gpu("gpuwatch_gpu_last_sample_seconds", 0) in after
        _post(client, Batch(batch_id=2, events=[_xid(3, 1, 48)]))
        assert _samples(srv)[xid48] == 2.0, "counted on from the stored count, not from zero"


def test_a_silent_node_keeps_its_lost_gpu_and_its_fault_counts() -> None:
    now = [1_000.0]
    t = Telemetry()
    t.set_inventory("n1", [GpuInfo(index=i, uuid=f"GPU-{i}", name="H100") for i in range(3)])
    samples = [GpuSample(ts=999.0, gpu=i, uuid=f"GPU-{i}", util_gpu=90.0, ecc_dbe_volatile=i) for i in range(3)]
    add_samples(t, "n1", samples, now=1_000.0)
    t.touch("n1", now=1_000.0)
    # GPU 0 falls off the bus; the agent reports the others for a minute, then the node goes silent.
    for at in range(1_010, 1_070, 10):
        add_samples(t, "n1", [s.model_copy(update={"ts": at - 1.0}) for s in samples[1:]], now=float(at))
        t.touch("n1", now=float(at))
    exporter = MetricsExporter(t, CollectorRegistry(), node_timeout_s=30, clock=lambda: now[0])
    for now[0] in (1_070.0, 1_600.0, 90_000.0):  # heard; silent ten minutes; silent a day
        text = exporter.render().decode()
        values = {
            (f.name, s.labels.get("gpu")): s.value for f in text_string_to_metric_families(text) for s in f.samples
        }
        assert [values[("gpuwatch_gpu_lost", str(i))] for i in range(3)] == [1.0, 0.0, 0.0], now[0]
        dbe = [values.get(("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", str(i))) for i in range(3)]
        assert dbe == [0.0, 1.0, 2.0], "fault counts stay exported whatever the node does"
    assert ("DCGM_FI_DEV_GPU_UTIL", "1") not in values, "a silent node's utilization is not frozen in place"


def test_an_xid_reported_without_its_code_is_stored_and_counted_under_no_code(settings: Settings) -> None:
    """An agent may report an Xid whose code it could not read (`data` without ``xid``): the batch is
    stored, not refused with a 500, and the event counted under an empty code, before and after a restart."""
    token = new_token(settings.effective_database_url, NODE)
    headers = {"Authorization": f"Bearer {token}"}
    uncoded = Event(stream="nvml", seq=1, ts=time.time(), kind="xid", gpu=0, message="Xid (code unreadable)")
    key = _gpu("gpuwatch_xid_events_total", 0, xid="")
    with InProcessServer(settings) as srv, httpx.Client(base_url=srv.url, headers=headers) as client:
        _post(client, Batch(batch_id=1, events=[uncoded, _xid(2, 0, 79)]))
        during = _samples(srv)
        assert (during[key], during[_gpu("gpuwatch_xid_events_total", 0, xid="79")]) == (1.0, 1.0)
    with InProcessServer(settings) as srv:
        assert _samples(srv)[key] == 1.0
