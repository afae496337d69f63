"""Classes of misses from issue 19's sixteenth round (corpus cases 1430-1459: graph, recommender, time-series,
diffusion-trainer, NeRF and Gaussian-splatting, self-supervised, driving-3D, TTS/vocoder and OCR training): a
CUDA kernel's own assertion that a progress line follows before the CUDA error it causes, TensorFlow's graph
assertions, and a dataset's index file that cannot be unpickled. Error messages are verbatim from the public
reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- a kernel assertion, then progress, then a CUDA error

# fatchord/WaveRNN#41 (case 1447): log.txt of train_wavernn.py; the traceback's frames are not in the report.
_WAVERNN_ASSERT = """
Loading Model: "checkpoints/9bit_mulaw/latest_weights.pyt"
/pytorch/aten/src/THCUNN/SpatialClassNLLCriterion.cu:99: void cunn_SpatialClassNLLCriterion_updateOutput_kernel(T *, T *, T *, long *, T *, int, int, int, int, int, long) [with T = float, AccumT = float]: block: [6,0,0], thread: [611,0,0] Assertion `t >= 0 && t < n_classes` failed.
/pytorch/aten/src/THCUNN/SpatialClassNLLCriterion.cu:99: void cunn_SpatialClassNLLCriterion_updateOutput_kernel(T *, T *, T *, long *, T *, int, int, int, int, int, long) [with T = float, AccumT = float]: block: [6,0,0], thread: [202,0,0] Assertion `t >= 0 && t < n_classes` failed.
| Epoch: 1/157 (345/3205) | Loss: 4.921 | 0.54 steps/s | Step: 0k | Traceback (most recent call last):
RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED
"""


def test_a_kernel_assertion_is_not_survived_by_a_progress_line_after_it() -> None:
    assert reason_and_rule(_WAVERNN_ASSERT) == ("framework_error", "cuda-device-assert")


def test_an_oom_survived_by_progress_still_gives_way_to_the_later_cuda_fault() -> None:
    # the survival rule itself is unchanged for other causes: an OOM caught and retried, then progress
    text = """
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.11 GiB total capacity)
| Epoch: 1/157 (346/3205) | Loss: 4.920 | 0.54 steps/s | Step: 0k |
RuntimeError: CUDA error: an illegal memory access was encountered
"""
    assert reason_of(text) == "cuda_error"


# ---------------------------------------------------------------- TensorFlow's graph assertions

# Rayhane-mamah/Tacotron-2#484 (case 1445): WaveNet training, TF 1.14 on a Tesla T4.
_TACOTRON_WAVENET_ASSERT = """
Generated 64 train batches of size 8 in 0.393 sec
Exiting due to exception: 2 root error(s) found.
  (0) Invalid argument: assertion failed: [] [Condition x == y did not hold element-wise:] [x (WaveNet_model/inference/strided_slice_5:0) = ] [15125] [y (WaveNet_model/inference/strided_slice_6:0) = ] [11000]
\t [[node WaveNet_model/inference/assert_equal/Assert/Assert (defined at /Tacotron-2/wavenet_vocoder/models/wavenet.py:699) ]]
\t [[WaveNet_model/clip_by_value_147/_2571]]
0 successful operations.
0 derived errors ignored.
"""


def test_a_tf_graph_assertion_is_the_programs_check() -> None:
    assert reason_and_rule(_TACOTRON_WAVENET_ASSERT) == ("script_error", "tf-graph-assertion")


def test_the_older_invalidargumenterror_wording_too() -> None:
    # Rayhane-mamah/Tacotron-2#258 (case 1446)
    line = "InvalidArgumentError (see above for traceback): assertion failed: [] [Condition x == y did not hold element-wise:] [x (model/inference/strided_slice_5:0) = ] [12032] [y (model/inference/strided_slice_6:0) = ] [12925]"
    assert reason_of(line) == "script_error"


def test_a_graph_assertion_does_not_outrank_a_later_specific_error() -> None:
    # weak: an out-of-memory in the same output still decides
    text = (
        _TACOTRON_WAVENET_ASSERT
        + "ResourceExhaustedError: OOM when allocating tensor with shape[64,2016,9,9] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
    )
    assert reason_of(text) == "gpu_oom"


def test_other_assertion_words_are_not_tfs() -> None:
    assert reason_of("assertion failed: expected 3 channels") == "unknown"


# ---------------------------------------------------------------- a dataset's index file that cannot be unpickled

# exiawsh/StreamPETR#146 (case 1438): dist_train.sh, building the training set.
_STREAMPETR_INFOS = """
Traceback (most recent call last):
  File "tools/train.py", line 225, in main
    datasets = [build_dataset(cfg.data.train)]
  File "/root/autodl-tmp/StreamPETR/mmdetection3d/mmdet3d/datasets/builder.py", line 46, in build_dataset
    dataset = build_from_cfg(cfg, MMDET_DATASETS, default_args)
  File "/root/miniconda3/lib/python3.8/site-packages/mmcv/utils/registry.py", line 72, in build_from_cfg
    raise type(e)(f'{obj_cls.__name__}: {e}')
_pickle.UnpicklingError: CustomNuScenesDataset: pickle data was truncated
"""


def test_a_dataset_whose_index_file_cannot_be_unpickled_is_the_datas() -> None:
    assert reason_and_rule(_STREAMPETR_INFOS) == ("dataloader_error", "dataset-file-unpickling")


def test_a_checkpoint_that_cannot_be_unpickled_stays_a_checkpoint_error() -> None:
    assert reason_of("_pickle.UnpicklingError: invalid load key, '\\x00'.") == "checkpoint_load_error"
    assert reason_of("_pickle.UnpicklingError: pickle data was truncated") == "checkpoint_load_error"
