"""Classes of misses from issue 19's eighteenth round (corpus cases 1500-1526: 3D generation, talking heads and
portrait animation, image editing, virtual try-on, open-vocabulary detection and grounding, pose estimation):
onnxruntime's CUDA provider that cannot be loaded, a CUDA library's status that names a bad parameter, bash's
report of a bus error, a program's warning that it caught a GPU out-of-memory and went on, and a loader that
refuses a checkpoint for safety. Error messages are verbatim from the public reports named in each test; hosts,
paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- onnxruntime's CUDA provider not loaded

# KlingAIResearch/LivePortrait#146 (case 1507): LivePortrait as a ComfyUI node on Windows.
_LIVEPORTRAIT_ORT = r"""
D:\a\_work\1\s\onnxruntime\python\onnxruntime_pybind_state.cc:891 onnxruntime::python::CreateExecutionProviderInstance CUDA_PATH is set but CUDA wasnt able to be loaded. Please install the correct version of CUDA andcuDNN as mentioned in the GPU requirements page (https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html#requirements), make sure they're in the PATH, and that your GPU is supported.

File "F:\workstation\ComfyUI-aki-v1.3.7\execution.py", line 152, in recursive_execute
output_data, output_ui = get_output_data(obj, input_data_all)
File "F:\workstation\ComfyUI-aki-v1.3.7\custom_nodes\comfyui-liveportrait\nodes\LivePortrait\src\live_portrait_pipeline.py", line 68, in __init__
self.cropper = Cropper(crop_cfg=crop_cfg,landmark_runner_ckpt=landmark_runner_ckpt,insightface_pretrained_weights=insightface_pretrained_weights)
"""


def test_onnxruntime_cuda_path_set_but_not_loaded_is_an_installation_problem() -> None:
    assert reason_and_rule(_LIVEPORTRAIT_ORT) == ("import_error", "onnxruntime-cuda-provider-not-loaded")


def test_the_same_sentence_with_its_apostrophe() -> None:
    # Fannovel16/comfyui_controlnet_aux#123 (case 1519), the DWPose preprocessor
    text = r"""
Error occurred when executing DWPreprocessor:

D:\a\_work\1\s\onnxruntime\python\onnxruntime_pybind_state.cc:743 onnxruntime::python::CreateExecutionProviderInstance CUDA_PATH is set but CUDA wasn't able to be loaded. Please install the correct version of CUDA and cuDNN as mentioned in the GPU requirements page (https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html#requirements), make sure they're in the PATH, and that your GPU is supported.
"""
    assert reason_of(text) == "import_error"


def test_the_provider_bridge_that_cannot_load_the_cuda_provider_dll() -> None:
    # Fannovel16/comfyui_controlnet_aux#254 (case 1520): the fallback and retry fail the same way
    text = r"""
DWPose: Caching ONNXRuntime session yolox_l.onnx...
2024-02-28 23:33:19.8850244 [E:onnxruntime:Default, provider_bridge_ort.cc:1480 onnxruntime::TryGetProviderInfo_CUDA] D:\a\_work\1\s\onnxruntime\core\session\provider_bridge_ort.cc:1193 onnxruntime::ProviderLibrary::Get [ONNXRuntimeError] : 1 : FAIL : LoadLibrary failed with error 126 "" when trying to load "F:\ComfyUI-independent\python_embeded\Lib\site-packages\onnxruntime\capi\onnxruntime_providers_cuda.dll"
Falling back to ['CUDAExecutionProvider', 'CPUExecutionProvider'] and retrying.
"""
    assert reason_and_rule(text) == ("import_error", "onnxruntime-cuda-provider-not-loaded")


def test_onnxruntime_s_other_errors_are_not_this_class() -> None:
    line = "[E:onnxruntime:, sequential_executor.cc:514 ExecuteKernel] Non-zero status code returned while running Conv node. Name:'Conv_41' Status Message: CUDA error cudaErrorIllegalAddress:an illegal memory access was encountered"
    assert reason_of(line) == "cuda_error"


# ---------------------------------------------------------------- cuDNN refusing a call's parameters in another runtime

# Fannovel16/comfyui_controlnet_aux#401 (case 1521): DWPose's ONNX model in onnxruntime's CUDA provider.
_DWPOSE_CUDNN_BAD_PARAM = r"""
DWPose: Using yolox_l.onnx for bbox detection and dw-ll_ucoco_384_bs5.torchscript.pt for pose estimation
!!! Exception during processing!!! [ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Conv node. Name:'Conv_41' Status Message: CUDNN failure 2000: CUDNN_STATUS_BAD_PARAM ; GPU=0 ; hostname=DESKTOP-E1A27JF ; file=D:\a\_work\1\s\onnxruntime\core\providers\cuda\nn\conv.cc ; line=467 ; expr=cudnnConvolutionForward(cudnn_handle, &alpha, s_.x_tensor, s_.x_data, s_.w_desc, s_.w_data, s_.conv_desc, s_.algo, workspace.get(), s_.workspace_bytes, &beta, s_.y_tensor, s_.y_data);
Traceback (most recent call last):
  File "E:\ComfyUI-aki-v1.3\execution.py", line 151, in recursive_execute
    output_data, output_ui = get_output_data(obj, input_data_all)
"""


def test_cudnn_bad_param_inside_onnxruntime_is_a_weak_cuda_fault() -> None:
    assert reason_and_rule(_DWPOSE_CUDNN_BAD_PARAM) == ("cuda_error", "cudnn-bad-param")


def test_a_framework_s_own_status_line_stays_the_framework_s() -> None:
    # NVIDIA/MinkowskiEngine#312 (case 838): the status in ME's words, raised from its own kernel source
    text = r"""
  File "/home/djlbet/anaconda3/envs/point/lib/python3.8/site-packages/MinkowskiEngine/sparse_matrix_functions.py", line 111, in forward
    result, COO, vals = MEB.coo_spmm_average_int32(
RuntimeError: CUSPARSE_STATUS_INVALID_VALUE at /tmp/pip-req-build-4vnh0cz8/src/spmm.cu:249
"""
    assert reason_of(text) == "framework_error"


# ---------------------------------------------------------------- bash's report of a bus error

# facebookresearch/sapiens#58 (case 1522): Sapiens lite's pose_keypoints308.sh; the last line is the report's title.
_SAPIENS_BUS_ERROR = r"""
Distributing 100 image paths into 1 jobs.
Loads checkpoint by local backend from path: /usr/share/docker/sapiens/sapiens_lite_host/torchscript/detector/checkpoints/rtmpose/rtmdet_m_8xb32-100e_coco-obj365-person-235e8209.pth
pose_keypoints308.sh: line 90: 18134 Bus error CUDA_VISIBLE_DEVICES=${VALID_GPU_IDS[GPU_ID]} python ${RUN_FILE} ${CHECKPOINT} --num_keypoints 308 --det-config ${DETECTION_CONFIG_FILE} --det-checkpoin
"""


def test_bash_s_job_report_of_a_bus_error_is_a_shell_reported_crash() -> None:
    assert reason_and_rule(_SAPIENS_BUS_ERROR) == ("framework_error", "native-crash-reported")


def test_a_worker_s_bus_error_is_still_the_data_loader_s() -> None:
    text = """
ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).
./train.sh: line 12: 40211 Bus error               (core dumped) python train.py
"""
    assert reason_of(text) == "dataloader_error"


# ---------------------------------------------------------------- an OOM the program caught and went on from

# ultralytics/ultralytics#24887 (case 1517): YOLO-World training; the kernel's assertion comes first.
_YOLO_WORLD_ASSERT_THEN_OOM_WARNING = r"""
/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:113: operator(): block: [2567,0,0], thread: [62,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.
/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:113: operator(): block: [2567,0,0], thread: [63,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.
WARNING ⚠️ CUDA OutOfMemoryError in TaskAlign
"""


def test_a_caught_oom_warning_does_not_outrank_the_kernel_assertion_before_it() -> None:
    assert reason_and_rule(_YOLO_WORLD_ASSERT_THEN_OOM_WARNING) == ("framework_error", "cuda-device-assert")


def test_the_warning_alone_is_a_weak_out_of_memory() -> None:
    assert reason_and_rule("WARNING ⚠️ CUDA OutOfMemoryError in TaskAlignedAssigner, using CPU") == (
        "gpu_oom",
        "oom-caught-warning",
    )


def test_torch_s_out_of_memory_exception_is_unchanged() -> None:
    text = """
WARNING ⚠️ CUDA OutOfMemoryError in TaskAlignedAssigner, using CPU
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.11 GiB total capacity)
"""
    assert reason_and_rule(text) == ("gpu_oom", "cuda-oom")


# ---------------------------------------------------------------- a loader that refuses a checkpoint

# OpenTalker/SadTalker#196 (case 1505): SadTalker as a Stable Diffusion web UI extension; the traceback is cut in
# the report and its last line is the report's title.
_SADTALKER_SAFE_UNPICKLE = r"""
The file may be malicious, so the program is not going to read it.
You can skip this check with --disable-safe-unpickle commandline argument.

Traceback (most recent call last):
  File "C:\Program Files\ai\stable-diffusion-webui\Matalen\lib\site-packages\gradio\routes.py", line 394, in run_predict
    output = await app.get_blocks().process_api(
  File "C:\Program Files\ai\stable-diffusion-webui\Matalen\lib\site-packages\anyio\_backends\_asyncio.py", line 867, in run
    result = context.run(func, *args)
TypeError: 'NoneType' object is not subscriptable
"""


def test_a_checkpoint_refused_as_unsafe_is_the_cause_of_the_none_after_it() -> None:
    assert reason_and_rule(_SADTALKER_SAFE_UNPICKLE) == ("checkpoint_load_error", "state-dict")
