"""Classes of misses from issue 19's rounds forty-six to forty-eight (corpus cases 2539-2553: video LLMs and human
motion generation; 2569-2590: document understanding and state-space models; 2599-2623: LiDAR 3D detection, stereo,
multi-view stereo and optical flow), with an older miss (1671). Error messages are verbatim from the public reports
named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# 2U1/Qwen-VL-Series-Finetune#1 (case 2545).
_ITEM = """
Traceback (most recent call last):
  File "/ai/train/Qwen2-VL-Finetune/src/training/data.py", line 181, in __getitem__
    all_pixel_values.append(inputs['pixel_values'])
  File "/ai/miniconda3/envs/qwen2/lib/python3.10/site-packages/transformers/feature_extraction_utils.py", line 87, in __getitem__
    return self.data[item]
KeyError: 'pixel_values'
"""


def test_a_key_missing_from_a_framework_s_container_is_the_caller_s() -> None:
    assert reason_of(_ITEM) == "script_error"
    # a framework's own code asking its container stays the framework's
    inside = _ITEM.replace(
        "/ai/train/Qwen2-VL-Finetune/src/training/data.py",
        "/ai/miniconda3/envs/qwen2/lib/python3.10/site-packages/transformers/trainer.py",
    )
    assert reason_of(inside) == "framework_error"


# Mael-zys/T2M-GPT#22 (case 2553): cut at torch's no_grad decorator.
_DECORATED = """
Traceback (most recent call last):
  File "/media/u/t2m-gpt/train_vq.py", line 132, in <module>
    best_fid, best_iter, best_div, best_top1, best_top2, best_top3, best_matching, writer, logger = eval_trans.evaluation_vqvae(
  File "/home/u/anaconda3/envs/onnx/lib/python3.8/site-packages/torch/autograd/grad_mode.py", line 27, in decorate_context
ValueError: Imaginary component
"""


def test_a_traceback_cut_at_torch_s_no_grad_decorator_is_judged_by_its_type() -> None:
    assert reason_of(_DECORATED) == "script_error"
    # with the decorator's call shown and a frame of torch's own under it, torch's frame decides
    deeper = _DECORATED.replace(
        "in decorate_context\n",
        'in decorate_context\n    return func(*args, **kwargs)\n  File "/home/u/anaconda3/envs/onnx/lib/python3.8/site-packages/torch/functional.py", line 99, in stft\n    return _VF.stft(input)\n',
    )
    assert reason_of(deeper) == "framework_error"


def test_a_loss_key_and_its_nan_without_a_colon() -> None:
    # state-spaces/mamba#72 (case 2587): nnU-Net's epoch log
    text = "2023-12-20 00:53:16.624225: Current learning rate: 6e-05\n2023-12-20 00:55:45.777329: train_loss nan\n2023-12-20 00:55:45.779537: val_loss -0.7908\n"
    assert reason_and_rule(text) == ("loss_divergence", "loss-nan")
    # a loss scale is not a loss
    assert reason_of("grad_loss_scale nan\n") != "loss_divergence"


def test_the_script_s_check_naming_the_option_it_needs_is_the_command_line() -> None:
    # xy-guo/MVSNet_pytorch#66 (case 2622)
    text = 'Traceback (most recent call last):\n  File "D:\\\\MVSNet_pytorch-master\\\\train.py", line 59, in <module>\n    raise ValueError("Please provide a valid train list file path using --trainlist.")\nValueError: Please provide a valid train list file path using --trainlist.\n'
    assert reason_and_rule(text) == ("argument_error", "option-asked-for")
    # an option named as advice after another failure is not the command line's (sglang's memory, case 340)
    assert reason_of("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n") == "gpu_oom"


def test_a_worker_s_descriptor_hand_over_is_the_data_pipeline_s() -> None:
    # andreaconti/multi-view-guided-multi-view-stereo#2 (case 2620)
    assert reason_and_rule("RuntimeError: received 0 items of ancdata\n") == ("dataloader_error", "loader-fd-handover")


def test_mmengine_refusing_a_config_s_training_parts_is_the_configuration() -> None:
    # open-mmlab/mmdetection3d#2744 (case 2609)
    text = "ValueError: train_dataloader, train_cfg, and optim_wrapper should be either all None or not None, but got train_dataloader=None, train_cfg={'type': 'EpochBasedTrainLoop', 'max_epochs': 12, 'val_interval': 1}, optim_wrapper={'type': 'OptimWrapper'}\n"
    assert reason_and_rule(text) == ("argument_error", "runner-config-parts")


def test_a_loss_printed_as_a_nan_tensor_by_iteration() -> None:
    # NVIDIA/waveglow (case 1671)
    text = "Epoch: 0\n0:\ttensor(nan., device='cuda:0')\n1:\ttensor(nan., device='cuda:0')\n"
    assert reason_and_rule(text) == ("loss_divergence", "loss-tensor-by-iteration")
    assert reason_of("1:\ttensor(0.5321, device='cuda:0')\n") == "unknown"


# tianweiy/CenterPoint-KITTI#32 (case 2604) and rayguan97/M3DETR#6 (case 2602).
_PCDET = """
Traceback (most recent call last):
  File "train.py", line 115, in main
    model = build_network(model_cfg=cfg.MODEL, num_class=len(cfg.CLASS_NAMES), dataset=train_set)
  File "/data/DL/3D_Detect/OpenPCDet-master/pcdet/models/detectors/__init__.py", line 25, in build_detector
    model = __all__[model_cfg.NAME](
KeyError: 'CenterPoint'
"""


def test_openpcdet_s_own_checkout_is_a_framework_and_a_fork_s_copy_is_the_fork_s() -> None:
    assert reason_of(_PCDET) == "framework_error"
    fork = _PCDET.replace("/data/DL/3D_Detect/OpenPCDet-master/pcdet/", "/home/u/M3DETR/pcdet/")
    assert reason_of(fork) == "script_error"


def test_document_and_3d_frameworks_run_from_their_checkout() -> None:
    # microsoft/unilm#337 (case 2575) and PaddlePaddle/Paddle3D#140 (case 2606)
    layoutlmft = 'Traceback (most recent call last):\n  File "project_dir/code/repos/unilm/layoutlmft/layoutlmft/models/layoutlmv2/modeling_layoutlmv2.py", line 668, in _calc_img_embeddings\n    embeddings = visual_embeddings + position_embeddings + spatial_position_embeddings\nRuntimeError: The size of tensor a (64) must match the size of tensor b (8) at non-singleton dimension 0\n'
    assert reason_of(layoutlmft) == "framework_error"
    paddle3d = "Traceback (most recent call last):\n  File \"/ssd8/wuzewu/code/Paddle3D/paddle3d/apis/trainer.py\", line 170, in __init__\n    set_lr_scheduler_iters_per_epoch(optimizer._learning_rate,\nAttributeError: 'OneCycleAdam' object has no attribute '_learning_rate'\n"
    assert reason_of(paddle3d) == "framework_error"


def test_spiking_simulators_from_their_checkout_are_frameworks() -> None:
    # BindsNET/bindsnet (case 1967) and brian-team/brian2cuda (case 1972), older misses of round 29B
    bindsnet = 'Traceback (most recent call last):\n  File "eth_no_inh_layer.py", line 169, in <module>\n    network.run(inputs=inputs, time=time)\n  File "/mnt/d/Downloads/git repos/bindsnet/bindsnet/network/__init__.py", line 200, in record\n    self.recording[var] = torch.cat([self.recording[var], data], 1)\nRuntimeError: dimension out of range (expected to be in range of [-1, 0], but got 1)\n'
    assert reason_of(bindsnet) == "framework_error"
    brian = "Traceback (most recent call last):\n  File \"/home/marcel/programming/brian2cuda/brian2cuda/device.py\", line 1560, in network_run\n    self.code_lines['before_run'].extend(lines)\nKeyError: 'before_run'\n"
    assert reason_of(brian) == "framework_error"


def test_the_mps_backend_refusing_a_dtype_is_the_framework_s() -> None:
    # atomistic-machine-learning/schnetpack (case 1551, an older miss)
    text = "TypeError: Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. Please use float32 instead.\n"
    assert reason_and_rule(text) == ("framework_error", "mps-unsupported-dtype")
