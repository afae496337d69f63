"""Classes of misses from issue 19's rounds one hundred and three to one hundred and eight (corpus cases 4301-4472:
reports on PyTorch distributed training, scheduler-run training, LLM fine-tuning toolkits, Hugging Face training,
vision training and multi-node training, taken as the search returned them). Error messages are verbatim from the
public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # hkust-nlp/simpleRL-reason#25 (case 4340): a Ray actor's process gone without a word
        (
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n\tclass_name: ActorModelRayActorBOX\nThe actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage.\n",
            "host_oom",
            "ray-worker-vanished",
        ),
        # ray-project/ray#43265 (case 4343): the driver's re-raise of a Ray Train worker's RuntimeError, its text cut
        (
            "2024-02-21 23:04:42,647    ERROR tune_controller.py:1374 -- Trial task failed for trial TorchTrainer_a4e75_00000\nray.exceptions.RayTaskError(RuntimeError): ray::_RayTrainWorker__execute._setup_torch_process_group() (pid=426, ip=240.56.187.134, actor_id=37cded2\n",
            "framework_error",
            "ray-task-framework-exception",
        ),
        # ray-project/ray#53123 (case 4339): Python's fault handler listing the extension modules of a crashed actor
        (
            "(XGBoostTrainer pid=27215) Extension modules: psutil._psutil_linux, psutil._psutil_posix, msgpack._cmsgpack, google._upb._message, setproctitle, yaml._yaml\n",
            "framework_error",
            "native-crash-reported",
        ),
        # jkli1998/T-CAR#5 (case 4346): a native abort that only the launcher reports
        (
            "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 1 (pid: 2960901)\n",
            "framework_error",
            "native-crash-reported",
        ),
        # open-mmlab/mmdetection#7151 (case 4425): the fish shell's account of an abort
        (
            "<omitting python frames>\nfish: “python tools/train.py configs/t…” terminated by signal SIGABRT (Abort)\n",
            "framework_error",
            "native-crash-reported",
        ),
        # youngwanLEE/MPViT#17 (case 4467): torchrun's exit code written without its space
        ("torch.distributed.elastic.multiprocessing.api:failed ( exitcode:-9)\n", "host_oom", "sigkill-in-text"),
        # verl-project/verl#3521 (case 4370): the store's port that cannot be listened on, no errno given
        (
            "RuntimeError: The server socket has failed to listen on any local network address.port: 20014\n",
            "network_error",
            "port-in-use",
        ),
        # TaiMingLu/Della-Manual#2 (case 4317): a socket connect the peer's network aborted
        (
            '[rank0]: Traceback (most recent call last):\n[rank0]:   File "/home/user/VecsetV3/hy3dshape/main.py", line 203, in <module>\n...\nsocketStartConnect: ... failed : Software caused connection abort\n',
            "network_error",
            "connection-reset",
        ),
        # deepspeedai/DeepSpeed#4907 (case 4457): the launcher's ssh check of a host
        (
            "subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no 192.168.3.100 hostname' returned non-zero exit status 255.\n",
            "network_error",
            "ssh-host-check-failed",
        ),
        # aws/aws-ofi-nccl#67 (case 4459): the OFI plugin with no fit libfabric provider
        (
            "10.3.35.83: WARN: Function: find_ofi_provider Line: 543: NET/OFI Couldn't find any optimal provider\n10.3.35.83: WARN: Function: main Line: 66: NET/OFI OFI NCCL failure: 2\n",
            "network_error",
            "ofi-no-provider",
        ),
        # ljanyst/ssd-tensorflow#15 (case 4460): Windows' words for a connection reset
        (
            "ConnectionResetError: [WinError 10054] An existing connection was forcibly closed by the remote host\n",
            "network_error",
            "connection-forcibly-closed",
        ),
        # facebookresearch/maskrcnn-benchmark#699 (case 4464): an older torch's NCCL invalid argument
        (
            "RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1549635019666/work/torch/lib/c10d/ProcessGroupNCCL.cpp:388, invalid argument\n",
            "argument_error",
            "job-spec-refused",
        ),
        # Lightning-AI/pytorch-lightning#14986 (case 4465): two processes claiming one rank at NCCL's bootstrap
        (
            "hpc-25-14:18569:18835 [0] bootstrap.cc:131 NCCL WARN Bootstrap Root : rank 1 of 8 ranks has already checked in\nncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n",
            "argument_error",
            "job-spec-refused",
        ),
        # hiyouga/LlamaFactory#5769 (case 4321): a rank waiting in the store for rank 0's NCCL id, frames only
        (
            "[rank2]: frame #4: c10d::TCPStore::get(std::string const&) + 0x7a (0x7fdfeab5883a in /opt/env/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so)\n[rank2]: frame #9: c10d::ProcessGroupNCCL::broadcastUniqueNCCLID(ncclUniqueId*, bool, std::string const&, int) + 0xaf (0x7fdfb0e29b8f in /opt/env/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so)\n",
            "argument_error",
            "nccl-id-never-published",
        ),
        # horovod/horovod#2097 (case 4471): Open MPI's mapper refusing the launch
        (
            "--------------------------------------------------------------------------\nYour job failed to map. Either no mapper was available, or none\nof the available mappers was able to perform the requested\nmapping operation.\n",
            "argument_error",
            "mpi-failed-to-map",
        ),
        # facebookresearch/mae#119 (case 4332): an sbatch older than the option it was given
        (
            "sbatch: unrecognized option '--gpus-per-node=8'\nsbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n",
            "argument_error",
            "slurm-option-unrecognized",
        ),
        # pjreddie/darknet#787 (case 4430): darknet's own report of the last CUDA error
        ("CUDA Error Prev: no error\n", "cuda_error", "darknet-cuda-error"),
        # facebookresearch/video-nonlocal-net#14 (case 4436): Caffe2's enforce on an NCCL status
        (
            "[E net_dag.cc:188] Exception from operator chain starting at '' (type 'NCCLAllreduce'): caffe2::EnforceNotMet: [enforce fail at cuda_nccl_gpu.cc:24] status == ncclSuccess. 2 vs 0.  Error at: /root/code/official_caffe2/caffe2/caffe2/contrib/nccl/cuda_nccl_gpu.cc24: system error Error from operator: \n",
            "nccl_error",
            "caffe2-nccl-status",
        ),
        # unslothai/unsloth#3150 (case 4375): a CUDA error whose message was cut, under IPython's source line for another
        (
            '    172     raise RuntimeError("No executable batch size found, reached zero.")\n...\nRuntimeError: CUDA error:grep: (standard input): binary file matches\n',
            "cuda_error",
            "cuda-error-message-cut",
        ),
        # fizyr/keras-retinanet#1436 (case 4442): Keras stopping an epoch the input could not fill
        (
            "   97/10000 [..............................] - ETA: 1:08:14 - loss: 3.3150 - regression_loss: 2.4165 - classification_loss: 0.8985WARNING:tensorflow:Your input ran out of data; interrupting training. \n",
            "dataloader_error",
            "keras-input-ran-out",
        ),
        # hhaAndroid/mmdetection-mini#45 (case 4424): an operator the installed mmcv was not built with
        ("AssertionError: ca_forward miss in module _ext\n", "import_error", "mmcv-op-missing"),
        # axolotl-ai-cloud/axolotl#1571 (case 4361): a quantised model the GPU cannot hold, the message wrapped
        (
            "                    Some modules are dispatched on the CPU or the disk. Make sure you have enough GPU RAM to fit the\n                    quantized model. If you want to dispatch the model on the CPU or the disk while keeping these modules\n",
            "gpu_oom",
            "quantized-model-does-not-fit",
        ),
        # yangjianxin1/Firefly#32 (case 4456): a tokenizer file that is not JSON
        ("Exception: expected value at line 1 column 1\n", "checkpoint_load_error", "tokenizer-file-unparsable"),
        # Akegarasu/lora-scripts#128 (case 4406): PowerShell's command not found
        (
            "accelerate : The term 'accelerate' is not recognized as the name of a cmdlet, function, script file, or operable progra\n",
            "file_not_found",
            "file-not-found",
        ),
        # unslothai/unsloth#1697 (case 4380): unsloth and the installed trl out of step
        (
            "RuntimeError: Unsloth: Please file a bug report! Error patching SFTTrainer\n",
            "import_error",
            "unsloth-patch-failed",
        ),
        # tatsu-lab/stanford_alpaca#159 (case 4412): a transformers older than the model type asked for
        (
            'Traceback (most recent call last):\n  File "/data/u/stanford_alpaca/train.py", line 196, in train\n  File "/opt/env/lib/python3.10/site-packages/transformers/models/auto/configuration_auto.py", line 623, in __getitem__\n    raise KeyError(key)\nKeyError: \'llama\'\n',
            "import_error",
            "transformers-model-type-unknown",
        ),
        # NVIDIA/NeMo-Aligner#262 (case 4381): a name a framework's guarded import left undefined
        (
            'Traceback (most recent call last):\n  File "/w/NeMo-Aligner/examples/nlp/gpt/train_gpt_dpo.py", line 22, in <module>\n  File "/opt/NeMo/nemo/collections/nlp/data/language_modeling/megatron/retro_dataset.py", line 55, in <module>\n    class RETRODataset(Dataset):\nNameError: name \'RetroConfig\' is not defined\n',
            "import_error",
            "import-time-undefined-name",
        ),
    ],
)
def test_round103_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_visible_task_exception_outranks_rays_re_raise() -> None:
    """The weak reading of RayTaskError(RuntimeError) gives way to the task's own exception when it is shown."""
    text = (
        "ray.exceptions.RayTaskError(RuntimeError): ray::TrainTrainable.train() (pid=1876, ip=10.0.0.4)\n"
        'Traceback (most recent call last):\n  File "/home/u/train.py", line 40, in train_func\n    batch = data["x"]\n'
        "KeyError: 'x'\n"
    )
    assert reason_and_rule(text)[0] == "script_error"


def test_a_name_undefined_at_import_of_the_scripts_own_module_stays_the_scripts() -> None:
    """Only a framework's module failing at import reads as an installation; the script's own module is its bug."""
    text = (
        'Traceback (most recent call last):\n  File "/home/u/proj/train.py", line 3, in <module>\n'
        '  File "/home/u/proj/models.py", line 10, in <module>\n    class Net(Base):\n'
        "NameError: name 'Base' is not defined\n"
    )
    assert reason_and_rule(text)[0] == "script_error"
