"""Classes of misses from issue 19's eleventh round, batch A (corpus cases 1001-1034: classic computer-vision
and self-supervised training repositories): the script's shapes and placements in older torch's and in
TensorFlow's words, an attribute asked of DataParallel that only the wrapped model has, native crashes that
only the interpreter or Windows reports, python handed a path with no script in it, gloo's TCP pair losing
its peer, TensorFlow's out-of-memory exception known only by its name, and DataLoader workers that cannot
pass a batch through shared memory. Error messages are verbatim from the public reports named in each test;
hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- the script's shapes and placements


# princeton-vl/CornerNet#79 (case 1025): torch 1.0's indexing error, without the indexed tensor's
# "at index N" that later versions add, and without the exception's name.
def test_torch_1_0_mask_shape_wording_is_the_scripts_indexing() -> None:
    line = "The shape of the mask [4, 4, 128, 128] at index 1 does not match the shape of the indexed tensor [4, 80, 128, 128]"
    assert reason_of("training start...\n" + line) == "script_error"
    assert reason_of("IndexError: " + line) == "script_error"


# matterport/Mask_RCNN#2164 (case 1003): a batch of 8 split over 16 GPUs, raised at session.run.
_MASK_RCNN_SPLIT = """
Epoch 1/30
Traceback (most recent call last):
  File "/home/ubuntu/anaconda3/envs/car/lib/python3.6/site-packages/tensorflow/python/client/session.py", line 1334, in _do_call
    return fn(*args)
  File "/home/ubuntu/anaconda3/envs/car/lib/python3.6/site-packages/tensorflow/python/client/session.py", line 1407, in _call_tf_sessionrun
    run_metadata)
tensorflow.python.framework.errors_impl.InvalidArgumentError: Number of ways to split should evenly divide the split dimension, but got split_dim 0 (size = 8) and num_split 16
\t [[{{node split_2}}]]
"""


def test_tensorflow_shape_errors_are_the_scripts_graph() -> None:
    assert reason_of(_MASK_RCNN_SPLIT) == "script_error"
    # the same family in TensorFlow's other words (matterport/Mask_RCNN#1416's comment)
    assert (
        reason_of(
            "InvalidArgumentError: Input to reshape is a tensor with 600 values, but the requested shape has 4800 [[{{node tower_0_4/mask_rcnn/mrcnn_detection/Reshape_1}}]]"
        )
        == "script_error"
    )
    assert reason_of("InvalidArgumentError: Incompatible shapes: [8,10] vs. [8,12]") == "script_error"


# HRNet/HRNet-Object-Detection#40 (case 1027): torch 1.x's DDP given a model that is not on its first
# device, both ranks' tracebacks interleaved.
_HRNET_DDP = """
  File "tools/train.py", line 94, in main
    model = MMDistributedDataParallel(model.cuda())
  File "/home/by/APP/anaconda2/envs/hrnet-det/lib/python3.6/site-packages/torch/nn/parallel/distributed.py", line 217, in __init__
    logger=logger)
RuntimeError: all tensors must be on devices[0]
"""


def test_ddp_all_tensors_on_devices_0_is_the_scripts_placement() -> None:
    assert reason_of(_HRNET_DDP) == "script_error"


# tcapelle/action_recognition#23 (case 1011): fastai given a model already wrapped in DataParallel; only
# the message is in the report.
def test_an_attribute_dataparallel_hides_is_the_scripts_wrapping() -> None:
    assert reason_of("'DataParallel' object has no attribute 'encoder'") == "script_error"
    assert reason_of("AttributeError: 'DistributedDataParallel' object has no attribute 'generate'") == "script_error"
    # another object's missing attribute is not this rule's (the interpreter's message alone is
    # emitter-native-python-attribute-unnamed's)
    assert reason_and_rule("'Trainer' object has no attribute 'encoder'")[1] != "wrapper-hides-attribute"


# ---------------------------------------------------------------- native crashes

# tianzhi0549/FCOS#40 (case 1005): the interpreter aborts on its own check, then faulthandler's dump.
_FCOS_GC = """
Fatal Python error: GC object already tracked

Thread 0x00007f58161ba700 (most recent call first):

Thread 0x00007f5825cbc700 (most recent call first):
  File "/home/zzy/anaconda3/envs/FCOS/lib/python3.7/threading.py", line 296 in wait
  File "/home/zzy/anaconda3/envs/FCOS/lib/python3.7/multiprocessing/queues.py", line 224 in _feed
