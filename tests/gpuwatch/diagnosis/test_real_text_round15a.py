"""Classes of misses from issue 19's fifteenth round, batch A (corpus cases 1370-1387: image restoration and
super-resolution, re-identification, stereo and optical-flow training): losses named by their keys in a
metrics line, torch refusing to turn an infinite value into a number, an assertion that values are finite,
torch 1.0's internal assertion without "INTERNAL", torch's argument parser refusing a call, a worker's batch
that cannot grow to the next sample, a missing path without Python's errno, and an assert statement joined
to its bare exception. Error messages are verbatim from the public reports named in each test; hosts, paths
and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- losses named by their keys

# TencentARC/GFPGAN#19 (case 1381): BasicSR's progress line at 1024 px, no exception after it.
_GFPGAN_LOSSES = """
2021-07-13 16:20:56,380 INFO: [train..][epoch:  0, iter:     100, lr:(2.000e-03,)] [eta: 112 days, 17:17:33, time (data): 1.796 (0.015)] l_g_pix: inf l_p_8: nan l_p_16: nan l_p_32: nan l_p_64: nan l_p_128: nan l_p_256: nan l_p_512: inf l_p_1024: inf l_g_percep: inf l_g_style: inf l_g_gan: nan l_g_gan_left_eye: nan l_g_gan_right_eye: nan l_g_gan_mouth: nan l_g_comp_style_loss: nan l_identity: nan l_d: nan real_score: nan fake_score: nan l_d_left_eye: nan l_d_right_eye: nan l_d_mouth: nan
"""


def test_basicsr_loss_keys_at_nan_or_inf_are_a_divergence() -> None:
    assert reason_and_rule(_GFPGAN_LOSSES) == ("loss_divergence", "loss-nan")


def test_detectron2_style_loss_keys_at_nan_are_a_divergence() -> None:
    line = "[09/25 11:27:13 fastreid.utils.events]:  eta: 1:15:20  iter: 7199  total_loss: nan  loss_cls: nan  loss_triplet: 0.06894  time: 0.1920  lr: 3.50e-04"
    assert reason_of(line) == "loss_divergence"


def test_finite_loss_keys_and_a_loss_scale_are_not() -> None:
    # the same lines with numbers, as GFPGAN#19's run printed before, and a loss scale that is not a loss
    line = "2021-07-13 16:19:56,380 INFO: [train..][epoch:  0, iter:      50, lr:(2.000e-03,)] l_g_pix: 0.0078 l_p_8: 0.0619 l_d: 0.1073 real_score: 3.7570"
    assert reason_of(line) == "unknown"
    assert reason_of("step 120 | loss_scale: inf | lr 1e-4") == "unknown"


# ---------------------------------------------------------------- an infinite value made a number


# NVIDIA/flownet2-pytorch#8 (case 1384): FlowNet2 with L1Loss on Sintel, after 15 and 156 epochs.
def test_an_infinite_value_converted_to_double_is_a_divergence() -> None:
    assert reason_and_rule("Runtime Error: Value cannot be converted to type double without overflow: inf") == (
        "loss_divergence",
        "non-finite-to-number",
    )


def test_a_finite_literal_that_overflows_a_half_is_not() -> None:
    assert reason_of("RuntimeError: value cannot be converted to type at::Half without overflow: -1e+09") != (
        "loss_divergence"
    )


# ---------------------------------------------------------------- an assertion that values are finite

# princeton-vl/RAFT-Stereo#8 (case 1378): train_stereo.py's own check in sequence_loss.
_RAFT_STEREO_ASSERT = """
Traceback (most recent call last):
  File "train_stereo.py", line 267, in <module>
    train(args, timestr)
  File "train_stereo.py", line 176, in train
    loss, metrics = sequence_loss(flow_predictions, flow, valid)
  File "train_stereo.py", line 53, in sequence_loss
    assert not torch.isnan(flow_preds[i]).any() and not torch.isinf(flow_preds[i]).any()
