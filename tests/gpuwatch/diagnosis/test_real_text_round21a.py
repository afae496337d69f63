"""Classes of misses from issue 19's twenty-first round (corpus cases 1620-1640: the cluster layers that training
jobs fail through: SkyPilot, Azure ML, AWS ParallelCluster, Metaflow on AWS Batch, Kueue, Slurm on EKS (Slinky),
Polyaxon, Slurm sites' own users (Perlmutter, university clusters), Cloud TPU): SkyPilot's task prefixes on the
lines of a run, Slurm's clients refusing a request, Slurm's clients losing their controller, and the NVIDIA fabric
manager service failing to start. Error messages are verbatim from the public reports named in each test; hosts,
paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from gpuwatch.diagnosis.normalize import normalize
from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- SkyPilot's task prefixes

# skypilot-org/skypilot#5520 (case 1621): the GPT-2 (llm.c) example's run step cannot find the interpreter.
_SKYPILOT_PYTHON_NOT_FOUND = r"""
(setup pid=4439) /usr/local/cuda/bin/nvcc --threads=0 -t=0 --use_fast_math -std=c++17 -O3 -DENABLE_CUDNN -DMULTI_GPU -DUSE_MPI -DENABLE_BF16 train_gpt2.cu build/cudnn_att.o -lcublas -lcublasLt -lnvidia-ml -lcudnn -L/usr/lib/x86_64-linux-gnu/openmpi/lib/ -I/root/cudnn-frontend/include -I/usr/lib/x86_64-linux-gnu/openmpi/include/ -lnccl -lmpi -o train_gpt2cu
(train, pid=4439) bash: python: command not found
(train, pid=4439) +-----------------------+----------------------------------------------------+
(train, pid=4439) | Parameter             | Value                                              |
"""


def test_skypilot_s_task_prefix_is_stripped_so_the_shell_s_words_read() -> None:
    assert reason_and_rule(_SKYPILOT_PYTHON_NOT_FOUND) == ("file_not_found", "missing-path-outside-python")


def test_skypilot_s_multi_node_prefix_is_stripped_without_taking_its_node_rank() -> None:
    # skypilot-org/skypilot#2355: torchrun's summary on the second node of a SkyPilot task; "rank=1" is the
    # node's rank, the failed process is global rank 5
    text, rank = normalize("(worker1, rank=1, pid=22249, ip=10.31.0.9)   rank      : 5 (local_rank: 1)")
    assert (text, rank) == ("rank      : 5 (local_rank: 1)", None)
    assert normalize("(train, pid=4439) bash: python: command not found") == ("bash: python: command not found", None)


def test_ray_and_vllm_prefixes_are_unchanged() -> None:
    # vLLM's worker prefix still carries its rank; Ray's still reads as no rank
    assert normalize("(VllmWorker rank=3 pid=226) worker died") == ("worker died", 3)
    assert normalize("(RayTrainWorker pid=41233, ip=10.4.3.95) hello") == ("hello", None)
    # a parenthesised remark that is not a process's name stays
    assert normalize("(train, epoch=3) loss=0.41")[0] == "(train, epoch=3) loss=0.41"
    assert reason_of("(train, pid=4439) all done, exiting") == "unknown"


# ---------------------------------------------------------------- Slurm's clients refusing a request

# swaruplab/operon#8 (case 1635): a site's job_submit plugin refuses a GPU job without its account.
_SBATCH_JOB_SUBMIT_REFUSED = r"""
(base) [lesolano@login-i17 Cobos]$ sbatch /dfs7/swaruplab/lesolano/Cobos/ParseReseq/Analysis/scripts/train_mrvi_FAST.sh
sbatch: error: !!! slurm_job_submit ERROR: 302732 submitted a job to a gpu32 partition, without specifying a GPU32 Account.
sbatch: error: Batch job submission failed: Unspecified error
"""

# ComputationalRadiationPhysics/picongpu#4215 (case 1632): Crusher's profile sets two exclusive options.
_SRUN_MUTUALLY_EXCLUSIVE = r"""
Running program...
srun: fatal: SLURM_GPUS_PER_TASK is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU
"""


def test_sbatch_s_refusal_for_any_reason_of_the_request_is_the_request_s() -> None:
    assert reason_and_rule(_SBATCH_JOB_SUBMIT_REFUSED) == ("argument_error", "slurm-request-invalid")


def test_a_slurm_client_refusing_exclusive_options_is_the_command_line_s() -> None:
    assert reason_and_rule(_SRUN_MUTUALLY_EXCLUSIVE) == ("argument_error", "slurm-request-invalid")
    # mehta-lab/recOrder#482, a comment: the memory options srun inherited from the allocation
    assert (
        reason_of("srun: fatal: SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are mutually exclusive.")
        == "argument_error"
    )


def test_a_submission_that_failed_on_the_way_to_the_controller_is_not_the_request_s() -> None:
    assert (
        reason_of("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation")
        != "argument_error"
    )
    assert reason_of("sbatch: error: Batch job submission failed: Access/permission denied") != "argument_error"
    # Slurm retrying by itself is not a refusal
    assert (
        reason_of(
            "sbatch: error: Batch job submission failed: Slurm temporarily unable to accept job, sleeping and retrying"
        )
        != "argument_error"
    )
    # "mutually exclusive" in the run's own exception is not Slurm's
    assert reason_of("ValueError: --fp16 and --bf16 are mutually exclusive") == "script_error"


# ---------------------------------------------------------------- Slurm's clients losing their controller

# gafusion/gacode#449 (case 1633): CGYRO on Perlmutter after a Slurm update at maintenance.
_SRUN_ZERO_BYTES = r"""
srun: error: Unable to create step for job 28841007: Zero Bytes were transmitted or received
"""

# nico-bohlinger/one_policy_to_run_them_all#5 (case 1630): a configless client that finds no controller.
_SBATCH_NO_CONFIG_SOURCE = r"""
$ sbatch experiment.sh
sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host
sbatch: error: fetch_config: DNS SRV lookup failed
sbatch: error: _establish_config_source: failed to fetch config
sbatch: fatal: Could not establish a configuration source
"""


def test_an_rpc_to_slurm_that_came_back_empty_is_the_connection() -> None:
    assert reason_and_rule(_SRUN_ZERO_BYTES) == ("network_error", "slurm-controller-unreachable")
    assert (
        reason_of("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation")
        == "network_error"
    )
    assert reason_of("squeue: error: Unable to contact slurm controller (connect failure)") == "network_error"


def test_a_configless_client_without_a_controller_is_the_connection() -> None:
    assert reason_and_rule(_SBATCH_NO_CONFIG_SOURCE) == ("network_error", "slurm-controller-unreachable")


def test_a_task_launch_that_fails_on_a_named_node_stays_the_node_s() -> None:
    assert (
        reason_of(
            "srun: error: Task launch for StepId=1234.0 failed on node gpu-a07: Socket timed out on send/recv operation"
        )
        == "node_failure"
    )
    # the run's own socket timeout is not Slurm's
    assert reason_of("Training on node 3: Zero Bytes were transmitted or received, retrying") == "unknown"


# ---------------------------------------------------------------- the fabric manager failing to start

# aws/aws-parallelcluster#6571 (case 1623): p4 nodes on Amazon Linux 2023 fail to bootstrap.
_PCLUSTER_FABRIC_MANAGER_TIMEOUT = r"""
================================================================================
Error executing action `configure` on resource 'fabric_manager[Configure fabric manager]'
================================================================================

