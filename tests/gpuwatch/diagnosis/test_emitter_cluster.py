"""The catalogue of what the layers a training job runs under say when they end or refuse it, learnt from the
emitters' own sources rather than from cases (rules.toml's "emitter-cluster" section):

- Slurm (SchedMD/slurm): src/common/slurm_errno.c's error strings as sbatch, srun and salloc print them
  (src/sbatch/sbatch.c, src/srun/allocate.c, src/srun/launch.c, src/salloc/salloc.c), slurmstepd's
  "*** JOB ... CANCELLED AT ... DUE TO ... ***" (src/slurmd/slurmstepd/req.c), the job states and reasons
  (src/common/slurm_protocol_defs.c, src/common/job_state_reason.c) as sacct and scontrol show them.
- Kubernetes (kubernetes/kubernetes): pkg/kubelet/active_deadline.go, the Job controller's deadline, the
  scheduler's preemption condition, the node lifecycle controller's NodeLost message, pkg/kubelet/eviction.
- Ray (ray-project/ray): python/ray/exceptions.py and the GCS actor manager's death causes.
- Open MPI's runtime (openpmix/prrte: src/mca/errmgr/base/help-errmgr-base.txt, src/mca/schizo/prte/help-prun.txt;
  open-mpi/ompi: ompi/mpi/help-mpi-api.txt) and MPICH's Hydra (pmodels/mpich: src/pm/hydra/mpiexec/pmiserv_cb.c).

Each entry's message is rendered as its emitter prints it inside a short, plausible excerpt; hosts, job ids and
pids are made up. Entries the taxonomy does not settle (a launcher's bare non-zero exit, MPI_ABORT, Ray's bare
ActorDiedError, the device plugin's admission errors) are left out and nothing here asserts them.
"""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

_TRAINING = """
[2024-05-01 09:58:12] step 11900 | loss 2.3141 | lr 3.00e-04 | grad_norm 0.412 | 41.2 samples/s
[2024-05-01 09:59:40] step 12000 | loss 2.3087 | lr 3.00e-04 | grad_norm 0.398 | 41.0 samples/s
[2024-05-01 09:59:41] saving checkpoint to /ckpt/run7/step_12000
"""


def _after_training(text: str) -> str:
    return _TRAINING + text