AssertionError
"""


def test_a_bare_assertion_that_predictions_are_finite_is_a_divergence() -> None:
    assert reason_and_rule(_RAFT_STEREO_ASSERT) == ("loss_divergence", "assert-non-finite")


def test_another_bare_assertion_in_the_script_stays_the_scripts() -> None:
    text = _RAFT_STEREO_ASSERT.replace(
        "assert not torch.isnan(flow_preds[i]).any() and not torch.isinf(flow_preds[i]).any()",
        "assert flow_preds[i].shape == flow_gt.shape",
    )
    assert reason_of(text) == "script_error"


# ---------------------------------------------------------------- torch 1.0's internal assertion

# XPixelGroup/BasicSR#199 (case 1373): DDP around the frozen VGG loss; the only frame shown is the model's.
_BASICSR_REPLICAS = """
  File "/home/gpu/llp/BasicSR/codes/models/SRGAN_model.py", line 74, in __init__
    device_ids=[torch.cuda.current_device()])
RuntimeError: replicas_[0].size() >= 1 ASSERT FAILED at /pytorch/torch/csrc/distributed/c10d/reducer.cpp:53
"""


def test_torch_1_0_assert_failed_at_its_source_is_torchs_own() -> None:
    assert reason_and_rule(_BASICSR_REPLICAS) == ("framework_error", "native-abort")


# ---------------------------------------------------------------- torch's argument parser refusing a call

# NVIDIA/flownet2-pytorch#61 (case 1385): torch 0.3 raised it as a RuntimeError from its own __rsub__.
_FLOWNET2_ADD = """
File "/home/meghanabasavaraj/Desktop/Meghana/RNN/Flow/Reference/flownet2-pytorch-master/flownet2-pytorch/losses.py", line 23, in forward
    lossvalue = torch.abs(output - target).mean()
  File "/usr/local/lib/python2.7/dist-packages/torch/autograd/variable.py", line 442, in __rsub__
    return -self + other
RuntimeError: add() received an invalid combination of arguments - got (tuple), but expected one of:
 * (float other, float alpha)
 * (Variable other, float alpha)

Exception KeyError: KeyError(<weakref at 0x7f2ac6868db8; to 'tqdm' at 0x7f2ac6654990>,) in <bound method tqdm.__del__ of Training Epoch 0:   0%|                                                                      | 0/1041.0 [00:01<?, ?it/s]> ignored
"""


def test_an_invalid_combination_of_arguments_is_the_callers_wherever_raised() -> None:
    assert reason_and_rule(_FLOWNET2_ADD) == ("script_error", "call-signature")
    # Cysu/open-reid#49 (case 1377), the report's line
    assert reason_and_rule(
        "TypeError: sum received an invalid combination of arguments -got(dim=int, keepdim=bool) but expected one of   no arguments   *(int dim)"
    ) == ("script_error", "call-signature")


# ---------------------------------------------------------------- a worker's batch that cannot grow


# megvii-research/RealFlow#13 (case 1380): RAFT on RealFlow's synthesized pairs, the report's only line.
def test_a_shared_batch_that_cannot_be_resized_is_the_datas() -> None:
    assert reason_and_rule("RuntimeError: Trying to resize storage that is not resizable") == (
        "dataloader_error",
        "collate-unequal-samples",
    )


# ---------------------------------------------------------------- a missing path without errno


# XPixelGroup/BasicSR#655 (case 1374): SwinIR in BasicSR, the line as the report writes it.
def test_a_missing_path_without_errno_is_the_path() -> None:
    assert reason_and_rule("[ No such file or directory: '/home/featurize/data/DIV2K_train_HR/0430_s037.png' ]") == (
        "file_not_found",
        "file-not-found",
    )


# ---------------------------------------------------------------- an assert joined to its exception


# Adam-duan/DiT4SR#7 (case 1387): the report's quote joins the traceback's last two lines.
def test_an_assert_statement_joined_to_its_bare_exception() -> None:
    assert reason_and_rule("assert h * w == N AssertionError") == ("script_error", "assert-statement-glued")
    assert reason_and_rule(
        "assert not torch.isnan(flow_preds[i]).any() and not torch.isinf(flow_preds[i]).any() AssertionError"
    ) == ("loss_divergence", "assert-non-finite-glued")
