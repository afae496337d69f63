"""Classes of misses from issue 19's rounds one hundred and eighty-seven and one hundred and eighty-eight (corpus cases
6440-6479: numerical divergence; environment mismatches found when a GPU job starts; reports found by generic queries
that show a printed line, taken as the search returned them). Error messages are verbatim from the public reports
named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule

_PREVIEW = (
    "Traceback (most recent call last):\n"
    '  File "D:\\DeepFaceLab\\mainscripts\\Trainer.py", line 288, in main\n'
    "    lh_img = models.ModelBase.get_loss_history_preview(loss_history_to_show, iter, w, c)\n"
    '  File "D:\\DeepFaceLab\\models\\ModelBase.py", line 649, in get_loss_history_preview\n'
    "    ph_max = int ( (plist_max[col][p] / plist_abs_max) * (lh_height-1) )\n"
    "ValueError: cannot convert float NaN to integer\n"
)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # iperov/DeepFaceLab#947 and #510 (cases 6442, 6444): the loss history's plot meets the NaN first.
        (_PREVIEW, "loss_divergence", "nan-in-loss-code"),
        # iperov/DeepFaceLab#517 (case 6443): its iteration line with both losses NaN.
        (
            "[13:53:35][#1406393][1314ms][0.2449][0.4413]\n[14:01:30][#1406754][1302ms][nan][nan]\n",
            "loss_divergence",
            "loss-nan",
        ),
        # AIGeeksGroup/3D-R1#16 (case 6455): the trainer's own words.
        (
            "Loss in not finite. Skip this training step.\nLoss in not finite. Terminate training.\n",
            "loss_divergence",
            "loss-nan",
        ),
        # facebookresearch/fairseq#512 (case 6452): the loss scale halved to its floor.
        (
            "| WARNING: overflow detected, setting loss scale to: 0.000244140625\n| WARNING: overflow detected, setting loss scale to: 0.0001220703125\nTraceback (most recent call last):\n",
            "loss_divergence",
            "loss-nan",
        ),
        # datquocnguyen/jointRE#7 (case 6446): DyNet's check of the gradient.
        ("RuntimeError: Magnitude of gradient is bad: -nan\n", "loss_divergence", "loss-nan"),
        # facebookresearch/Detectron#574 (case 6461): Caffe2's cuDNN version check.
        (
            "RuntimeError: [enforce fail at common_cudnn.h:108] version_match || backwards_compatible_7 || patch_compatible. cuDNN compiled (7102) and runtime (7005) versions mismatch\n",
            "import_error",
            "emitter-gpu-build-mismatch",
        ),
        # charlesq34/pointnet#82 (case 6463): TensorFlow 1's wording, with the compatibility versions.
        (
            "E tensorflow/stream_executor/cuda/cuda_dnn.cc:390] Loaded runtime CuDNN library: 6021 (compatibility version 6000) but source was compiled with 5110 (compatibility version 5100).  If using a binary install, upgrade your CuDNN library to match.\nF tensorflow/core/kernels/conv_ops.cc:605] Check failed: stream->parent()->GetConvolveAlgorithms(&algorithms)\nAborted (core dumped)\n",
            "import_error",
            "emitter-gpu-build-mismatch",
        ),
    ],
)
def test_round187_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_nan_reaching_int_outside_loss_code_stays_the_callers() -> None:
    text = _PREVIEW.replace("get_loss_history_preview", "draw_histogram")
    assert reason_and_rule(text) == ("script_error", "exception-ValueError")


def test_a_loss_scale_that_only_halves_is_no_divergence() -> None:
    assert reason_and_rule("| WARNING: overflow detected, setting loss scale to: 64.0\n| epoch 001 | loss 4.1\n") == (
        "unknown",
        None,
    )