# (entry, excerpt, expected reason); the entry names the emitter's message.
CATALOGUE: list[tuple[str, str, str]] = [
    # ---------------------------------------------------------------- Slurm: the request refused
    (
        "ESLURM_ACCOUNTING_POLICY via sbatch",
        "$ sbatch --time=7-00:00:00 --gres=gpu:8 train.sh\nsbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)",
        "argument_error",
    ),
    (
        "ESLURM_INVALID_TIME_LIMIT via srun",
        "srun: error: Unable to allocate resources: Requested time limit is invalid (missing or exceeds some limit)",
        "argument_error",
    ),
    (
        "ESLURM_INVALID_NODE_COUNT via salloc",
        "salloc: error: Job submit/allocate failed: Node count specification invalid",
        "argument_error",
    ),
    (
        "ESLURM_INVALID_TASK_MEMORY at step creation",
        "srun: error: Unable to create step for job 4242: Memory required by task is not available",
        "argument_error",
    ),
    (
        "ESLURM_INVALID_QOS via sbatch",
        "sbatch: error: Batch job submission failed: Invalid qos specification",
        "argument_error",
    ),
    (
        "ESLURM_TOO_MANY_REQUESTED_CPUS via srun",
        "srun: error: Unable to allocate resources: More processors requested than permitted",
        "argument_error",
    ),
    (
        "ESLURM_INVALID_TRES via srun",
        "srun: error: Unable to allocate resources: Invalid Trackable RESource (TRES) specification",
        "argument_error",
    ),
    (
        "ESLURM_INVALID_FEATURE via salloc",
        "salloc: error: Job submit/allocate failed: Invalid feature specification",
        "argument_error",
    ),
    # covered before this catalogue by slurm-request-invalid
    (
        "ESLURM_INVALID_GRES via srun",
        "srun: error: Unable to allocate resources: Invalid generic resource (gres) specification",
        "argument_error",
    ),
    (
        "ESLURM_INVALID_ACCOUNT via sbatch",
        "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
        "argument_error",
    ),
    (
        "ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE via srun",
        "srun: error: Unable to allocate resources: Requested node configuration is not available",
        "argument_error",
    ),
    # ---------------------------------------------------------------- Slurm: the controller out of reach
    (
        "SLURM_COMMUNICATIONS_CONNECTION_ERROR via sbatch",
        "sbatch: error: Batch job submission failed: Communication connection failure",
        "network_error",
    ),
    (
        "SLURM_COMMUNICATIONS_CONNECT_TIMEOUT via srun",
        "srun: error: Unable to allocate resources: Connection timed out establishing",
        "network_error",
    ),
    (
        "SLURM_COMMUNICATIONS_RECEIVE_ERROR via squeue",
        "squeue: error: slurm_load_jobs error: Message receive failure",
        "network_error",
    ),
    # covered before this catalogue by slurm-controller-unreachable
    (
        "SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR via sbatch",
        "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
        "network_error",
    ),
    (
        "SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT via srun",
        "srun: error: Unable to allocate resources: Socket timed out on send/recv operation",
        "network_error",
    ),
    # ---------------------------------------------------------------- Slurm: how the job ended
    (
        "slurmstepd DUE TO JOB REQUEUE",
        _after_training(
            "slurmstepd: error: *** JOB 4242 ON gpu-node-03 CANCELLED AT 2024-05-01T10:00:01 DUE TO JOB REQUEUE ***"
        ),
        "preempted",
    ),
    (
        "scontrol JobState=TIMEOUT Reason=TimeLimit",
        "$ scontrol show job 4242\nJobId=4242 JobName=train\n   JobState=TIMEOUT Reason=TimeLimit Dependency=(null)\n   RunTime=2-00:00:14 TimeLimit=2-00:00:00",
        "preempted",
    ),
    (
        "sacct DEADLINE",
        "$ sacct -j 4242 -p\nJobID|JobName|Partition|Account|AllocCPUS|State|ExitCode|\n4242|train|gpu|acct-ml|64|DEADLINE|0:0|",
        "preempted",
    ),
    (
        "sacct OUT_OF_MEMORY (truncated column)",
        "$ sacct -j 4242\nJobID           JobName  Partition    Account  AllocCPUS      State ExitCode\n------------ ---------- ---------- ---------- ---------- ---------- --------\n4242              train        gpu    acct-ml         64 OUT_OF_ME+    0:125\n4242.batch        batch               acct-ml         64 OUT_OF_ME+    0:125",
        "host_oom",
    ),
    (
        "scontrol JobState=OUT_OF_MEMORY",
        "JobId=4242 JobName=train\n   JobState=OUT_OF_MEMORY Reason=OutOfMemory Dependency=(null)",
        "host_oom",
    ),
    (
        "sacct BOOT_FAIL",
        "$ sacct -j 4242\nJobID           JobName  Partition    Account  AllocCPUS      State ExitCode\n4242              train        gpu    acct-ml         64  BOOT_FAIL      0:0",
        "node_failure",
    ),
    (
        "scontrol Reason=NodeDown",
        "JobId=4242 JobName=train\n   JobState=NODE_FAIL Reason=NodeDown Dependency=(null)",
        "node_failure",
    ),
    (
        "slurmctld mail subject TIMEOUT",
        "Subject: Slurm Job_id=4242 Name=train Failed, Run time 2-00:00:14, TIMEOUT",
        "preempted",
    ),
    (
        "slurmctld mail subject OUT_OF_MEMORY",
        "Subject: Slurm Job_id=4242 Name=train Failed, Run time 00:41:07, OUT_OF_MEMORY, ExitCode 0",
        "host_oom",
    ),
    (
        "slurmctld mail subject NODE_FAIL",
        "Subject: Slurm Job_id=4242 Name=train Failed, Run time 03:12:40, NODE_FAIL",
        "node_failure",
    ),
    (
        "srun task Segmentation fault",
        _after_training("srun: error: gpu-n17: task 3: Segmentation fault (core dumped)"),
        "framework_error",
    ),
    (
        "srun task Terminated",
        _after_training("srun: error: gpu-n17: tasks 0-7: Terminated"),
        "preempted",
    ),
    (
        "kubectl describe Exit Code 143",
        "    Last State:     Terminated\n      Reason:       Error\n      Exit Code:    143\n      Started:      Wed, 01 May 2024 09:00:00 +0000\n      Finished:     Wed, 01 May 2024 10:00:01 +0000",
        "preempted",
    ),
    # covered before this catalogue (preempted, node-failure, kernel-oom-killer, memory-monitor-kill)
    (
        "slurmstepd DUE TO TIME LIMIT",
        _after_training(
            "slurmstepd: error: *** JOB 4242 ON gpu-node-03 CANCELLED AT 2024-05-03T10:00:01 DUE TO TIME LIMIT ***"
        ),
        "preempted",
    ),
    (
        "slurmstepd DUE TO PREEMPTION",
        _after_training(
            "slurmstepd: error: *** STEP 4242.0 ON gpu-node-03 CANCELLED AT 2024-05-03T10:00:01 DUE TO PREEMPTION ***"
        ),
        "preempted",
    ),
    (
        "slurmstepd DUE TO NODE FAILURE",
        _after_training(
            "slurmstepd: error: *** JOB 4242 ON gpu-node-07 CANCELLED AT 2024-06-02T03:11:52 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"
        ),
        "node_failure",
    ),
    (
        "task_cgroup_memory oom_kill events",
        _after_training(
            "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks have been OOM Killed."
        ),
        "host_oom",
    ),
    (
        "jobacct_gather exceeded memory limit",
        _after_training("slurmstepd: error: Step 4242.0 exceeded memory limit (52917772 > 20971520), being killed"),
        "host_oom",
    ),
    # ---------------------------------------------------------------- Kubernetes
    (
        "kubectl get pods OOMKilled",
        "$ kubectl get pods\nNAME               READY   STATUS      RESTARTS      AGE\ntrainer-master-0   1/1     Running     0             12m\ntrainer-worker-0   0/1     OOMKilled   3 (41s ago)   12m",
        "host_oom",
    ),
    (
        "pod JSON reason OOMKilled",
        '"lastState": {"terminated": {"containerID": "containerd://4c1f", "exitCode": 137, "reason": "OOMKilled", "startedAt": "2024-05-01T09:00:00Z"}}',
        "host_oom",
    ),
    (
        "kubelet DeadlineExceeded (activeDeadlineSeconds)",
        "Events:\n  Type     Reason            Age   From     Message\n  ----     ------            ----  ----     -------\n  Normal   Started           2h    kubelet  Started container pytorch\n  Warning  DeadlineExceeded  2m    kubelet  Pod was active on the node longer than the specified deadline",
        "preempted",
    ),
    (
        "Job controller DeadlineExceeded",
        "LAST SEEN   TYPE      REASON             OBJECT            MESSAGE\n12m         Warning   DeadlineExceeded   job/finetune-7b   Job was active longer than specified deadline",
        "preempted",
    ),
    (
        "DisruptionTarget PreemptionByScheduler",
        '  conditions:\n  - lastTransitionTime: "2024-05-01T10:00:01Z"\n    message: \'default-scheduler: preempting to accommodate a higher priority pod\'\n    reason: PreemptionByScheduler\n    status: "True"\n    type: DisruptionTarget',
        "preempted",
    ),
    (
        "node lifecycle controller NodeLost message",
        "Status:       Terminating (lasts 3m)\nReason:       NodeLost\nMessage:      Node gpu-n7 which was running pod trainer-worker-3 is unresponsive",
        "node_failure",
    ),
    (
        "kubelet eviction for a container's ephemeral storage limit",
        "Status:       Failed\nReason:       Evicted\nMessage:      Pod ephemeral local storage usage exceeds the total limit of containers 100Gi. ",
        "storage_error",
    ),
    (
        "kubelet eviction for an emptyDir's size limit",
        '  Warning  Evicted  2m  kubelet  Usage of EmptyDir volume "dshm" exceeds the limit "16Gi". ',
        "storage_error",
    ),
    # covered before this catalogue (memory-monitor-kill, preempted, node-failure)
    (
        "kubelet eviction for node memory",
        "  Warning  Evicted  3m  kubelet  The node was low on resource: memory. Threshold quantity: 100Mi, available: 81236Ki. Container pytorch was using 60512348Ki, request is 32Gi, has larger consumption of memory.",
        "host_oom",
    ),
    (
        "kubelet node shutdown",
        "Status:       Failed\nReason:       Terminated\nMessage:      Pod was terminated in response to imminent node shutdown.",
        "preempted",
    ),
    (
        "scheduler Preempted event",
        "  Normal  Preempted  1m  default-scheduler  Preempted by ml-team/high-prio-0 on node gpu-n3",
        "preempted",
    ),
    (
        "node controller NodeNotReady",
        "  Warning  NodeNotReady  5m  node-controller  Node is not ready",
        "node_failure",
    ),
    # ---------------------------------------------------------------- Ray
    (
        "GCS actor death cause NODE_OUT_OF_MEMORY",
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n\tclass_name: RayTrainWorker\n\tactor_id: d4e261d6f007000a735ae14101000000\n\tpid: 480334\nThe actor is dead because its worker process has died. Worker exit type: NODE_OUT_OF_MEMORY Worker exit detail: the memory monitor killed the worker.",
        "host_oom",
    ),
    (
        "ObjectLostError",
        "ray.exceptions.ObjectLostError: Failed to retrieve object 00ffffffffffffffffffffffffffffffffffffff0100000001000000. To see information about where this ObjectRef was created in Python, set the environment variable RAY_record_ref_creation_sites=1 during `ray start` and `ray.init()`.\n\nAll copies of 00ffffffffffffffffffffffffffffffffffffff0100000001000000 have been lost due to node failure. Check cluster logs (`/tmp/ray/session_latest/logs`) for more information about the failure.",
        "node_failure",
    ),
    (
        "NodeDiedError by its class",
        'Traceback (most recent call last):\n  File "train.py", line 88, in <module>\n    results = ray.get(refs)\nray.exceptions.NodeDiedError: (the message, which varies with Ray\'s version)',
        "node_failure",
    ),
    # covered before this catalogue (memory-monitor-kill, node-failure, ray-node-died)
    (
        "OutOfMemoryError",
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        "host_oom",
    ),
    (
        "GCS health check: marked dead",
        "The node with node id: 4c4427b6 and address: 10.4.3.95 and node name: 10.4.3.95 has been marked dead because the detector has missed too many heartbeats from it. This can happen when a \t(1) raylet crashes unexpectedly (OOM, etc.)",
        "node_failure",
    ),
    # ---------------------------------------------------------------- Open MPI / PRRTE, MPICH's Hydra
    (
        "ORTE proc-aborted-strsignal SIGKILL, one line",
        _after_training(
            "--------------------------------------------------------------------------\nmpirun noticed that process rank 5 with PID 41233 on node gpu-n07 exited on signal 9 (Killed).\n--------------------------------------------------------------------------"
        ),
        "host_oom",
    ),
    (
        "PRRTE proc-aborted-strsignal SIGKILL, wrapped",
        _after_training(
            "--------------------------------------------------------------------------\nprterun noticed that process rank 5 with PID 41233 on node gpu-n07 exited on\nsignal 9 (Killed).\n--------------------------------------------------------------------------"
        ),
        "host_oom",
    ),
    (
        "Hydra BAD TERMINATION, EXIT CODE 9",
        _after_training(
            "\n===================================================================================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 28488 RUNNING AT gpu-n07\n=   EXIT CODE: 9\n=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n==================================================================================="
        ),
        "host_oom",
    ),
    (
        "Intel MPI BAD TERMINATION, KILLED BY SIGNAL 9",
        _after_training(
            "===================================================================================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   RANK 1 PID 65033 RUNNING AT gpu-n07\n=   KILLED BY SIGNAL: 9 (Killed)\n==================================================================================="
        ),
        "host_oom",
    ),
    (
        "PRRTE proc-aborted-strsignal SIGSEGV, wrapped",
        _after_training(
            "prterun noticed that process rank 1 with PID 2214 on node gpu-n02 exited on\nsignal 11 (Segmentation fault)."
        ),
        "framework_error",
    ),
    (
        "Hydra BAD TERMINATION, EXIT CODE 139",
        _after_training(
            "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 28488 RUNNING AT gpu-n07\n=   EXIT CODE: 139\n=   CLEANING UP REMAINING PROCESSES"
        ),
        "framework_error",
    ),
    (
        "Hydra EXIT STRING Bus error",
        _after_training("YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Bus error (signal 7)"),
        "framework_error",
    ),
    (
        "ORTE proc-aborted-strsignal SIGTERM",
        _after_training(
            "mpirun noticed that process rank 0 with PID 1201 on node gpu-n01 exited on signal 15 (Terminated)."
        ),
        "preempted",
    ),
    (
        "PRRTE node-died",
        _after_training(
            "--------------------------------------------------------------------------\nPRTE has lost communication with a remote daemon.\n\n  HNP daemon   : [prterun-gpu-n01-34@0,0] on node gpu-n01\n  Remote daemon: [prterun-gpu-n01-34@0,1] on node gpu-n02\n\nThis is usually due to either a failure of the TCP network\nconnection to the node, or possibly an internal failure of\nthe daemon itself."
        ),
        "node_failure",
    ),
    (
        "ORTE node-died",
        _after_training(
            "ORTE has lost communication with a remote daemon.\n\n  HNP daemon   : [[17757,0],0] on node node1088\n  Remote daemon: [[17757,0],13] on node node1001"
        ),
        "node_failure",
    ),
    (
        "PRRTE rmaps alloc-error",
        "$ mpirun -np 16 python train.py\n--------------------------------------------------------------------------\nThere are not enough slots available in the system to satisfy the 16\nslots that were requested by the application:\n\n  python\n\nEither request fewer procs for your application, or make more slots\navailable for use.",
        "argument_error",
    ),
    (
        "PRRTE prun:exe-not-found",
        "--------------------------------------------------------------------------\nmpirun was unable to find the specified executable file, and therefore did\nnot launch the job.  This error was first reported for process rank\n0; it may have occurred for other processes as well.\n\n   Node:       gpu-n01\n   Executable: tain.py",
        "file_not_found",
    ),
    # covered before this catalogue (mpi-signal-handler)
    (
        "ORTE proc-aborted-strsignal SIGSEGV, one line",
        _after_training(
            "mpirun noticed that process rank 3 with PID 0 on node gpu-n07 exited on signal 11 (Segmentation fault)."
        ),
        "framework_error",
    ),
]


