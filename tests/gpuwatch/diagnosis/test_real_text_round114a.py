"""Classes of misses from issue 19's rounds one hundred and fourteen to one hundred and eighteen (corpus cases 4611-4735:
reports on multimodal training, tabular and recommendation models, compression and quantized training, checkpointing
and resuming, and GPU hardware and driver faults, taken as the search returned them). Error messages are verbatim from the public reports named in
each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # haotian-liu/LLaVA#1227 (case 4611): LLaVA fine-tuning: the title's lower-case 'cuda out of memory' on a line of its own
        (
            "cuda out of memory\n",
            "gpu_oom",
            "cuda-oom",
        ),
        # lm-sys/FastChat#2250 (case 4665): FastChat QLoRA: the title's 'results in CUDA Out of Memory'
        (
            "QLoRA accidentally results in CUDA Out of Memory\n",
            "gpu_oom",
            "cuda-oom",
        ),
        # dmlc/xgboost#2019 (case 4636): XGBoost's GPU plugin: a CUDA error whose source location comes before 'out of memory'
        (
            "CUDA error: build/xgboost/src/xgboost/plugin/updater_gpu/src/device_helpers.cuh(386): out of memory\n",
            "gpu_oom",
            "cuda-oom",
        ),
        # NVIDIA/cuml#1774 (case 4645): cuML's allocator: cudaMalloc failed with out of memory
        (
            "RuntimeError: Exception occured! file=/rapids/cuml/cpp/include/cuml/common/cuml_allocator.hpp line=109: FAIL: call='cudaMalloc(&ptr, n)'. Reason:out of memory\nObtained 64 stack frames\n#0 in /opt/conda/envs/rapids/lib/python3.6/site-packages/cuml/utils/pointer_utils.cpython-36m-x86_64-linux-gnu.so(_ZN8MLCommon9Exception16collectCallStackEv+0x3e) [0x7ff6e230137e]\n#1 in /opt/conda/envs/rapids/lib/python3.6/site-packages/cuml/utils/pointer_utils.cpython-36m-x86_64-linux-gnu.so(_ZN8MLCommon9ExceptionC1ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE+0x80) [0x7ff6e2301e90]\n",
            "gpu_oom",
            "cuda-oom",
        ),
        # NVIDIA-Merlin/HugeCTR#30 (case 4652): HugeCTR's general buffer out of memory
        (
            "Runtime error: out of memory /mnt/HugeCTR/HugeCTR/include/general_buffer.hpp:64\n",
            "gpu_oom",
            "cuda-oom",
        ),
        # huggingface/transformers#25100 (case 4692): FSDP warning that it could not clone a parameter because the GPU was full
        (
            "/root/zhuxuekai/anaconda3/envs/py39/lib/python3.9/site-packages/torch/distributed/fsdp/_state_dict_utils.py:312: UserWarning: Failed to clone() tensor with name _fsdp_wrapped_module.model.layers.30.mlp.down_proj.weight on rank 0. This may mean that this state_dict entry could point to invalid memory regions after returning from state_dict() call if this parameter is managed by FSDP. Please check clone implementation of _fsdp_wrapped_module.model.layers.30.mlp.down_proj.weight. Error: CUDA out of memory. Tried to allocate 172.00 MiB (GPU 0; 47.54 GiB total capacity; 45.40 GiB already allocated; 25.62 MiB free; 46.42 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF\n",
            "gpu_oom",
            "cuda-oom",
        ),
        # NVIDIA/cuml#1998 (case 4646): cuML: a device allocator's frame at the top of a native backtrace
        (
            "#2 in /opt/conda/lib/python3.7/site-packages/cuml/utils/../../../../libcuml++.so(_ZN8MLCommon22defaultDeviceAllocator8allocateEmP11CUstream_st+0x102) [0x7f3abb8fcf52]\n#3 in /opt/conda/lib/python3.7/site-packages/cuml/utils/../../../../libcuml++.so(_ZN15TemporaryMemoryIddE17LevelMemAllocatorEiifiiiib+0x1247) [0x7f3abb9af757]\n#4 in /opt/conda/lib/python3.7/site-packages/cuml/utils/../../../../libcuml++.so(_ZN2ML11rfRegressorIdE3fitERKNS_10cumlHandleEPKdiiPdRPNS_20RandomForestMetaDataIddEE+0x900) [0x7f3abbb3da60]\n#5 in /opt/conda/lib/python3.7/site-packages/cuml/utils/../../../../libcuml++.so(_ZN2ML3fitERKNS_10cumlHandleERPNS_20RandomForestMetaDataIddEEPdiiS7_NS_9RF_paramsE+0x204) [0x7f3abbb224a4]\n#6 in /opt/conda/lib/python3.7/site-packages/cuml/ensemble/randomforestregressor.cpython-37m-x86_64-linux-gnu.so(+0x28446) [0x7f3c5b291446]\n",
            "gpu_oom",
            "device-allocator-frame",
        ),
        # open-compass/VLMEvalKit#710 (case 4624): VLMEvalKit: transformers' image tokens and features that do not match
        (
            "ValueError: Image features and image tokens do not match\n",
            "framework_error",
            "vlm-image-tokens-mismatch",
        ),
        # QwenLM/Qwen3-VL#556 (case 4625): Qwen2-VL LoRA SFT: the counts given
        (
            "ValueError: Image features and image tokens do not match: tokens: 1991, features 2990\n",
            "framework_error",
            "vlm-image-tokens-mismatch",
        ),
        # lightgbm-org/LightGBM#4618 (case 4640): LightGBM's GPU learner with 71,631 features
        (
            "LightGBMError: Invalid Kernel Arguments\n",
            "cuda_error",
            "opencl-invalid-kernel-arguments",
        ),
        # lightgbm-org/LightGBM#6220 (case 4641): LightGBM's CLI on Windows
        (
            "Met Exceptions: Invalid Kernel Arguments\n",
            "cuda_error",
            "opencl-invalid-kernel-arguments",
        ),
        # catboost/catboost#407 (case 4643): CatBoost refusing a parameter by name
        (
            "_catboost.CatboostError: Invalid param `pinned_memory_size`.\n",
            "script_error",
            "caller-parameter-refused",
        ),
        # meta-pytorch/torchrec#224 (case 4649): TorchRec's DMP given an argument it does not take
        (
            "unexpected keyword argument 'static_graph'\n",
            "script_error",
            "caller-parameter-refused",
        ),
        # facebookresearch/dlrm#256 (case 4648): TorchRec's DLRM: fbgemm_gpu's library file not found
        (
            "dlrm_main/0 [0]:File fbgemm_gpu_py.so not found\ndlrm_main/0 [1]:File fbgemm_gpu_py.so not found\n",
            "import_error",
            "shared-library-file-not-found",
        ),
        # Lightning-AI/pytorch-lightning#17458 (case 4657): pytorch-forecasting under Lightning 2
        (
            "typeerror: `model` must be a `LightningModule` or `torch._dynamo.OptimizedModule`, got `TemporalFusionTransformer`\n",
            "script_error",
            "lightning-model-not-a-module",
        ),
        # hiyouga/LlamaFactory#1189 (case 4662): LLaMA-Factory: transformers' require_version line, the message cut
        (
            'File "c:\\newcode\\LLaMA-Efficient-Tuning\\src\\llmtuner\\tuner\\core\\loader.py", line 161, in load_model_and_tokenizer\nrequire_version("bitsandbytes>=0.37.0", "To fix: pip install bitsandbytes>=0.37.0")\n',
            "import_error",
            "require-version-line",
        ),
        # openvinotoolkit/nncf#355 (case 4674): NNCF's own TracedTensor
        (
            "AttributeError: 'TracedTensor' object has no attribute 'tensor_meta'\n",
            "framework_error",
            "framework-object-attribute",
        ),
        # modelscope/ms-swift#2956 (case 4686): ms-swift asking transformers' TrainerState for an attribute its version lacks
        (
            "AttributeError: 'TrainerState' object has no attribute 'last_model_checkpoint'. Did you mean: 'best_model_checkpoint'?\n",
            "framework_error",
            "framework-object-attribute",
        ),
        # marcoancona/TorchPruner#1 (case 4676): Torch-Pruner: autograd's check on a gradient's shape
        (
            "function normbackward1 returned an invalid gradient at index 0 - got [512, 120, 3, 3] but expected shape compatible with [512, 5 12, 3, 3] (validate_outputs at /pytorch/torch/csrc/autograd/engine.cpp:472)\n",
            "framework_error",
            "autograd-invalid-gradient",
        ),
        # microsoft/nni#5679 (case 4681): NNI's speed-up: torch.testing's comparison inside the library
        (
            "Comparison exception: The values for attribute 'shape' do not match: torch.Size([]) != torch.Size([1, 1, 40, 40, 2]).\n",
            "framework_error",
            "autograd-invalid-gradient",
        ),
        # axolotl-ai-cloud/axolotl#599 (case 4684): axolotl: a GPTQ model's modules dispatched to the CPU or disk
        (
            "[2023-09-18 11:25:48,695] [INFO] [axolotl.train.train:57] [PID:6348] [RANK:0] loading model and (optionally) peft_config...                                                                                                                     [2023-09-18 11:28:06,557] [ERROR] [axolotl.load_model:321] [PID:6348] [RANK:0] Exception raised attempting to load model, retrying with AutoModelForCausalLM                                                                                    [2023-09-18 11:28:06,557] [ERROR] [axolotl.load_model:324] [PID:6348] [RANK:0] Found modules on cpu/disk. Using Exllama backend requires all the modules to be on GPU.You can deactivate exllama backend by setting `disable_exllama=True` in the quantization config object                                                                                            Traceback (most recent call last):\n",
            "gpu_oom",
            "quantized-model-does-not-fit",
        ),
        # predibase/lorax#322 (case 4685): LoRAX: no kernel for the dtype
        (
            "Request failed during generation: Server error: No suitable kernel. dtype=Half\n",
            "import_error",
            "attention-kernel-not-for-this-gpu",
        ),
        # huggingface/transformers#21482 (case 4690): DeepSpeed saving a checkpoint: a Windows handle closed
        (
            "Running Trainer.train() with deepspeed throws OSError: handle is closed error when saving checkpoint\n",
            "framework_error",
            "oserror-handle-is-closed",
        ),
        # mosaicml/llm-foundry#247 (case 4693): Composer closing a checkpoint under FSDP: FSDP's state machine
        (
            "ERROR: expected to be in states [<TrainingState_.IDLE: 1>] but current state is TrainingState_.BACKWARD_PRE\n",
            "framework_error",
            "fsdp-training-state-assert",
        ),
        # hiyouga/LlamaFactory#3400 (case 4694): LLaMA-Factory saving a reward model: safetensors refusing shared tensors
        (
            "Some tensors share memory, this will lead to duplicate memory on disk and potential differences when loading them again: [{'pretrained_model.base_model.model.lm_head.weight', 'pretrained_model.base_mo\n",
            "framework_error",
            "safetensors-shared-tensors",
        ),
        # modelscope/DiffSynth-Studio#402 (case 4698): DiffSynth resuming: a checkpoint without Lightning's version key
        (
            "When I resum from the previous checkpoint, the code error message is \"KeyError: 'pytorch-lightning_version'\"\n",
            "checkpoint_load_error",
            "state-dict",
        ),
        # facebookresearch/nougat#165 (case 4702): Nougat fine-tuning: the same KeyError quoted without its colon
        (
            'KeyError "pytorch-lightning_version"\n',
            "checkpoint_load_error",
            "state-dict",
        ),
        # allenai/open-instruct#673 (case 4704): open-instruct resuming: the tail of torch.load's weights-only refusal
        (
            "[rank1]: Check the documentation of torch.load to learn more about types accepted by default with weights_only https://pytorch.org/docs/stable/generated/torch.load.html.                                                                          \n",
            "checkpoint_load_error",
            "state-dict",
        ),
        # testdotai/classifier-builder#4 (case 4714): TensorFlow reading a device's properties: CUDA error 30
        (
            "Failed to get device properties, error code: 30\n",
            "cuda_error",
            "device-properties-error",
        ),
        # NVIDIA/open-gpu-kernel-modules#1230 (case 4731): a GPU's falcon core dumped after a firmware fault
        (
            "[   84.704344] NVRM: GPU6 kflcnCoreDumpDestructive_IMPL: ICD: csr[105] = 0xffffffff93000114\n[   84.704367] NVRM: GPU6 kflcnCoreDumpDestructive_IMPL: ICD: csr[106] = 0x0000000000000003\n[   84.704881] NVRM: GPU6 kflcnCoreDumpDestructive_IMPL: ICD: csr[140] = 0xffffffffa3013970\n",
            "gpu_hardware",
            "gsp-falcon-core-dump",
        ),
        # NVIDIA/nvidia-container-runtime#138 (case 4732): a Kubernetes pod's nvidia-smi: NVML initialise failed, cut
        (
            "nvidia-smi\nNVML initialize failed: Unknow\n",
            "cuda_error",
            "nvml-init-unknown",
        ),
        # NVIDIA/nvidia-container-toolkit#1744 (case 4735): a long-running container losing its GPU, the message misspelt
        (
            "Failed to initiailize NVML: Unknown Error\n",
            "cuda_error",
            "nvml-init-unknown",
        ),
    ],
)
def test_round114_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_library_warning_stays_advice_unless_it_reports_a_failed_allocation() -> None:
    """Python warnings are still ignored, one that names a CUDA OOM too; FSDP's clone warning counts only when its
    clone failed with one."""
    advice = "/x/site-packages/accelerate/utils/memory.py:21: UserWarning: To avoid CUDA out of memory, lower the batch size\n"
    assert reason_and_rule(advice)[0] == "unknown"
    clone = (
        "/x/site-packages/torch/distributed/fsdp/_state_dict_utils.py:312: UserWarning: Failed to clone() tensor with "
        "name layer.weight on rank 0. Please check clone implementation of layer.weight. Error: expected a tensor\n"
    )
    assert reason_and_rule(clone)[0] == "unknown"


def test_flash_attentions_architecture_check_stays_the_frameworks() -> None:
    """FlashAttention's own check of the GPU's architecture is framework_error (cases 1988, 4013, 4612)."""
    assert (
        reason_and_rule("RuntimeError: Expected is_sm80 || is_sm90 to be true, but got false.\n")[0]
        == "framework_error"
    )
