"""Classes of misses from issue 19's seventh round, second half (corpus cases 745-776): container
runtimes' start-up errors (enroot, pyxis, Singularity/Apptainer, docker and nvidia-container-cli), bash
without a line number, a framework's own out-of-memory wording, unpickling a class that moved, GPU page
faults in Intel's and AMD's words, NVML errors by their class names, and the CUDA libraries' old THC and
TensorFlow 1.x wordings. Error messages are verbatim from the public reports named in each test (or from
the emitter's source where said); hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from gpuwatch.diagnosis.engine import diagnose_rules
from tests.gpuwatch.diagnosis.real_text import log_source, reason_of

# ---------------------------------------------------------------- container runtimes' start-up errors

# NVIDIA/pyxis#61: enroot's switchroot cannot exec the image's shell, as pyxis copies enroot's log into
# slurmstepd's error lines.
_PYXIS_SWITCHROOT = """
pyxis: importing docker image ...
slurmstepd: error: pyxis: container start failed with error code: 1
slurmstepd: error: pyxis: printing contents of log file ...
slurmstepd: error: pyxis:     enroot-switchroot: failed to execute: /bin/bash: No such file or directory
slurmstepd: error: pyxis: couldn't start container
slurmstepd: error: spank: required plugin spank_pyxis.so: task_init() failed with rc=-1
slurmstepd: error: Failed to invoke spank plugin stack
srun: error: hpc-pg0-1: task 0: Exited with exit code 1
"""


def test_enroot_that_cannot_execute_the_images_shell_is_a_missing_file() -> None:
    assert reason_of(_PYXIS_SWITCHROOT, "slurm-1207.out") == "file_not_found"


def test_pyxis_that_cannot_make_its_runtime_directory_is_a_missing_file() -> None:
    """NVIDIA/pyxis#4: only slurmd's log says why srun's task launch failed."""
    slurmd = "[2019-09-24T10:10:06.901] [321.0] error: pyxis: couldn't mkdir /run/pyxis/100005: No such file or directory\n[2019-09-24T10:10:06.901] [321.0] error: spank: required plugin spank_pyxis.so: init_post_opt() failed with rc=-1"
    srun = "srun: job 321 has been allocated resources\nsrun: error: task 0 launch failed: Plugin initialization failed"
    d = diagnose_rules([log_source("slurmd.log", slurmd), log_source("srun.log", srun)])
    assert d.reason == "file_not_found"


@pytest.mark.parametrize(
    "line",
    [
        "/bin/bash: enroot-aufs2ovlfs: command not found",  # NVIDIA/pyxis#8: bash -c, no script line number
        "bash: nvidia-smi: command not found",
        "/usr/bin/bash: torchrun: command not found",
        "sh: torchrun: not found",
        "zsh: command not found: torchrun",
        "bash: ./train.sh: No such file or directory",
    ],
)
def test_a_shell_without_a_line_number_that_finds_no_command_is_a_missing_file(line: str) -> None:
    assert reason_of(f"[INFO] Converting whiteouts...\n{line}\n{line}", "enroot.log") == "file_not_found"