@pytest.mark.parametrize(("entry", "excerpt", "expected"), CATALOGUE, ids=[entry for entry, _, _ in CATALOGUE])
def test_catalogue_entry_gets_its_reason(entry: str, excerpt: str, expected: str) -> None:
    assert reason_of(excerpt) == expected, entry


# The entries this section added, and the rule that must answer them (not an older rule that happens to agree).
@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (
            "srun: error: Unable to allocate resources: Requested time limit is invalid (missing or exceeds some limit)",
            "emitter-cluster-slurm-request-refused",
        ),
        ("squeue: error: slurm_load_jobs error: Message receive failure", "emitter-cluster-slurm-controller-comm"),
        ("   JobState=TIMEOUT Reason=TimeLimit Dependency=(null)", "emitter-cluster-slurm-time-limit"),
        (
            "4242.batch        batch             acct-ml         64 OUT_OF_ME+    0:125",
            "emitter-cluster-slurm-out-of-memory",
        ),
        (
            "4242         train        gpu     acct-ml         64  BOOT_FAIL      0:0",
            "emitter-cluster-slurm-node-ended",
        ),
        ("trainer-worker-0   0/1     OOMKilled   3 (41s ago)   12m", "emitter-cluster-k8s-oomkilled"),
        ("Message:      Pod was active on the node longer than the specified deadline", "emitter-cluster-k8s-deadline"),
        ("    reason: PreemptionByScheduler", "emitter-cluster-k8s-preempted"),
        (
            "Message:      Node gpu-n7 which was running pod trainer-worker-3 is unresponsive",
            "emitter-cluster-k8s-node-unresponsive",
        ),
        ("Worker exit type: NODE_OUT_OF_MEMORY Worker exit detail: killed", "emitter-cluster-ray-worker-oom"),
        ("ray.exceptions.NodeDiedError: (the message, which varies)", "emitter-cluster-ray-node-died-error"),
        ('Usage of EmptyDir volume "dshm" exceeds the limit "16Gi". ', "emitter-cluster-k8s-ephemeral-storage"),
        ("=   KILLED BY SIGNAL: 9 (Killed)", "emitter-cluster-mpi-rank-killed"),
        ("=   KILLED BY SIGNAL: 11 (Segmentation fault)", "emitter-cluster-mpi-rank-crashed"),
        ("=   EXIT CODE: 15", "emitter-cluster-mpi-rank-terminated"),
        ("PRTE has lost communication with a remote daemon.", "emitter-cluster-mpi-daemon-lost"),
    ],
)
def test_new_entries_are_answered_by_this_section(text: str, rule: str) -> None:
    assert reason_and_rule(text)[1] == rule