Mixlib::ShellOut::CommandTimeout
--------------------------------
service[nvidia-fabricmanager] (aws-parallelcluster-platform::nvidia_config line 35) had an error: Mixlib::ShellOut::CommandTimeout: Command timed out after 900s:
Command exceeded allowed execution time, process terminated
"""


def test_the_fabric_manager_service_that_never_starts_is_the_nvlink_fabric() -> None:
    assert reason_and_rule(_PCLUSTER_FABRIC_MANAGER_TIMEOUT) == ("nvlink_error", "nvlink-fatal")
    # systemd's words for the same (the unit's description is "NVIDIA fabric manager service")
    assert reason_of("systemd[1]: Failed to start NVIDIA fabric manager service.") == "nvlink_error"
    assert (
        reason_of("systemd[1]: nvidia-fabricmanager.service: start operation timed out. Terminating.") == "nvlink_error"
    )


def test_the_fabric_manager_starting_or_configured_is_not_a_failure() -> None:
    assert reason_of("systemd[1]: Started NVIDIA fabric manager service.") == "unknown"
    assert reason_of("* service[nvidia-fabricmanager] action start (up to date)") == "unknown"
    assert (
        reason_of(
            "Recipe: aws-parallelcluster-platform::nvidia_config\n  * fabric_manager[Configure fabric manager] action configure"
        )
        == "unknown"
    )
