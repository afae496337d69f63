"""Classes of misses from issue 19's rounds seventy-nine to eighty-one (corpus cases 3501-3522: fine-tuning stacks;
3531-3553: data pipelines feeding GPU training; 3561-3582: cloud GPU platforms), with older misses they share a class
with. Error messages are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # modelscope/ms-swift#4924 (case 3503): torchrun's agents never met in the rendezvous store
        (
            "torch.distributed.DistStoreError: wait timeout after 900000ms, keys: /none/torchelastic/role_info/0, /none/torchelastic/role_info/1\n",
            "network_error",
            "dist-network",
        ),
        # huggingface/trl#3119 (case 3504): the store answered, rank 0 never published its id (as case 2646)
        (
            "[rank45]: torch.distributed.DistBackendError: [45] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after 1800000ms, keys: //worker/attempt_0/default_pg/0//1//cuda//0\n",
            "argument_error",
            "nccl-id-never-published",
        ),
        # hpcac/2023-APAC-HPC-AI#1 (case 3521): the DeepSpeed launcher's ssh check of a hostfile's hosts
        (
            "RuntimeError: Using hostfile at /home/552/u/hostfile but host=gadi-gpu-v100-0011 was not reachable via ssh. If you are running with a single node please remove /home/552/u/hostfile or setup passwordless ssh.\n",
            "network_error",
            "launcher-host-unreachable",
        ),
        # awslabs/awsome-distributed-ai#445 (case 3551): the Hub not answering a rank's download in time
        (
            " 7: [rank80]: urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. (read timeout=10)\n",
            "network_error",
            "http-connection-dropped",
        ),
        # NVIDIA/aicr#1647 (case 3570): Open MPI's daemons never started
        (
            "NCCL/NET (shim) mismatch recommended: NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=/dev/aperture_devices (expected unset)\n"
            "--------------------------------------------------------------------------\n"
            "ORTE was unable to reliably start one or more daemons.\n",
            "network_error",
            "orte-daemons-not-started",
        ),
    ],
)
def test_ranks_and_services_that_never_meet(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # huggingface/open-r1#249 (case 3508): a trainer's own check that the launch's sizes fit
        (
            "[rank1]: ValueError: The global train batch size (7 x 1) must be evenly divisible by the number of generations per prompt (8). Given the current train batch size, the valid values for the number of generations are: [7].\n",
            "argument_error",
            "batch-size-not-divisible",
        ),
        # unslothai/unsloth#724 (case 3512): a trainer that refuses a machine with several GPUs
        (
            "RuntimeError: Unsloth currently does not work on multi GPU setups - sadly we are a 2 brother team so enabling it will require much more work, so we have to prioritize. Please understand!\n",
            "argument_error",
            "launch-gpu-setup",
        ),
        # facebookresearch/ParlAI#3084 (case 3568): NCCL refusing a world size the tasks do not match
        (
            "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/../c10d/NCCLUtils.hpp:82, invalid argument, NCCL version 2.4.8\n"
            "srun: error: slurm-job-compute-0-0: tasks 2-7: Exited with exit code 1\n",
            "argument_error",
            "job-spec-refused",
        ),
        # modal-projects/training-gym#110 (case 3565): a platform refusing a feature the account lacks
        (
            "Stopping app - uncaught exception raised locally: PermissionDeniedError('RDMA is not supported on this workspace.').\n",
            "argument_error",
            "job-spec-refused",
        ),
        # case 3090 (older miss): a forced NCCL graph that names a device the VM does not have
        (
            "::16674:16674 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory\n"
            "::16674:17023 [0] NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/microsoft/ncv4/graph.xml\n"
            "::16674:17023 [0] graph/search.cc:703 NCCL WARN XML Import Channel : dev 1 not found.\n"
            "::16674:17023 [0] NCCL INFO graph/search.cc:733 -> 2\n",
            "argument_error",
            "nccl-graph-file-device-missing",
        ),
    ],
)
def test_a_launch_the_libraries_refuse(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # bitsandbytes-foundation/bitsandbytes#1559 (case 3515): a native library missing, in the loader's words
        (
            "Could not find the bitsandbytes CUDA binary at PosixPath('/notebooks/bitsandbytes/bitsandbytes/libbitsandbytes_cuda124.so')\n"
            "Could not load bitsandbytes native library: /notebooks/bitsandbytes/bitsandbytes/libbitsandbytes_cpu.so: cannot open shared object file: No such file or directory\n",
            "import_error",
            "dynamic-loader",
        ),
        # aws/deep-learning-containers#3989 (case 3569): the same quoted inside a platform's error message
        (
            'ErrorMessage "ImportError: libsmddpcpp.so: cannot open shared object file: No such file or directory\n',
            "import_error",
            "dynamic-loader",
        ),
        # case 2788 (older miss): a program's own log line naming the library it could not open
        (
            "2025-09-21 03:38:24 [23,964ms] [Error] [__main__] /workspace/code/cusadi/build/libCMM_humanoid_full_sf.so: cannot open shared object file: No such file or directory\n",
            "import_error",
            "dynamic-loader",
        ),
        # aws/aws-parallelcluster#1768 (case 3576): a node whose driver is not loaded
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n",
            "import_error",
            "driver-not-loaded",
        ),
        # case 2692 (older miss): cuDNN's frontend with no plan for the compiled graph
        (
            "allocating 359 MiB for activations\n[CUDNN ERROR] at file cudnn_att.cpp:141:\n[cudnn_frontend] Error: No execution plans built successfully.\n",
            "import_error",
            "cudnn-no-execution-plans",
        ),
    ],
)
def test_libraries_and_drivers_the_node_lacks(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_an_optional_plugin_nccl_did_not_find_is_not_evidence() -> None:
    # cases 017, 022, 026: NCCL's INFO line about its absent network plugin says nothing of a failure
    text = (
        "gpu-z04:200:200 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation\n"
        "gpu-z04:200:200 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.4<0>\n"
    )
    assert reason_of(text) == "unknown"


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # NVIDIA/DALI#1137 (case 3532): nvJPEG's allocator failing on the GPU
        (
            'RuntimeError: Critical error in pipeline: Error in thread 2: [/opt/dali/dali/pipeline/operators/decoder/nvjpeg/decoupled_api/nvjpeg_decoder_decoupled_api.h:346] NVJPEG error "5" : NVJPEG_STATUS_ALLOCATOR_FAILURE n04418357/n04418357_26036.JPEG\n',
            "gpu_oom",
            "cuda-oom",
        ),
        # NVIDIA/DALI#3160 (case 3533): nvJPEG's kernel failing, no cause of the run's
        (
            '[/opt/dali/dali/operators/decoder/nvjpeg/nvjpeg_decoder_decoupled_api.h:925] NVJPEG error "6" : NVJPEG_STATUS_EXECUTION_FAILED n02454379/n02454379_2058.JPEG\n',
            "cuda_error",
            "cuda-library-status",
        ),
        # tensorflow/models#8494 (case 3536): TF's record reader, its error nested under "root error(s) found"
        (
            "tensorflow.python.framework.errors_impl.DataLossError: 4 root error(s) found.\n"
            "  (0) Data loss:  corrupted record at 0\n"
            "\t [[{{node MultiDeviceIteratorGetNextFromShard}}]]\n"
            "  (1) Cancelled:  Function was cancelled before it was started\n",
            "dataloader_error",
            "input-pipeline-data",
        ),
        # uber/petastorm#624 and horovod/horovod#3082 (cases 3538, 3539): Petastorm's reader in its own words
        (
            "NoDataAvailableError: Number of row-groups in the dataset must be greater or equal to the number of requested shards. Otherwise, some of the shards will end up being empty.\n",
            "dataloader_error",
            "input-pipeline-data",
        ),
        (
            "[0]<stderr>:Iteration on Petastorm DataLoader raise error: RuntimeError('Trying to read a sample after a reader created by make_reader/make_batch_reader has stopped. This may happen if the make_reader/make_batch_reader context manager has exited but you try to fetch a sample from the reader.')\n",
            "dataloader_error",
            "input-pipeline-data",
        ),
        # mosaicml/streaming#689 (case 3541): streaming's shared-memory names taken by another process
        ("FileExistsError: [Errno 17] File exists: '/000006_locals'\n", "dataloader_error", "input-pipeline-data"),
        # hiyouga/LlamaFactory#6762 and case 2323 (older miss): datasets' multi-process map losing a worker
        (
            "RuntimeError: One of the subprocesses has abruptly died during map operation.To debug the error, disable multiprocessing.\n",
            "dataloader_error",
            "input-pipeline-data",
        ),
        # NVlabs/GroupViT#12 (case 3553): the DataLoader's kill, in a report's spacing
        ("RuntimeError:DataLoader worker(pid 48213) is killed by signal:killed.\n", "host_oom", "kernel-oom-killer"),
        # cases 2547, 2548 (older misses): a decomposition fed NaN by the data
        (
            "torch._C._LinAlgError: linalg.svd: (Batch element 0): The algorithm failed to converge because the input matrix contained non-finite values.\n",
            "dataloader_error",
            "input-matrix-not-finite",
        ),
    ],
)
def test_input_pipelines_in_their_own_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_an_exception_raised_in_a_data_library_is_the_data() -> None:
    # huggingface/datasets#8201 (case 3548): no tar found on one of many machines, an IndexError in the builder
    text = """[rank9]: Traceback (most recent call last):