# ---------------------------------------------------------------- what is not a failure of the run, or not this


def test_a_pod_waiting_for_gpus_is_no_reason() -> None:
    text = """
Events:
  Type     Reason            Age                From               Message
  ----     ------            ----               ----               -------
  Warning  FailedScheduling  3m (x5 over 8m)    default-scheduler  0/8 nodes are available: 2 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 6 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are available: 8 No preemption victims found for incoming pod.
"""
    assert reason_of(text) == "unknown"


def test_a_grpc_deadline_is_not_the_pod_s_wall_time_limit() -> None:
    text = "rpc error: code = DeadlineExceeded desc = context deadline exceeded"
    assert reason_of(text) != "preempted"


def test_advice_that_names_oomkilled_is_not_a_kill() -> None:
    text = (
        "Tip: if the pod shows OOMKilled in kubectl get pods, raise resources.limits.memory for the trainer container."
    )
    assert reason_of(text) == "unknown"


def test_a_pending_job_s_time_limit_reason_and_a_completed_row_are_not_an_end() -> None:
    assert reason_of("   JobState=PENDING Reason=PartitionTimeLimit Dependency=(null)") == "unknown"
    assert reason_of("4242         train        gpu     acct-ml         64  COMPLETED      0:0") == "unknown"
    assert (
        reason_of("Subject: Slurm Job_id=4242 Name=train Ended, Run time 10:00:00, COMPLETED, ExitCode 0") == "unknown"
    )
    # a training log's own word "timeout" next to numbers is not sacct's state column
    assert reason_of("NCCL_TIMEOUT set to 1800 s; step 100 loss 2.1") == "unknown"