"""


def test_the_interpreters_other_fatal_errors_are_native_crashes() -> None:
    assert reason_of(_FCOS_GC) == "framework_error"
    # its bus error is still the node's weak evidence, not this rule's
    assert reason_of("Fatal Python error: Bus error") == "node_failure"


# AlexeyAB/darknet#1639 (case 1030) and #1143: Windows' debugger reports the access violation.
def test_windows_access_violation_report_is_a_segfault() -> None:
    assert (
        reason_of(
            "Unhandled exception at 0x000007FEF9EECAA7 (vcruntime140.dll) in darknet.exe: 0xC0000005: Access violation reading location 0x0000000000000000."
        )
        == "framework_error"
    )
    assert (
        reason_of(
            "0x000000013FC45485 处有未经处理的异常(在 darknet_no_gpu.exe 中): 0xC0000005: 读取位置 0xFFFFFFFFFFFFFFFF 时发生访问冲突。"
        )
        == "framework_error"
    )


# ---------------------------------------------------------------- paths, network, memory, workers

# tianzhi0549/FCOS#390 (case 1007): a bash-style multi-line command in Windows' shell.
_FCOS_MAIN = r"""
  warnings.warn(
C:\Users\Okunade\AppData\Local\Programs\Python\Python39\python.exe: can't find '__main__' module in 'C:\\'
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 13636) of binary: C:\Users\Okunade\AppData\Local\Programs\Python\Python39\python.exe
"""


def test_python_given_no_script_to_run_is_the_path() -> None:
    assert reason_of(_FCOS_MAIN) == "file_not_found"


# facebookresearch/deit#213 (case 1013): gloo's pair, as the user typed it.
def test_gloo_pair_closed_by_peer_is_the_network() -> None:
    assert (
        reason_of(
            "runtimeerror: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:575] connectruntclosed by peer [172.16.173.129]:23211"
        )
        == "network_error"
    )


# HenriquesLab/ZeroCostDL4Mic#140 (case 1017): only the notebook's header of TensorFlow's OOM.
_ZEROCOST_OOM = """
Done validation data preprocessing.
---------------------------------------------------------------------------
ResourceExhaustedError                    Traceback (most recent call last)
<ipython-input-8-aa8a4659be7c> in <module>()
     26 start = time.time()
---> 28 train(pretrained_model, verbose = Verbose)
"""


def test_tensorflow_resource_exhausted_by_name_is_gpu_memory() -> None:
    assert reason_of(_ZEROCOST_OOM) == "gpu_oom"
    # with a message, the message decides: a CPU allocation is the host's
    assert (
        reason_of(
            "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[64,512,512] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu"
        )
        == "host_oom"
    )


# gurkirt/realtime-action-detection#34 (case 1034): workers cannot map the batch's shared memory.
_SHM = """
  File "/usr/local/lib/python3.6/site-packages/torch/multiprocessing/reductions.py", line 113, in reduce_storage
    fd, size = storage._share_fd_()
RuntimeError: unable to write to file </torch_2378_106607550> at /pytorch/torch/lib/TH/THAllocator.c:271
"""


def test_workers_that_cannot_write_shared_memory_are_the_loaders() -> None:
    assert reason_of(_SHM) == "dataloader_error"
    assert (
        reason_of("RuntimeError: unable to open shared memory object </torch_31337_1234> in read-write mode")
        == "dataloader_error"
    )


# ---------------------------------------------------------------- a divergence, then the fault it causes

# amdegroot/ssd.pytorch#223 (case 1032): the loss jumps twelve orders of magnitude, and the same step dies
# in the loss's indexing with an illegal memory access.
_SSD_BLOWUP = """
iter 14 || Loss: 7075.6555 || timer: 0.2184 sec.
iter 15 || Loss: 11002143798693440.0000 || Traceback (most recent call last):
  File "train.py", line 172, in train
    loss_l, loss_c = criterion(out, targets)
  File "/home/kun/Software/ssd-pytorch-master/layers/modules/multibox_loss.py", line 108, in forward
    conf_p = conf_data[(pos_idx+neg_idx).gt(0)].view(-1, self.num_classes)
RuntimeError: an illegal memory access was encountered
"""


def test_a_cuda_fault_right_after_the_loss_diverged_is_the_divergences() -> None:
    assert reason_of(_SSD_BLOWUP) == "loss_divergence"
    # the loss on the line before the traceback's header, and a NaN one
    assert reason_of(_SSD_BLOWUP.replace("|| Traceback", "||\nTraceback")) == "loss_divergence"
    assert reason_of(_SSD_BLOWUP.replace("11002143798693440.0000", "nan")) == "loss_divergence"
    # an ordinary loss before the same fault leaves it a CUDA fault
    assert reason_of(_SSD_BLOWUP.replace("11002143798693440.0000", "7011.2031")) == "cuda_error"
