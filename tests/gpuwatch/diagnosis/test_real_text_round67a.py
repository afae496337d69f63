"""Classes of misses from issue 19's rounds sixty-seven to sixty-nine (corpus cases 3141-3164: NCCL and
collective-communication failures; 3171-3200: host memory, storage and node failures; 3201-3221: RL and post-training
stacks and their inference engines). Error messages are verbatim from the public reports named in each test; hosts,
paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwatch.diagnosis import stream
from gpuwatch.diagnosis.engine import diagnose_rules
from gpuwatch.diagnosis.model import LogSource
from gpuwatch.diagnosis.stream import FileLines
from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


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


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # nnU-Net in a Nomad job and YOLOv8 in Docker (cases 3176, 3178): /dev/shm full, in the storage rule's words
        (
            "RuntimeError: unable to write to file </torch_32096_1415667320_0>: No space left on device (28)\n",
            "dataloader_error",
            "worker-shared-memory-full",
        ),
        # PaddlePaddle/PaddleSpeech#790 (case 3193): Paddle's words for a worker's bus error
        (
            "Train: Rank: 0, epoch: 0, step: 831, batch : 832/1876,\nERROR: Unexpected BUS error encountered in DataLoader worker. This might be caused by insufficient shared memory (shm), please check whether use_shared_memory is set and storage space in /dev/shm is enough\n",
            "dataloader_error",
            "dataloader",
        ),
        # allenai/scirepeval#48 (case 3188): S3 through fsspec, re-raised by the worker wrapper
        (
            "fsspec.exceptions.FSTimeoutError: Caught FSTimeoutError in DataLoader worker process 1.\n",
            "storage_error",
            "storage",
        ),
        # MIC-DKFZ/nnUNet#1128 (case 3177): gcsfuse's own lines
        (
            "fuse: writeMessage: no such file or directory [16 0 0 0 218 255 255 255 220 184 69 86 0 0 0 0]\n"
            'ReadFile: operation canceled, fh.reader.ReadAt: readFull: not retrying Read("nnunet/nnUNet_preprocessed/Task101_Hip/nnUNetData_plans_v2.1_stage1/2008_2041.npy", 1657233746627223): net/http: request canceled\n',
            "storage_error",
            "storage",
        ),
        # GoogleCloudPlatform/gcsfuse#288 (case 3191): errno 5 with its sentence cut
        (
            'Traceback (most recent call last):\n  File "/home/u/.venv/lib/python3.6/site-packages/torch/serialization.py", line 116, in _with_file_like\n    f = open(f, mode)\nOSError: [Errno 5] Input/output e\n',
            "storage_error",
            "storage",
        ),
        # huggingface/datasets#7440 (case 3171): an object the hub stopped giving, not a path the script got wrong
        (
            'Traceback (most recent call last):\n  File "/home/u/.venv/lib/python3.13/site-packages/datasets/utils/file_utils.py", line 1379, in _iter_from_urlpaths\n    raise FileNotFoundError(urlpath)\n'
            "FileNotFoundError: zstd://example_train_1215.jsonl::hf://datasets/cerebras/SlimPajama-627B@2d0accdd58c5d5511943ca1f5ff0e3eb5e293543/train/chunk9/example_train_1215.jsonl.zst\n",
            "storage_error",
            "remote-object-not-found",
        ),
        # alibaba/ROLL#240 (case 3216): vLLM's RPC wrapper around a parameter the model does not have
        (
            "Exception: Call to collective_rpc method failed: 'visual.patch_embed.proj.weight'\n",
            "checkpoint_load_error",
            "weights-not-in-model",
        ),
    ],
)
def test_shared_memory_remote_storage_and_weights_in_their_own_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)
    # a local path that is not there stays the script's
    if rule == "remote-object-not-found":
        assert reason_of(text.replace("zstd://example_train_1215.jsonl::hf://", "/data/")) == "file_not_found"


# artidoro/qlora#78 (case 3125): the loss climbs and the log ends, no error anywhere
_QLORA = """
{'loss': 2.183, 'learning_rate': 0.0002, 'epoch': 0.14}
 10%|██████▊                                                             | 10/100 [01:43<15:04, 10.05s/it]Saving PEFT checkpoint...
{'loss': 3.3851, 'learning_rate': 0.0002, 'epoch': 0.29}
 20%|█████████████▌                                                      | 20/100 [03:20<13:07,  9.85s/it]Saving PEFT checkpoint...
{'loss': 9.2042, 'learning_rate': 0.0002, 'epoch': 0.43}
 30%|████████████████████▍                                               | 30/100 [04:59<11:21,  9.73s/it]Saving PEFT checkpoint...
{'loss': 50.7927, 'learning_rate': 0.0002, 'epoch': 0.57}
 40%|███████████████████████████▏                                        | 40/100 [06:37<10:03, 10.05s/it]Saving PEFT checkpoint...
 43%|█████████████████████████████▏                                      | 43/100 [07:08<09:31, 10.02s/it]
