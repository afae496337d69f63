"""Classes of misses from issue 19's thirteenth round, batch C (corpus cases 1170-1203: the accelerator
stacks beside CUDA and the reference training examples people copy): zsh's own words for a native crash,
a crash backtrace in the GPU runtime's API, Apple's MPSGraph refusing an op, AWS Neuron's compiler failing,
DirectML's lost device, nccl-tests' account of a failed NCCL call, a device the runtime does not show,
cudnn.torch's numeric status, torch's device-check assertion, and kernels not built for the device in the
other stacks' words. Error messages are verbatim from the public reports named in each test; hosts, paths
and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- zsh's report of a native crash

# tensorflow/models#2435 (case 1170): the slim trainer dies after restoring its checkpoint.
_TF_MODELS_SEGFAULT = """
2017-09-22 14:27:27.145537: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1055] Creating TensorFlow device (/device:GPU:0) -> (device: 0, name: GeForce GTX 980 Ti, pci bus id: 0000:01:00.0, compute capability: 5.2)
INFO:tensorflow:Restoring parameters from /home/xxx/deep_learning/dataset/hh/20170922/models/model.ckpt
segmentation fault (core dumped)
"""

# ThilinaRajapakse/simpletransformers#1549 (case 1182): zsh writes its report over an unfinished tqdm bar.
_ZSH_BUS_ERROR_IN_BAR = """
100%|████████████████████████████████████████████████████████████████████████████████████████████████| 6/6 [00:04<00:00,  1.49it/s]
Epoch 1 of 10:   0%|                                                                                        | 0/10 [00:00<?, ?it/szsh: bus error  python:   0%|                                                                                 | 0/1 [00:00<?, ?it/s]
(deep)  % /Users/Shared/anaconda3/envs/deep/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: There appear to be 1 leaked semaphore objects to clean up at shutdown
"""


def test_zsh_segfault_in_its_own_words_is_a_native_crash() -> None:
    assert reason_and_rule(_TF_MODELS_SEGFAULT) == ("framework_error", "zsh-native-crash")


def test_zsh_bus_error_written_over_a_tqdm_bar_is_not_read_as_the_bar() -> None:
    assert reason_and_rule(_ZSH_BUS_ERROR_IN_BAR) == ("framework_error", "zsh-native-crash")


def test_zsh_killed_is_not_a_native_crash() -> None:
    assert reason_of("zsh: killed     python train.py") != "framework_error"


# ---------------------------------------------------------------- a crash in the GPU runtime's API

# ROCm/legacy-rocm-build#1777 (case 1172): distributed PyTorch on MI250X, random.
_HIP_BUS_ERROR = """
[nid005060:78213:0:78213] Caught signal 7 (Bus error: nonexistent physical address)
==== backtrace (tid:  78213) ====
 0  /lib/libucs.so.0(ucs_handle_error+0x2a4) [0x147c3982f8f4]
 4  /opt/rocm/lib/libhsa-runtime64.so.1(+0x4d42d) [0x147d6d00542d]
 8  /opt/rocm/lib/libamdhip64.so.5(+0x27e88a) [0x147d96f4688a]
 9  /opt/rocm/lib/libamdhip64.so.5(hipDeviceSynchronize+0xfd) [0x147d96d4e54d]
10  /opt/conda/lib/python3.7/site-packages/torch/lib/libtorch_hip.so(_ZN4c10d16ProcessGroupNCCL8WorkNCCL19synchronizeInternalENSt6chrono8durationIlSt5ratioILl1ELl1000EEEE+0x199) [0x147dae7f9299]
"""


def test_bus_error_in_the_hip_runtime_is_a_device_runtime_fault() -> None:
    assert reason_and_rule(_HIP_BUS_ERROR) == ("cuda_error", "gpu-runtime-crash-frames")


def test_bus_error_alone_stays_a_weak_node_failure() -> None:
    assert (
        reason_of("[gpu-j03:8801 :0:8801] Caught signal 7 (Bus error: nonexistent physical address)") == "node_failure"
    )


# ---------------------------------------------------------------- Apple's MPSGraph

# pyannote/pyannote-audio#1886 (case 1180)
_MPS_MULTIPLY = """
[error] Disposing session as kernel process died ExitCode: undefined,
Reason: (mpsFileLoc): /AppleInternal/Library/BuildRoots/1c8f7852-1ca9-11f0-b28b-226177e5bb69/Library/Caches/com.apple.xbs/Sources/MetalPerformanceShadersGraph/mpsgraph/MetalPerformanceShadersGraph/Core/Files/MPSGraphUtilities.mm:233:0:
error: 'mps.multiply' op operands don't have broadcast-compatible shapes
"""

# AssemblyAI-Community/MinImagen#16 (case 1181): the graph error, LLVM's, then zsh's abort.
_MPS_SUBTRACT = """
loc("mps_subtract"("(mpsFileLoc): /AppleInternal/Library/BuildRoots/9e200cfa-7d96-11ed-886f-a23c4f261b56/Library/Caches/com.apple.xbs/Sources/MetalPerformanceShadersGraph/mpsgraph/MetalPerformanceShadersGraph/Core/Files/MPSGraphUtilities.mm":228:0)): error: input types 'tensor<64x1xf32>' and 'tensor<64x8xsi64>' are not broadcast compatible
LLVM ERROR: Failed to infer result type(s).
zsh: abort      python train.py
"""


def test_mpsgraph_refusing_an_op_is_the_backend() -> None:
    assert reason_and_rule(_MPS_MULTIPLY) == ("framework_error", "mps-graph-error")
    assert reason_and_rule(_MPS_SUBTRACT) == ("framework_error", "mps-graph-error")


# ---------------------------------------------------------------- AWS Neuron's compiler

# aws-neuron/aws-neuron-sdk#1122 (case 1178)
_NEURON_ICE = """
2025-03-26T03:43:31Z ERROR 42759 [neuronxcc.driver.CommandDriver]:  An Internal Compiler Error has occurred
2025-03-26T03:43:31Z USER 42759 [neuronxcc.driver.CommandDriver]: Warning: Non-output memory location with no reader: {bias_memset.719}@SB<0,0>(128x2)#Internal DebugInfo: <bias_memset.719||UNDEF||[128, 1, 1]>
[NLA001]  Unhandled exception with message: === BIR error ===
Reason: Access pattern out of bound.
"""

# aws-neuron/aws-neuron-samples#94 (case 1177)
_NEURON_PARALLEL_COMPILE = """
subprocess.CalledProcessError: Command '['neuronx-cc', 'compile', '--framework=XLA', '/tmp/ubuntu/neuroncc_compile_workdir/cf1c760d-c8e8-4d30-926f-47a09e0e84a0/model.MODULE_13795660956479274162+d505a3f8.hlo_module.pb', '--output', '/tmp/ubuntu/neuroncc_compile_workdir/cf1c760d-c8e8-4d30-926f-47a09e0e84a0/model.MODULE_13795660956479274162+d505a3f8.neff', '--target=trn1', '--model-type=cnn-training', '-O1', '--enable-saturate-infinity', '--verbose=35']' returned non-zero exit status 70.
2024-12-24 11:10:32.000606:  788421  INFO ||NEURON_PARALLEL_COMPILE||: sub-process 1 got exception: None
"""


def test_neuron_compiler_failures_are_the_framework() -> None:
    assert reason_and_rule(_NEURON_ICE) == ("framework_error", "neuron-compiler-failed")
    assert reason_and_rule(_NEURON_PARALLEL_COMPILE) == ("framework_error", "neuron-compiler-failed")


# ---------------------------------------------------------------- DirectML's device

# microsoft/DirectML#287 (case 1184) and #169 (case 1183)
_DML_REMOVED = """
Epoch 1
-------------------------------
[libprotobuf FATAL D:\\a\\_work\\1\\s\\pytorch-directml\\caffe2\\dml\\dml_command_recorder.cc:392] CHECK failed: ((((HRESULT)((dml_device_->GetDeviceRemovedReason()))) >= 0)) == (true):
RuntimeError: CHECK failed: ((((HRESULT)((dml_device_->GetDeviceRemovedReason()))) >= 0)) == (true):
"""
_DML_CLOSE = """
loss: 2.452337  [    0/50000]
[libprotobuf FATAL D:\\a\\_work\\1\\s\\caffe2\\dml\\dml_command_recorder.cc:361] CHECK failed: ((((HRESULT)((current_command_list_->Close()))) >= 0)) == (true):
"""


def test_directml_device_lost_is_a_device_fault() -> None:
    assert reason_and_rule(_DML_REMOVED) == ("cuda_error", "directml-device-removed")
    assert reason_and_rule(_DML_CLOSE) == ("cuda_error", "directml-device-removed")


# ---------------------------------------------------------------- nccl-tests

# NVIDIA/nccl-tests#219 (case 1190)
_NCCL_TESTS_INTERNAL = """
#  Rank  3 Group  0 Pid 3164639 on    fengyun device  1 [0x05] NVIDIA RTX A6000
fengyun: Test NCCL failure common.cu:959 'internal error - please report this issue to the NCCL developers / '
 .. fengyun pid 3164639: Test failure common.cu:844
"""


def test_nccl_tests_failed_nccl_call_is_nccl_error() -> None:
    assert reason_and_rule(_NCCL_TESTS_INTERNAL) == ("nccl_error", "nccl-tests-failure")


# ---------------------------------------------------------------- a device the runtime does not show

# pytorch/xla#3403 (case 1187)
_XRT_NO_GPU = """
RuntimeError: tensorflow/compiler/xla/xla_client/xrt_computation_client.cc:421 : Check failed: session->session()->Run(session_work->feed_inputs, session_work->outputs_handles, &outputs) == ::tensorflow::Status::OK() (Invalid argument: Cannot assign a device for operation XRTAllocateFromTensor: {{node XRTAllocateFromTensor}} was explicitly assigned to /job:localservice/replica:0/task:0/device:XLA_GPU:0 but available devices are [ /job:localservice/replica:0/task:0/device:CPU:0, /job:localservice/replica:0/task:0/device:XLA_CPU:0 ]. Make sure the device specification refers to a valid device.
"""


def test_device_the_runtime_does_not_show_is_the_launch() -> None:
    assert reason_and_rule(_XRT_NO_GPU) == ("argument_error", "device-not-available")


# ---------------------------------------------------------------- cudnn.torch's numeric status

# XingangPan/SCNN#25 (case 1200); jcjohnson/fast-neural-style#93 (case 1199) has the same line.
_CUDNN_FIND_2 = """
=> Training epoch # 1\t

cudnnFindConvolutionBackwardDataAlgorithm failed: \t2\t convDesc=[mode : CUDNN_CROSS_CORRELATION datatype : CUDNN_DATA_FLOAT] hash=-dimA4,128,144,400 -filtA128,128,3,3 4,128,144,400 -padA1,1 -convStrideA1,1 CUDNN_DATA_FLOAT\t
/root/torch/install/bin/luajit: /root/torch/install/share/lua/5.1/nn/Container.lua:67:
In 11 module of nn.Sequential:
/root/torch/install/share/lua/5.1/cudnn/find.lua:483: cudnnFindConvolutionBackwardDataAlgorithm failed, sizes:  convDesc=[mode : CUDNN_CROSS_CORRELATION datatype : CUDNN_DATA_FLOAT] hash=-dimA4,128,144,400 -filtA128,128,3,3 4,128,144,400 -padA1,1 -convStrideA1,1 CUDNN_DATA_FLOAT
"""


def test_cudnn_torch_status_2_is_out_of_memory_and_8_a_fault() -> None:
    assert reason_and_rule(_CUDNN_FIND_2) == ("gpu_oom", "cudnn-torch-status-oom")
    assert reason_of(_CUDNN_FIND_2.replace("failed: \t2\t", "failed: \t8\t")) == "cuda_error"


# ---------------------------------------------------------------- torch's device-check assertion

# fastai/fastai#3941 (case 1193)
_FASTAI_IS_CUDA = """
RuntimeError: Exception occured in `Recorder` when calling event `after_batch`: iter.device(arg).is_cuda() INTERNAL ASSERT FAILED at "../aten/src/ATen/native/cuda/Loops.cuh":89, please report a bug to
"""


def test_device_check_assertion_is_the_scripts_placement() -> None:
    assert reason_and_rule(_FASTAI_IS_CUDA) == ("script_error", "device-check-internal-assert")


def test_other_internal_asserts_stay_the_framework() -> None:
    assert (
        reason_of(
            'RuntimeError: 0 <= device.index() && device.index() < static_cast<c10::DeviceIndex>(device_ready_queues_.size()) INTERNAL ASSERT FAILED at "/build/pytorch/torch/csrc/autograd/engine.cpp":1418'
        )
        == "framework_error"
    )


# ---------------------------------------------------------------- kernels not built for the device

# intel/intel-extension-for-pytorch#285 (case 1176)
_XPU_FP64 = """
RuntimeError: Native API failed. Native API returns: -996 (Function exists but address is not available)
invalid_kernel("uses-fp64-math")
 -996 (Function exists but address is not available)
"""

# ROCm/tensorflow-upstream#2163 (case 1203)
_TF_HIP_98 = """
Train 1
2023-07-19 22:08:36.875173: F ./tensorflow/core/util/gpu_launch_config.h:174] Check failed: err == hipSuccess (98 vs. 0)
/dockerx/test32_2.sh: line 36:    14 Aborted                 (core dumped) python3 /dockerx/test_user.py
"""


def test_kernel_not_built_for_the_device_is_an_installation_problem() -> None:
    assert reason_and_rule(_XPU_FP64) == ("import_error", "kernel-not-built-for-device")
    assert reason_and_rule(_TF_HIP_98) == ("import_error", "kernel-not-built-for-device")
    assert (
        reason_of(_TF_HIP_98.replace("(98 vs. 0)", "(209 vs. 0)").replace("hipSuccess", "cudaSuccess"))
        == "import_error"
    )
