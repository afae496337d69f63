"""Classes of misses from issue 19's rounds two hundred and four to two hundred and seven (corpus cases 6780-6854:
GPU CFD, weather and climate codes; AMBER, NAMD and OpenMM; GPU numerical libraries in applications; C and C++
deep-learning applications; reports found by generic queries that show a printed line, taken as the search returned
them). Error messages are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # OP-DSL/OPS#54 (case 6781): the OpenACC runtime's words for CUDA error 700.
        (
            "call to cuStreamSynchronize returned error 700: Illegal address during kernel execution\ncall to cuMemFreeHost returned error 700: Illegal address during kernel execution\n",
            "cuda_error",
            "cuda-fault",
        ),
        # BLAST-WarpX/warpx#4043 (case 6784): AMReX's arena out of GPU memory.
        ("amrex::Abort::12::Out of gpu memory. Free: 589824 Asked: 8388608 !!!\n", "gpu_oom", "cuda-oom"),
        # ExtremeFLOW/neko#1088 (case 6788): Neko's device allocation.
        ("*** ERROR: Memory allocation on device failed ***\n", "gpu_oom", "cuda-oom"),
        # HuiLiuCode/CaFE_Plugin#3 (case 6802): NAMD's CUDA build without the feature.
        (
            "Reason: FATAL ERROR: Pair interaction calculation is not supported in CUDA version\n",
            "import_error",
            "library-built-without",
        ),
        # openmm/openmm#1660 (case 6803): nvcc too old for the GPU, under OpenMM's traceback.
        (
            "Exception: Error launching CUDA compiler: 256\nnvcc fatal   : Value 'sm_61' is not defined for option 'gpu-architecture'\n",
            "import_error",
            "no-kernel-image",
        ),
        # michellab/BioSimSpace#289 (case 6807): SOMD's words for a diverged integration.
        ("NaN or Inf has been generated along the simulation\n", "loss_divergence", "loss-nan"),
        # Acellera/htmd#251 (case 6810): ACEMD's.
        ("# The simulation has become unstable. Terminating to avoid lock-up\n", "loss_divergence", "loss-nan"),
        # fhh2626/BFEE3#86 (case 6811): NAMD 3 refusing options that cannot go together.
        (
            "REPLICA 1 FATAL ERROR: CUDASOA integration is incompatible with the following options:\n",
            "argument_error",
            "options-incompatible",
        ),
        # pghysels/STRUMPACK#109 (case 6820): PETSc's installation cannot do it here.
        (
            "[0]PETSC ERROR: No support for this operation on this system\n[0]PETSC ERROR: SLATE requires MPI_THREAD_MULTIPLE\n",
            "framework_error",
            "framework-own-limit",
        ),
        # Colvars/colvars#772 (case 6809): NAMD's own consistency check.
        ("FATAL ERROR: Bad global atom count! (0 vs 63307)\n", "framework_error", "framework-own-limit"),
        # Mantevo/miniMD#11 (case 6822): a device symbol the binary holds for another GPU.
        (
            "  what():  cudaMemcpyToSymbol(Kokkos::Impl::g_device_cuda_lock_arrays, &Kokkos::Impl::g_host_cuda_lock_arrays, sizeof(Kokkos::Impl::CudaLockArrays)) error( cudaErrorInvalidSymbol): invalid device symbol /scratch/ws/user-kokkos_tealeaf/kokkos/core/src/Cuda/Kokkos_Cuda_Locks.cpp:94\n",
            "import_error",
            "emitter-gpu-build-mismatch",
        ),
        # open-mmlab/mmdeploy#796 (case 6840): TensorRT's Myelin on other libraries than it was built against.
        (
            "[2022-07-22 17:00:15.990] [mmdeploy] [error] [trt_net.cpp:28] TRTNet: 1: [graphContext.h::MyelinGraphContext::24] Error Code 1: Myelin (Compiled against cuDNN 11.3.0.0 but running against cuDNN 11.2.1.0.)\n",
            "import_error",
            "emitter-gpu-build-mismatch",
        ),
        # torch/torch7#1021 (case 6830): MKL reached through another ABI.
        (
            "Intel MKL ERROR: Parameter 9 was incorrect on entry to SSYTRD.\nSegmentation fault\n",
            "import_error",
            "mkl-parameter-incorrect",
        ),
        # NVIDIA-AI-IOT/torch2trt#371 (case 6846): TensorRT 7 meeting an engine of another version.
        (
            'loadtrt: engine.cpp:868: bool nvinfer1::rt::Engine::deserialize(const void*, std::size_t, nvinfer1::IGpuAllocator&, nvinfer1::IPluginFactory*): Assertion size >= bsize && "Mismatch between allocated memory size and expected size of serialized engine."\' failed.\n',
            "checkpoint_load_error",
            "tensorrt-engine-mismatch",
        ),
        # microsoft/onnxruntime#5351 (case 6853): the provider bridge unable to load a provider's library.
        (
            "[E:onnxruntime:test, provider_bridge_ort.cc:633 onnxruntime::ProviderLibrary::ProviderLibrary] Failed to load library, error code: 126\nOrtSessionOptionsAppendExecutionProvider_Tensorrt: Failed to load shared library\n",
            "import_error",
            "onnxruntime-cuda-provider-not-loaded",
        ),
        # PaddlePaddle/Paddle#45209 (case 6852): cuDNN 8's Windows library aborting at its first use.
        (
            "0x00007FFF7138420D (cudnn64_8.dll) (QtPaddle.exe \u4e2d)\u5904\u6709\u672a\u7ecf\u5904\u7406\u7684\u5f02\u5e38: \u8bf7\u6c42\u4e86\u4e25\u91cd\u7684\u7a0b\u5e8f\u9000\u51fa\n",
            "import_error",
            "library-built-without",
        ),
    ],
)
def test_round204_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_gpu_memory_word_in_a_log_of_free_memory_is_no_failure() -> None:
    assert reason_and_rule("# NVML : 0 : Fan 33%     Temp 63C        Mem Used 1488MB Free 509MB Total 1998MB\n") == (
        "unknown",
        None,
    )


def test_an_mkl_warning_without_the_parameter_check_is_no_evidence() -> None:
    assert reason_and_rule(
        "Intel MKL WARNING: Support of Intel(R) Streaming SIMD Extensions 4.2 enabled only processors has been deprecated.\n"
    ) == ("unknown", None)