[rank9]: File "/opt/conda/lib/python3.10/site-packages/datasets/builder.py", line 1110, in as_streaming_dataset
[rank9]: splits_generators = {sg.name: sg for sg in self._split_generators(dl_manager)}
[rank9]: File "/opt/conda/lib/python3.10/site-packages/datasets/packaged_modules/webdataset/webdataset.py", line 79, in _split_generators
[rank9]: pipeline = self._get_pipeline_from_tar(tar_paths[0], tar_iterators[0])
[rank9]: IndexError: list index out of range
"""
    assert reason_and_rule(text) == ("dataloader_error", "data-library-raised")


def test_a_missing_path_raised_in_a_data_library_keeps_its_reason() -> None:
    # the guard: a FileNotFoundError has its own reason wherever it is raised
    text = """Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/datasets/builder.py", line 1000, in _prepare_split
    with open(path) as f:
FileNotFoundError: [Errno 2] No such file or directory: '/data/train-00000.tar'
"""
    assert reason_of(text) == "file_not_found"


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # axolotl-ai-cloud/axolotl#948 (case 3510): transformers' staging directory renamed by every rank
        (
            "FileNotFoundError: [Errno 2] No such file or directory: 'model/tmp-checkpoint-49' -> 'model/checkpoint-49'\n",
            "framework_error",
            "checkpoint-staging-rename-race",
        ),
        # hiyouga/LlamaFactory#5454 (case 3546): a network file system's ECOMM under the datasets cache
        (
            "[rank1]: OSError: [Errno 70] Communication error on send: '/mnt/pfs/hf_cache/json/default-42aca40af9f2db3f/0.0.0/ab57.incomplete'\n"
            "[rank3]: FileNotFoundError: [Errno 2] Failed to open local file '/mnt/pfs/hf_cache/json/default-b15a/0.0.0/ab57/cache-1f17.arrow'. Detail: [errno 2] No such file or directory\n",
            "storage_error",
            "storage",
        ),
        # Azure/azure-storage-fuse#862 (case 3581): the platform's mount of the data store failing
        ("BFSMountError: Unable to mount blob fuse file system\n", "storage_error", "storage"),
        # azavea/raster-vision-aws#15 (case 3573): AWS Batch's account of a spot host taken back
        (
            "Job queue: gpuJobQueue\nStatus: FAILED\nStatus Reason: Host EC2 Terminated\n",
            "preempted",
            "batch-host-terminated",
        ),
        # skypilot-org/skypilot#955 (case 3572): the controller's ssh to a VM that is gone
        (
            "(sky-b7d3 pid=120832) E 07-06 19:18:16 controller.py:137] Unexpected error occurred: CommandError: Command python3 -u -c 'from sky.skylet import job_lib, log_lib' failed with return code 255.\n"
            "(sky-b7d3 pid=120832) E 07-06 19:18:16 controller.py:137] Failed to get job status.\n",
            "node_failure",
            "remote-command-unreachable",
        ),
    ],
)
def test_files_stores_and_hosts_underneath(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)
