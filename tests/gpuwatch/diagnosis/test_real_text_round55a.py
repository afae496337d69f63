"""Classes of misses from issue 19's rounds fifty-five to fifty-seven (corpus cases 2809-2833: real-time detectors
and image classification recipes; 2839-2859: self-supervised vision pretraining and text-to-video training;
2869-2892: speech synthesis, voice conversion and vocoders), with two older misses (1440, 1701). Error messages are
verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


@pytest.mark.parametrize(
    "text",
    [
        # Oscarshu0719/pytorch-StarGAN-VC2#2 (case 2890), yl4579/StyleTTS2#80 (case 2882)
        "RuntimeError: size mismatch, m1: [8 x 2], m2: [4 x 512]\n",
        "RuntimeError: Calculated padded input size per channel: (5 x 4). Kernel size: (5 x 5). Kernel size can't be greater than actual input size\n",
    ],
)
def test_torch_1x_and_convolution_input_shapes_are_the_caller_s(text: str) -> None:
    assert reason_and_rule(text) == ("script_error", "layer-input-shape")


def test_a_loss_given_a_0_dim_target_is_judged_by_the_call() -> None:
    # Levigty/EfficientNet-Pytorch#1 (case 2825)
    text = 'Traceback (most recent call last):\n  File "efficientnet_sample.py", line 120, in <module>\n    loss = criterion(outputs, labels)\n  File "D:\\\\python3.6\\\\lib\\\\site-packages\\\\torch\\\\nn\\\\functional.py", line 1867, in nll_loss\n    if input.size(0) != target.size(0):\nIndexError: dimension specified as 0 but tensor has no dimensions\n'
    assert reason_of(text) == "script_error"


def test_cublas_s_status_with_its_prefix_cut() -> None:
    # lukemelas/EfficientNet-PyTorch#294 (case 2823)
    text = "the GPU program failed to execute at /opt/conda/conda-bld/pytorch_1556653215914/work/aten/src/THC/THCBlas.cu:259\n"
    assert reason_and_rule(text) == ("cuda_error", "cuda-library-old-wording")


def test_a_module_without_a_forward_is_the_script_s() -> None:
    # lukemelas/EfficientNet-PyTorch#318 (case 2824)
    text = 'Traceback (most recent call last):\n  File "train.py", line 60, in <module>\n    outputs = model(inputs)\n  File "C:\\\\Python39\\\\lib\\\\site-packages\\\\torch\\\\nn\\\\modules\\\\module.py", line 201, in _forward_unimplemented\n    raise NotImplementedError\nNotImplementedError\n'
    assert reason_and_rule(text) == ("script_error", "module-without-forward")


def test_an_init_url_without_a_scheme_is_the_launch_s() -> None:
    # facebookresearch/moco#58 (case 2845); a scheme with no handler on the platform is left to the frame
    assert reason_and_rule("RuntimeError: No rendezvous handler for ://\n") == (
        "argument_error",
        "init-url-without-scheme",
    )
    assert reason_of("RuntimeError: No rendezvous handler for tcp://\n") != "argument_error"


@pytest.mark.parametrize(
    "text",
    [
        # PaddlePaddle/PaddleDetection#6104 (case 2818), magenta/ddsp#49 (case 2891)
        "ValueError: (InvalidArgument) Broadcast dimension mismatch. Operands could not be broadcast together with the shape of X = [1, 2100, 2] and the shape of Y = [8400, 2].\n  [operator < elementwise_add > error]\n",
        "InvalidArgumentError: 2 root error(s) found.\n  (0) Invalid argument:  Input dimension 2 must have length of at least 256 but got: 64\n",
    ],
)
def test_a_framework_s_op_error_in_its_own_format(text: str) -> None:
    assert reason_and_rule(text) == ("framework_error", "framework-op-error")


def test_a_tensorflow_out_of_memory_among_its_root_errors_is_still_memory() -> None:
    text = "ResourceExhaustedError: 2 root error(s) found.\n  (0) Resource exhausted: OOM when allocating tensor with shape[64,1024,1024] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
    assert reason_of(text) == "gpu_oom"


def test_the_shell_s_job_report_glued_to_the_output_before_it() -> None:
    # jaywalnut310/glow-tts#44 (case 2879)
    text = "7efddd583000-7efddd585000 r--p 00000000 08:05 24539630     /data/.conda/envs/glow_tts/lib/python3.6/lib-dynload/_blake2.cpython-36m-x86_64-linux-gnu.sotrain_ddi.sh: 行 5: 148887 已放弃               (核心已转储) python train.py -c $config -m $modeldir\n"
    assert reason_and_rule(text) == ("framework_error", "native-crash-reported")


def test_a_checkout_named_with_a_dash_for_a_package_without_one() -> None:
    # hpcaitech/Open-Sora#717 (case 2853): Open-Sora/opensora/
    text = "Traceback (most recent call last):\n  File \"/home/txt_vid/opensora/Open-Sora/opensora/schedulers/rf/rectified_flow.py\", line 23, in timestep_transform\n    if model_kwargs[key].dtype == torch.float16:\nKeyError: 'height'\n"
    assert reason_of(text) == "framework_error"


def test_a_project_s_vendored_mmcv_is_the_project_s_code() -> None:
    # Thinklab-SJTU/Bench2DriveZoo (case 1440, an older miss)
    text = "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"/home/cyun/b2d/Bench2DriveZoo/mmcv/models/detectors/uniad_track.py\", line 749, in simple_test_track\n[rank0]:     time_delta = timestamp - self.timestamp\n[rank0]: TypeError: unsupported operand type(s) for -: 'NoneType' and 'NoneType'\n"
    assert reason_of(text) == "script_error"
    # mmcv installed stays a framework
    installed = text.replace(
        "/home/cyun/b2d/Bench2DriveZoo/mmcv/models/detectors/uniad_track.py",
        "/opt/conda/lib/python3.8/site-packages/mmcv/runner/hooks/evaluation.py",
    )
    assert reason_of(installed) == "framework_error"


def test_a_general_purpose_library_s_refusal_goes_to_the_code_that_called_it() -> None:
    # maum-ai/wavegrad2#2 (case 2881): omegaconf's own frames between the project's code and its error
    wavegrad = 'Traceback (most recent call last):\n  File "/content/wavegrad2/dataloader.py", line 30, in load_metadata\n    if hparams.train.fine_tuning:\n  File "/usr/local/lib/python3.8/dist-packages/omegaconf/dictconfig.py", line 351, in __getattr__\n    return self._get_impl(key=key, default_value=_DEFAULT_MARKER_)\n  File "/usr/local/lib/python3.8/dist-packages/omegaconf/dictconfig.py", line 470, in _get_node\n    raise ConfigKeyError(f"Missing key {key}")\nomegaconf.errors.ConfigAttributeError: Missing key fine_tuning\n'
    assert reason_of(wavegrad) == "script_error"
    # AI4Finance-Foundation/FinRL (case 1701, an older miss): only pandas' frame kept
    finrl = "TypeError                                 Traceback (most recent call last)\n/usr/local/lib/python3.6/dist-packages/pandas/core/series.py in wrapper(self)\n--> 129         raise TypeError(f\"cannot convert the series to {converter}\")\n\nTypeError: cannot convert the series to <class 'float'>\n"
    assert reason_of(finrl) == "script_error"


def test_a_dataset_that_retries_by_recursion_until_the_depth_runs_out_is_the_data_s() -> None:
    # yxlllc/DDSP-SVC#79 (case 2884)
    text = 'Traceback (most recent call last):\n  File "D:\\\\DDSP-SVC\\\\diffusion\\\\data_loaders.py", line 204, in __getitem__\n    return self.__getitem__((file_idx + 1) % len(self.paths))\n  File "D:\\\\DDSP-SVC\\\\diffusion\\\\data_loaders.py", line 202, in __getitem__\n    if data_buffer[\'duration\'] < (self.waveform_sec + 0.1):\nRecursionError: maximum recursion depth exceeded in comparison\n'
    assert reason_and_rule(text) == ("dataloader_error", "dataset-retry-recursion")


def test_mmengine_s_registry_without_the_configured_type_is_the_configuration() -> None:
    # open-mmlab/mmselfsup#752 (case 2843)
    text = "KeyError: 'SelfSupVisualizer is not in the visualizer registry. Please check whether the value of `SelfSupVisualizer` is correct or it was registered as expected. More details can be found at https://mmengine.readthedocs.io/en/latest/advanced_tutorials/config.html#import-the-custom-module'\n"
    assert reason_and_rule(text) == ("argument_error", "unknown-named-choice")