@pytest.mark.parametrize(
    "line",
    [
        # gglyptodon/helixer-docker#5: singularity --nv on a host without the NVIDIA container toolkit
        'FATAL:   container creation failed: exec: "/usr/bin/nvidia-container-cli": stat /usr/bin/nvidia-container-cli: no such file or directory',
        # Apptainer/Singularity: an image path that is not there (Go's lstat error)
        "FATAL:   could not open image /scratch/envs/train.sif: failed to retrieve path for /scratch/envs/train.sif: lstat /scratch/envs/train.sif: no such file or directory",
        # docker/runc: the container's command is not in the image
        'docker: Error response from daemon: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "python": executable file not found in $PATH: unknown.',
        'FATAL:   "python": executable file not found in $PATH',
        # a tool's own wording of ENOENT after what it could not do
        "ls: cannot access '/data/imagenet/train': No such file or directory",
    ],
)
def test_container_runtimes_missing_paths_are_missing_files(line: str) -> None:
    assert (
        reason_of(f"INFO:    Setting --writable-tmpfs (required by nvidia-container-cli)\n{line}") == "file_not_found"
    )


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        # libnvidia-container without the driver's libraries: an installation that lacks a library
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared object file: no such file or directory: unknown.",
            "import_error",
        ),
        # an image built for a newer CUDA than the host's driver: the installation does not fit
        (
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver to a newer version, or use an earlier cuda container: unknown.",
            "import_error",
        ),
        # Apptainer's own permission and storage failures keep their reasons
        (
            "FATAL:   container creation failed: mkdir /var/lib/apptainer/mnt/session/rootfs: permission denied",
            "permission_error",
        ),
        (
            "FATAL:   While making image from oci registry: error fetching image to cache: while building SIF from layers: packer failed to pack: while unpacking tmpfs: error unpacking rootfs: unpack entry: usr/lib/libcuda.so: write /tmp/rootfs-123/usr/lib/libcuda.so: no space left on device",
            "storage_error",
        ),
    ],
)
def test_container_runtimes_other_start_up_errors_keep_their_reasons(line: str, reason: str) -> None:
    assert reason_of(line) == reason


# ---------------------------------------------------------------- a framework's own out-of-memory wording

_BOLTZ = """
Running structure prediction for 1 input.
LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]
Predicting DataLoader 0:   0%|          | 0/1 [00:00<?, ?it/s]| WARNING: ran out of memory, skipping batch
Predicting DataLoader 0: 100%|██████████| 1/1 [07:08<00:00,  0.00it/s]Number of failed examples: 1
"""


def test_a_frameworks_own_out_of_memory_wording_is_the_gpus_memory_when_nothing_else_failed() -> None:
    """jwohlwend/boltz#167: boltz skips the batch and exits 0 with no structure."""
    assert reason_of(_BOLTZ, "boltz.log") == "gpu_oom"


