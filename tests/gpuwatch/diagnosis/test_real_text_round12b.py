"""Classes of misses from issue 19's twelfth round, batch B (corpus cases 1120-1143: segmentation,
detection, medical-imaging, remote-sensing and 3D-perception training repositories): a Hungarian matcher
refusing a cost matrix the model filled with non-finite numbers, PaddlePaddle's own kernel assertions and the
cuDNN error after them, Caffe's CHECK on a CUDA call that ran out of memory, and TensorFlow's gather given an
index past its table. Error messages are verbatim from the public reports named in each test; hosts, paths
and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- a matcher's non-finite cost matrix

# facebookresearch/Mask2Former#127 (case 1122): a custom dataset, 11859 iterations with ordinary losses, then
# scipy's linear_sum_assignment refuses the cost matrix built from the predictions.
_MASK2FORMER_MATCHER = """
[07/30 00:17:57] d2.utils.events INFO:  eta: 5:48:54  iter: 11859  total_loss: 45.91  loss_ce: 1.061  loss_mask: 0.1516  loss_dice: 3.623  time: 1.1627  data_time: 0.0892  lr: 0.001  max_mem: 8978M
[07/30 00:18:11] d2.engine.train_loop ERROR: Exception during training:
    raise ValueError("matrix contains invalid numeric entries")
ValueError: matrix contains invalid numeric entries
"""

# open-mmlab/mmdetection#8155 (not in the corpus): mmdet's Mask2Former head, the same refusal under scipy's
# own frame.
_MMDET_MATCHER = """
  File "/home/lyf/code/moxing-2.0/moxing/moxing/apps/third_party/mmdetection/mmdet/core/bbox/assigners/mask_hungarian_assigner.py", line 119, in assign
    matched_row_inds, matched_col_inds = linear_sum_assignment(cost)
  File "/home/lyf/anaconda3/envs/pytorch-1.8/lib/python3.7/site-packages/scipy/optimize/_lsap.py", line 100, in linear_sum_assignment
    return _lsap_module.calculate_assignment(cost_matrix)
ValueError: matrix contains invalid numeric entries
"""


def test_a_matcher_refusing_non_finite_costs_is_a_divergence() -> None:
    assert reason_and_rule(_MASK2FORMER_MATCHER) == ("loss_divergence", "matcher-non-finite")
    assert reason_of(_MMDET_MATCHER) == "loss_divergence"
    assert reason_of("ValueError: cost matrix is infeasible") == "loss_divergence"


def test_other_value_errors_keep_their_reading() -> None:
    assert reason_of("ValueError: matrix must be 2-dimensional") == "script_error"


# ---------------------------------------------------------------- PaddlePaddle's kernel assertions

# PaddlePaddle/PaddleSeg#1346 (case 1125): grey-scale labels against a model configured for other classes;
# the cross-entropy kernel asserts on the label value, then backward's cuDNN call fails.
_PADDLESEG_LABEL_ASSERT = """
Error: C:/home/workspace/Paddle_release2/paddle/fluid/operators/softmax_with_cross_entropy_op.cu:536 Assertion `labels_[idx_lbl] >= 0 && labels_[idx_lbl] < d_ || labels_[idx_lbl] == ignore_idx_` failed. The value of label[6122] expected >= 0 and < 0, or == 3,but got 0. Please check input value.
Traceback (most recent call last):
  File "PaddleSeg/train.py", line 190, in <module>
    main(args)
  File "Z:\\Member_dir\\lpt\\paddle\\PaddleSeg\\paddleseg\\core\\train.py", line 195, in train
    loss.backward()
  File "C:\\Users\\lpt\\anaconda3\\envs\\paddleSeg\\lib\\site-packages\\paddle\\fluid\\dygraph\\varbase_patch_methods.py", line 239, in backward
    framework._dygraph_tracer())
OSError: (External)  Cudnn error, CUDNN_STATUS_EXECUTION_FAILED  (at C:/home/workspace/Paddle_release2/paddle/fluid/operators/conv_cudnn_op.cu:790)
"""


def test_paddles_kernel_assertion_is_the_cause_of_the_cudnn_error_after_it() -> None:
    assert reason_and_rule(_PADDLESEG_LABEL_ASSERT) == ("framework_error", "cuda-device-assert")


def test_a_cuda_fault_without_an_assertion_before_it_stays_a_cuda_error() -> None:
    cudnn_only = _PADDLESEG_LABEL_ASSERT.split("\n", 2)[2]
    assert reason_of(cudnn_only) == "cuda_error"
    # an assertion after the fault does not make the fault its consequence
    fault_first = cudnn_only + _PADDLESEG_LABEL_ASSERT.strip().splitlines()[0] + "\n"
    assert reason_of(fault_first) == "cuda_error"


def test_a_host_assertion_in_a_cu_file_is_not_taken_for_a_kernels() -> None:
    # glibc's host-side assert quotes with `x' and puts a colon after the line number: native-assert's wording
    assert reason_of("python: /src/ops/nms.cu:88: void nms(): Assertion `n > 0' failed.") == "framework_error"


# ---------------------------------------------------------------- Caffe's CHECK: out of memory

# CMU-Perceptual-Computing-Lab/openpose_train#27 (case 1141): the report quotes the check's condition and
# error string only; a batch size of 10 did not fit a 16 GB card.
_OPENPOSE_CAFFE_OOM = """
error == cudaSuccess (2 vs. 0)  out of memory
"""


def test_caffes_cuda_check_for_out_of_memory_is_gpu_oom() -> None:
    assert reason_and_rule(_OPENPOSE_CAFFE_OOM) == ("gpu_oom", "cuda-oom")
    full = "F0226 10:41:07.481113 21873 syncedmem.cpp:71] Check failed: error == cudaSuccess (2 vs. 0)  out of memory"
    assert reason_of(full) == "gpu_oom"
    # its other error strings are still CUDA faults (case 854)
    assert (
        reason_of(
            "F1119 18:06:58.546988 14145 math_functions.cu:79] Check failed: error == cudaSuccess (4 vs. 0)  unspecified launch failure"
        )
        == "cuda_error"
    )


# ---------------------------------------------------------------- TensorFlow's gather past its table

# azuki-miho/RFCR#6 (case 1143): KPConv's TF1 trainer announces every InvalidArgumentError as "Caught a NaN
# error :"; the error is an index the input graph built.
_RFCR_GATHER = """
Start Training
**************

Caught a NaN error :
3
indices[2584,14] = 11650 is not in [0, 11650)
         [[node inputs/GatherV2 (defined at /share/home/wangyongjun/wangyongjun_tangjh/hzh/RFCR-master/KPConv_deform_Semantic3D/models/KPFCNN_model.py:83)  = GatherV2[Taxis=DT_INT32, Tindices=DT_INT32, Tparams=DT_INT32, _device="/job:localhost/replica:0/task:0/device:CPU:0"](inputs/Cast/_235, IteratorGetNext:10, optimizer/gradients/KernelPointNetwork/layer_0/resnetb_strided_2/shortcut/concat_grad/GatherV2_1/axis)]]
name: "inputs/GatherV2"
op: "GatherV2"
"""


def test_tensorflows_gather_index_out_of_range_is_the_scripts() -> None:
    assert reason_and_rule(_RFCR_GATHER) == ("script_error", "index-shape")
    assert (
        reason_of(
            "tensorflow.python.framework.errors_impl.InvalidArgumentError: indices[0,3] = -1 is not in [0, 30522)"
        )
        == "script_error"
    )
