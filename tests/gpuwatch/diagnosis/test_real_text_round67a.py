"""Classes of misses from issue 19's rounds sixty-seven to sixty-nine (corpus cases 3141-3164: NCCL and
collective-communication failures; 3171-3200: host memory, storage and node failures; 3201-3221: RL and post-training
stacks and their inference engines). Error messages are verbatim from the public reports named in each test; hosts,
paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


def test_a_service_the_run_calls_that_refuses_it_is_the_network_s() -> None:
    # TideDra/lmm-r1#30 (case 3214): the script's own give-up after urllib3's refused connections is their consequence
    text = """
  File "/root/.cache/ray/session_2025-03-11_19-49-45_696028_82195/runtime_resources/working_dir_files/_ray_pkg_1d273cd101beeaa0/openrlhf/utils/remote_rm_utils.py", line 29, in request_api_wrapper
    raise Exception(f"Request error for {try_max_times} times, returning None. Please check the API server.")
Exception: Request error for 5 times, returning None. Please check the API server.
(remote_rm_fn_ray pid=98924) INFO 03-11 19:53:41 remote_rm_utils.py:24] Request error, please check: HTTPConnectionPool(host='127.0.0.1', port=5000): Max retries exceeded with url: /get_reward (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f624347cc70>: Failed to establish a new connection: [Errno 111] Connection refused')) [repeated 15x across cluster]
"""
    assert reason_and_rule(text, "ray-job.log") == ("network_error", "http-connection-dropped")
    # NVIDIA/NeMo-Aligner#58 (case 3211): a client that waited for its server in vain
    waited = "pytriton.client.exceptions.PyTritonClientTimeoutError: Waiting for server to be ready timed out.\n"
    assert reason_and_rule(waited, "actor.log") == ("network_error", "http-connection-dropped")


@pytest.mark.parametrize(
    "text",
    [
        # rllm-org/rllm#35 (case 3219): Ray's autoscaler on a one-GPU cluster
        "(autoscaler +34s) Error: No available node types can fulfill resource request defaultdict(<class 'float'>, {'CPU': 8.0, 'GPU': 8.0}). Add suitable node types to this cluster to resolve this issue.\n",
        # NVIDIA-NeMo/RL#89 (case 3209)
        'Traceback (most recent call last):\n  File "/core/gh/NeMo-Reinforcer/nemo_reinforcer/distributed/virtual_cluster.py", line 189, in _init_placement_groups\n    raise ValueError(\nValueError: Not enough GPUs available. Requested 16 GPUs, but only 8 are available in the cluster.\n',
    ],
)
def test_a_job_asking_a_cluster_for_more_gpus_than_it_has_is_the_launch_s(text: str) -> None:
    assert reason_and_rule(text) == ("argument_error", "cluster-lacks-requested-gpus")


def test_gpus_without_peer_access_are_the_launch_s_settings() -> None:
    # hiyouga/EasyR1#579 (case 3148)
    text = """
(Runner pid=16018) Cuda failure 217 'peer access is not supported between these two devices'
(Runner pid=16018) torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3
"""
    assert reason_and_rule(text) == ("argument_error", "too-many-peers")


def test_the_flight_recorder_s_dump_signal_is_a_collective_timeout() -> None:
    # sgl-project/sglang#10216 (case 3161)
    text = """
[rank6]:[E909 08:45:31.970959174 ProcessGroupNCCL.cpp:1870] [PG ID 0 PG GUID 0 Rank 6] Received a dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. Last enqueued NCCL work: -1, last completed NCCL work: -1.
"""
    assert reason_and_rule(text) == ("nccl_timeout", "nccl-watchdog-timeout")