@pytest.mark.parametrize(
    "line",
    [
        "| WARNING: ran out of memory with exception: CUDA out of memory. Tried to allocate 1.50 GiB; skipping batch",  # fairseq
        "| WARNING: ran out of memory, skipping batch",  # boltz
        "WARNING: ran out of memory, retrying batch",
        "2020-04-14 12:36:02.127: W tensorflow/core/common_runtime/bfc_allocator.cc:419] Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.00GiB (rounded to 1073741824).  Current allocation summary follows.",
        "ResourceExhaustedError: Out of memory error on GPU 0. Cannot allocate 1.250000GB memory on GPU 0, 14.750000GB memory has been allocated and available memory is only 65.937500MB.",  # PaddlePaddle
        "mxnet.base.MXNetError: [12:05:11] src/storage/./pooled_storage_manager.h:157: cudaMalloc retry failed: out of memory",
        "2019-03-08 10:22:31.201: E tensorflow/stream_executor/cuda/cuda_driver.cc:806] failed to allocate 2.00G (2147483648 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    ],
)
def test_out_of_memory_in_frameworks_words(line: str) -> None:
    assert reason_of(line) == "gpu_oom"


def test_tensorflows_allocator_note_that_is_not_a_failure_is_not_an_oom() -> None:
    """TensorFlow's BFC allocator says when a failed allocation was not a failure: the run goes on."""
    log = "2021-01-20 15:27:02.118: W tensorflow/core/common_runtime/bfc_allocator.cc:245] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.19GiB with freed_by_count=0. The caller indicates that this is not a failure, but may mean that there could be performance gains if more memory were available."
    assert reason_of(log) == "unknown"


def test_a_survived_oom_before_a_different_fatal_error_is_not_the_cause() -> None:
    log = """
Epoch 3:  12%|█▏        | 40/330 [00:31<03:44,  1.29it/s]| WARNING: ran out of memory, skipping batch
Epoch 3:  13%|█▎        | 41/330 [00:32<03:43,  1.29it/s]
Epoch 3:  14%|█▍        | 46/330 [00:36<03:40,  1.29it/s]
Traceback (most recent call last):
  File "train.py", line 88, in <module>
    main()
  File "train.py", line 70, in main
    loss = criterion(out, batch["target"])
KeyError: 'target'
"""
    assert reason_of(log) == "script_error"


# ---------------------------------------------------------------- unpickling a class that moved


def test_unpickling_a_class_this_version_lacks_is_a_checkpoint_load_error() -> None:
    """facebookresearch/habitat-challenge#184: a stored config names a class habitat-baselines renamed."""
    line = "AttributeError: Can't get attribute 'VectorEnvFactoryConfig' on <module 'habitat_baselines.config.default_structured_configs' from '/home/code/habitat-lab/habitat-baselines/habitat_baselines/config/default_structured_configs.py'>"
    assert reason_of(line) == "checkpoint_load_error"


def test_unpickling_a_class_that_moved_inside_torch_load_is_a_checkpoint_load_error() -> None:
    log = """
Traceback (most recent call last):
  File "eval.py", line 21, in <module>
    model = torch.load(args.ckpt)
  File "/opt/conda/lib/python3.10/site-packages/torch/serialization.py", line 1025, in load
    return _load(opened_zipfile, map_location, pickle_module, **pickle_load_args)
  File "/opt/conda/lib/python3.10/site-packages/torch/serialization.py", line 1438, in find_class
    return super().find_class(mod_name, name)
AttributeError: Can't get attribute 'ResNetEncoder' on <module 'models.encoder' from '/work/models/encoder.py'>
"""
    assert reason_of(log) == "checkpoint_load_error"


def test_a_spawned_worker_that_cannot_find_a_class_of_main_is_not_a_checkpoint() -> None:
    """multiprocessing's spawn (Windows, notebooks) unpickles a class defined in __main__: the script's."""
    line = "AttributeError: Can't get attribute 'MyDataset' on <module '__main__' (built-in)>"
    assert reason_of(line) == "script_error"


# ---------------------------------------------------------------- GPU page faults in other vendors' words


@pytest.mark.parametrize(
    "line",
    [
        # ACEsuit/mace#1480: Intel's compute runtime (Level Zero) on a page fault
        "Segmentation fault from GPU at 0xff00000021a2a000, ctx_id: 1 (CCS) type: 0 (NotPresent), level: 1 (PDE), access: 1 (Write), banned: 1, aborting.",
        # ROCm's HSA runtime
        "Memory access fault by GPU node-2 (Agent handle: 0x55d1e3a7c2b0) on address 0x7f1c8a200000. Reason: Page not present or supervisor privilege.",
        "RuntimeError: HIP error: an illegal memory access was encountered",
    ],
)
def test_a_gpu_page_fault_is_a_cuda_error_not_a_host_segfault(line: str) -> None:
    log = f"2026-05-16 11:07:13.552 INFO: Epoch 38: head: default, loss=0.0208\n{line}\nAbort was called at 288 line in file:\n/usr/src/intel-compute-runtime/shared/source/os_interface/linux/drm_neo.cpp"
    assert reason_of(log) == "cuda_error"


# ---------------------------------------------------------------- NVML errors by their class names

_NVML = """
Traceback (most recent call last):
  File "/home/user/miniconda3/envs/boltzgen/lib/python3.12/site-packages/pynvml.py", line 1061, in _nvmlCheckReturn
    raise NVMLError(ret)
pynvml.NVMLError_{name}: {message}
"""


@pytest.mark.parametrize(
    ("name", "message", "reason"),
    [
        ("NotSupported", "Not Supported", "framework_error"),  # HannesStark/boltzgen#11
        ("Uninitialized", "Uninitialized", "framework_error"),
        ("NoPermission", "Insufficient Permissions", "permission_error"),
        ("LibraryNotFound", "NVML Shared Library Not Found", "import_error"),
        ("GpuIsLost", "GPU is lost", "gpu_hardware"),
    ],
)
def test_nvml_errors_are_read_by_their_class_names(name: str, message: str, reason: str) -> None:
    assert reason_of(_NVML.format(name=name, message=message)) == reason


# ---------------------------------------------------------------- the CUDA libraries' older wordings


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        # agrimgupta92/sgan#37: torch's THC wording of CUBLAS_STATUS_EXECUTION_FAILED
        (
            "RuntimeError: cublas runtime error : the GPU program failed to execute at /opt/pytorch/pytorch/aten/src/THC/THCBlas.cu:258",
            "cuda_error",
        ),
        (
            "RuntimeError: cublas runtime error : an internal operation failed at /pytorch/aten/src/THC/THCBlas.cu:249",
            "cuda_error",
        ),
        (
            "RuntimeError: cublas runtime error : resource allocation failed at /pytorch/aten/src/THC/THCGeneral.cpp:250",
            "gpu_oom",
        ),
        (
            "RuntimeError: cublas runtime error : an absent device architectural feature is required at /pytorch/aten/src/THC/THCBlas.cu:441",
            "import_error",
        ),
        # DeepLabCut/DeepLabCut#1089: TensorFlow 1.x's conv op
        (
            "InternalError (see above for traceback): cuDNN launch failure : input shape([8,3,220,220]) filter shape([7,7,3,64])",
            "cuda_error",
        ),
        (
            "tensorflow.python.framework.errors_impl.InternalError: Blas SGEMM launch failed : m=2048, n=512, k=64",
            "cuda_error",
        ),
        (
            "2018-06-01 10:02:11.203: E tensorflow/stream_executor/cuda/cuda_event.cc:49] Error polling for event status: failed to query event: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered",
            "cuda_error",
        ),
        (
            "2018-06-01 10:02:11.203: F tensorflow/core/common_runtime/gpu/gpu_util.cc:300] GPU->CPU Memcpy failed: CUDA_ERROR_LAUNCH_FAILED",
            "cuda_error",
        ),
    ],
)
def test_cuda_libraries_older_wordings(line: str, reason: str) -> None:
    assert reason_of(line) == reason