"""


def test_a_loss_that_climbs_tenfold_at_the_end_of_the_log_is_divergence() -> None:
    assert reason_and_rule(_QLORA) == ("loss_divergence", "loss-rising")
    # a loss that falls, or rises less than tenfold, or not at each of its last values, says nothing
    assert reason_of(_QLORA.replace("50.7927", "1.7927").replace("9.2042", "1.9042")) == "unknown"
    assert reason_of(_QLORA.replace("50.7927", "30.7927")) == "unknown"
    assert reason_of(_QLORA.replace("9.2042", "60.2042")) == "unknown"
    # the loss scale is no loss
    scale = "".join(f" iteration {i}/ 500 | lm loss: 2.1E+00 | loss scale: {2.0**i:.1f} |\n" for i in range(6))
    assert reason_of(scale) == "unknown"
    # HyperPose (case 2463): a total loss of 52 becoming 1.1e12 between two logged iterations
    exploded = (
        "Train iteration 74300 / 1000000: Learning rate 9.999999747378752e-05 total_loss:51.99763870239258, conf_loss:25.99869155883789\n"
        "stage_0 conf_loss:27.358610153198242 paf_loss:78.49413299560547\n"
        "stage_5 conf_loss:25.543825149536133 paf_loss:72.84919738769531\n"
        "Train iteration 74400 / 1000000: Learning rate 9.999999747378752e-05 total_loss:1148700065792.0, conf_loss:1743442149376.0\n"
        "stage_4 conf_loss:2292520058880.0 paf_loss:300717211648.0\n"
        "stage_5 conf_loss:8167979745280.0 paf_loss:3018960142336.0\n"
    )
    assert reason_and_rule(exploded) == ("loss_divergence", "loss-rising")


def test_a_rising_loss_is_read_from_the_tail_of_a_streamed_file(tmp_path: Path) -> None:
    """A file past what the stream reads of its end: the same answer and evidence as its lines in memory."""
    steady = "".join(
        f"{{'loss': {2.0 - i * 1e-6:.6f}, 'learning_rate': 0.0002, 'epoch': {i / 1e4:.4f}}}\n" for i in range(6000)
    )
    path = tmp_path / "train.log"
    path.write_text(steady + _QLORA.lstrip("\n"))
    assert path.stat().st_size > stream.TAIL_BYTES
    lines = path.read_text().splitlines()
    in_memory = diagnose_rules([LogSource(file="train.log", lines=lines)])
    streamed = diagnose_rules([LogSource(file="train.log", lines=FileLines(path))])
    assert (in_memory.reason, in_memory.rule_id) == ("loss_divergence", "loss-rising")
    assert streamed.to_json() == in_memory.to_json()
    assert in_memory.evidence[0].line == len(lines) - 2  # the last loss, "{'loss': 50.7927, ...}"