def test_an_intended_ray_worker_exit_is_no_reason() -> None:
    text = "The actor is dead because its worker process has died. Worker exit type: INTENDED_USER_EXIT Worker exit detail: Worker exits by an user request. exit_actor() is called."
    assert reason_of(text) == "unknown"


def test_a_sigterm_after_a_crash_is_the_crash() -> None:
    # the launcher's SIGTERM to the survivors is a consequence: the rank's own segfault, reported first, says more
    text = _after_training(
        "srun: error: gpu-n17: task 3: Segmentation fault (core dumped)\nsrun: error: gpu-n17: tasks 0-2,4-7: Terminated"
    )
    assert reason_of(text) == "framework_error"


def test_a_rank_killed_after_the_scheduler_preempted_the_job_is_the_preemption() -> None:
    text = _after_training(
        "slurmstepd: error: *** STEP 4242.0 ON gpu-n07 CANCELLED AT 2024-05-03T10:00:01 DUE TO PREEMPTION ***\n"
        "mpirun noticed that process rank 5 with PID 41233 on node gpu-n07 exited on signal 9 (Killed)."
    )
    assert reason_of(text) == "preempted"


def test_a_lost_daemon_after_the_gpu_fell_off_the_bus_is_the_gpu() -> None:
    text = _after_training(
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=41233, GPU has fallen off the bus.\n"
        "ORTE has lost communication with a remote daemon."
    )
    assert reason_of(text) == "gpu_hardware"