# ---------------------------------------------------------------- enroot's and pyxis's own words
# (the wordings of enroot's common::err and pyxis's slurm_error calls, as pyxis copies enroot's log)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            "slurmstepd: error: pyxis:     [ERROR] No such file or directory: /lustre/images/pytorch+24.05.sqsh",
            "file_not_found",
        ),
        (
            "[ERROR] Command not found: nvidia-container-cli, see https://github.com/NVIDIA/libnvidia-container",
            "file_not_found",
        ),
        (
            "slurmstepd: error: pyxis: --container-mounts: source path does not exist: /scratch/datasets",
            "file_not_found",
        ),
        (
            "slurmstepd: error: pyxis:     [ERROR] URL https://nvcr.io/v2/nvidia/pytorch/manifests/24.13-py3 returned error code: 404 Not Found",
            "file_not_found",
        ),
        (
            "slurmstepd: error: pyxis:     [ERROR] URL https://nvcr.io/proxy_auth?scope=repository:nvidia/pytorch:pull returned error code: 401 Unauthorized",
            "permission_error",
        ),
        ("[ERROR] Not enough space left in /tmp (5242880 KB needed)", "storage_error"),
        (
            "slurmstepd: error: pyxis:     [ERROR] Invalid image reference: nvcr.io#nvidia/pytorch:24.05-py3:latest",
            "argument_error",
        ),
        ("slurmstepd: error: pyxis: --container-mounts: invalid format: /data:/data:rw:x", "argument_error"),
    ],
)
def test_enroot_and_pyxis_errors_in_their_own_words(line: str, reason: str) -> None:
    log = f"pyxis: importing docker image ...\n{line}\nslurmstepd: error: pyxis: couldn't start container\nsrun: error: gpu-node-1: task 0: Exited with exit code 1"
    assert reason_of(log, "slurm-52574.out") == reason
