"""The GPU software stack's status catalogues (rules.toml's emitter-gpu section and the rules it extends),
entry by entry, as a training log shows them.

The entries come from the emitters' own sources, not from cases: ROCm/HIP include/hip/hip_runtime_api.h
(hipError_t) and ROCm/clr hipamd/src/hip_error.cpp (hipGetErrorName / hipGetErrorString); NVIDIA/nccl
src/nccl.h.in (ncclResult_t) and src/init.cc (ncclGetErrorString); a copy of driver_types.h's cudaError enum
(machineko/SwiftCU Sources/SwiftCU/CUDATypes/CUError.swift) and a cuGetErrorName / cuGetErrorString stub
(cuda/wasi_sdk/cuda_driver_stub.c); JuliaGPU/CUDA.jl lib/{cudnn,cublas,cufft,curand,cusolver,cusparse}/src
(the libraries' status enums, cuDNN 9's sub-codes included); ROCm/HIPIFY docs/tables (the HIP libraries'
status beside each CUDA library status). Each entry's message is rendered in the form an
emitter prints it (torch's "CUDA error: X", onnxruntime's "CUDA failure N: X ; GPU=0 ; ...", NCCL's "Cuda
failure N 'X'", glog/Caffe's "Check failed: error == cudaSuccess (N vs. 0)  X", HIP's "HIP error: X", the bare
names) inside a short excerpt of a training log; hosts, paths and pids are made up. Entries the taxonomy does
not settle (device-side assert names, bad-parameter and not-supported statuses, ncclInvalidArgument,
ncclInProgress) are deliberately not here."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


def _torch(message: str) -> str:
    """``message`` as the last line of a torch training script's traceback."""
    return f"""
[2024-05-02 10:14:07,551] INFO - epoch 3 step 1200 loss 2.4713 lr 3.0e-04
Traceback (most recent call last):
  File "/workspace/train.py", line 212, in <module>
    main()
  File "/workspace/train.py", line 187, in main
    loss.backward()
{message}
"""


def _native(message: str) -> str:
    """``message`` as a line of a native trainer's or library's log, after a few progress lines."""
    return f"""
I0502 10:14:07.551203 18231 solver.cpp:243] Iteration 1200, loss = 2.4713
I0502 10:14:07.551288 18231 solver.cpp:259]     Train net output #0: loss = 2.4713 (* 1 = 2.4713 loss)
I0502 10:14:09.102771 18231 sgd_solver.cpp:138] Iteration 1200, lr = 0.0003
{message}
"""


def _ort(status: str, expr: str = "cudaStreamSynchronize(stream)") -> str:
    """onnxruntime's CUDA provider's status line, as its CUDA_CALL macros print it."""
    return _native(
        f"2024-05-02 10:14:09.881 [E:onnxruntime:, sequential_executor.cc:514 ExecuteKernel] Non-zero status code "
        f"returned while running Conv node. Name:'/backbone/conv1/Conv' Status Message: {status} ; GPU=0 ; "
        f"hostname=gpu-node-07 ; file=/onnxruntime_src/onnxruntime/core/providers/cuda/cuda_call.cc ; line=121 ; expr={expr};"
    )


def _nccl(message: str) -> str:
    """``message`` after NCCL's own prefix (host:pid:tid [device] file:line NCCL WARN)."""
    return _native(f"gpu-node-07:18231:18290 [0] transport/p2p.cc:275 NCCL WARN {message}")


def _glog(message: str) -> str:
    """``message`` as the failed glog CHECK that ends a Caffe-style trainer."""
    return _native(f"F0502 10:14:09.102771 18231 syncedmem.cpp:71] {message}\n*** Check failure stack trace: ***")


# The catalogue: entry (status name, number) -> its rendering -> the reason its meaning implies.
CATALOGUE: list[tuple[str, str, str]] = [
    # ---- CUDA runtime, cudaError_t
    (
        "cudaErrorMemoryAllocation 2 (torch)",
        _torch(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.11 GiB total capacity)"
        ),
        "gpu_oom",
    ),
    (
        "cudaErrorMemoryAllocation 2 (cupy)",
        _torch("cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorMemoryAllocation: out of memory"),
        "gpu_oom",
    ),
    (
        "cudaErrorMemoryAllocation 2 (glog)",
        _glog("Check failed: error == cudaSuccess (2 vs. 0)  out of memory"),
        "gpu_oom",
    ),
    (
        "cudaErrorMemoryAllocation 2 (onnxruntime)",
        _ort("CUDA failure 2: out of memory", "cudaMalloc((void**)&p, size)"),
        "gpu_oom",
    ),
    (
        "cudaErrorMemoryAllocation 2 (CUDA error N)",
        _native("CUDA error 2: out of memory at /src/kernels/attention.cu:118"),
        "gpu_oom",
    ),
    ("cudaErrorMemoryAllocation 2 (NCCL)", _nccl("Cuda failure 2 'out of memory'"), "gpu_oom"),
    (
        "cudaErrorIllegalAddress 700",
        _torch("RuntimeError: CUDA error: an illegal memory access was encountered"),
        "cuda_error",
    ),
    (
        "cudaErrorIllegalAddress 700 (onnxruntime)",
        _ort("CUDA failure 700: an illegal memory access was encountered"),
        "cuda_error",
    ),
    (
        "cudaErrorIllegalAddress 700 (CUDA error N)",
        _native("CUDA error 700: an illegal memory access was encountered at /src/kernels/attention.cu:118"),
        "cuda_error",
    ),
    (
        "cudaErrorLaunchFailure 719 (glog)",
        _glog("Check failed: error == cudaSuccess (719 vs. 0)  unspecified launch failure"),
        "cuda_error",
    ),
    (
        "cudaErrorLaunchTimeout 702",
        _torch("RuntimeError: CUDA error: the launch timed out and was terminated"),
        "cuda_error",
    ),
    ("cudaErrorMisalignedAddress 716", _torch("RuntimeError: CUDA error: misaligned address"), "cuda_error"),
    (
        "cudaErrorIllegalInstruction 715",
        _torch("RuntimeError: CUDA error: an illegal instruction was encountered"),
        "cuda_error",
    ),
    (
        "cudaErrorUnknown 999 (onnxruntime)",
        _ort("CUDA failure 999: unknown error", "cudaSetDevice(info_.device_id)"),
        "cuda_error",
    ),
    (
        "cudaErrorDevicesUnavailable 46 (old string)",
        _torch("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable"),
        "cuda_error",
    ),
    (
        "cudaErrorDevicesUnavailable 46 (new string)",
        _torch("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"),
        "cuda_error",
    ),
    (
        "cudaErrorDevicesUnavailable 46 (glog)",
        _glog("Check failed: error == cudaSuccess (46 vs. 0)  all CUDA-capable devices are busy or unavailable"),
        "cuda_error",
    ),
    (
        "cudaErrorDevicesUnavailable (name)",
        _torch(
            "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or unavailable"
        ),
        "cuda_error",
    ),
    (
        "cudaErrorECCUncorrectable 214",
        _torch("RuntimeError: CUDA error: uncorrectable ECC error encountered"),
        "gpu_hardware",
    ),
    (
        "cudaErrorECCUncorrectable 214 (name)",
        _torch(
            "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorECCUncorrectable: uncorrectable ECC error encountered"
        ),
        "gpu_hardware",
    ),
    (
        "cudaErrorNoKernelImageForDevice 209",
        _torch("RuntimeError: CUDA error: no kernel image is available for execution on the device"),
        "import_error",
    ),
    (
        "cudaErrorNoKernelImageForDevice 209 (onnxruntime)",
        _ort("CUDA failure 209: no kernel image is available for execution on the device"),
        "import_error",
    ),
    ("cudaErrorInvalidDeviceFunction 98", _torch("RuntimeError: CUDA error: invalid device function"), "import_error"),
    (
        "cudaErrorInvalidDeviceFunction 98 (name)",
        _torch(
            "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorInvalidDeviceFunction: invalid device function"
        ),
        "import_error",
    ),
    (
        "cudaErrorInvalidDeviceFunction 8 (glog, CUDA < 10.1 numbering)",
        _glog("Check failed: error == cudaSuccess (8 vs. 0)  invalid device function"),
        "import_error",
    ),
    (
        "cudaErrorInsufficientDriver 35",
        _torch("RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version"),
        "import_error",
    ),
    (
        "cudaErrorUnsupportedPtxVersion 222",
        _torch("RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain."),
        "import_error",
    ),
    ("cudaErrorInvalidPtx 218", _torch("RuntimeError: CUDA error: a PTX JIT compilation failed"), "import_error"),
    (
        "cudaErrorJitCompilerNotFound 221",
        _torch("RuntimeError: CUDA error: PTX JIT compiler library not found"),
        "import_error",
    ),
    (
        "cudaErrorInvalidKernelImage 200",
        _torch("RuntimeError: CUDA error: device kernel image is invalid"),
        "import_error",
    ),
    (
        "cudaErrorSystemDriverMismatch 803",
        _torch(
            "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 803: system has unsupported display driver / cuda driver combination"
        ),
        "import_error",
    ),
    (
        "cudaErrorCompatNotSupportedOnDevice 804",
        _torch(
            "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW"
        ),
        "import_error",
    ),
    ("cudaErrorStubLibrary 34", _torch("RuntimeError: CUDA error: CUDA driver is a stub library"), "import_error"),
    (
        "cudaErrorCallRequiresNewerDriver 36 (name)",
        _native("cudaMallocAsync failed: cudaErrorCallRequiresNewerDriver"),
        "import_error",
    ),
    ("cudaErrorNoDevice 100", _torch("RuntimeError: CUDA error: no CUDA-capable device is detected"), "import_error"),
    (
        "cudaErrorNoDevice 100 (name)",
        _torch(
            "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorNoDevice: no CUDA-capable device is detected"
        ),
        "import_error",
    ),
    ("cudaErrorInvalidDevice 101", _torch("RuntimeError: CUDA error: invalid device ordinal"), "argument_error"),
    ("cudaErrorInvalidDevice 101 (NCCL)", _nccl("Cuda failure 101 'invalid device ordinal'"), "argument_error"),
    (
        "cudaErrorInvalidConfiguration 9",
        _torch("RuntimeError: CUDA error: invalid configuration argument"),
        "framework_error",
    ),
    (
        "cudaErrorLaunchOutOfResources 701",
        _torch("RuntimeError: CUDA error: too many resources requested for launch"),
        "framework_error",
    ),
    (
        "cudaErrorTooManyPeers 711",
        _torch("RuntimeError: CUDA error: peer mapping resources exhausted"),
        "argument_error",
    ),
    (
        "cudaErrorNvlinkUncorrectable 220",
        _torch("RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution"),
        "nvlink_error",
    ),
    # ---- CUDA driver API, CUresult
    (
        "CUDA_ERROR_OUT_OF_MEMORY 2",
        _native(
            "E0502 10:14:09.102771 18231 cuda_driver.cc:1171] failed to allocate 2.00G (2147483648 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory"
        ),
        "gpu_oom",
    ),
    (
        "CUDA_ERROR_ILLEGAL_ADDRESS 700",
        _native(
            "E0502 10:14:09.102771 18231 cuda_event.cc:29] Error polling for event status: failed to query event: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"
        ),
        "cuda_error",
    ),
    ("CUDA_ERROR_LAUNCH_FAILED 719", _native("GPU->CPU Memcpy failed: CUDA_ERROR_LAUNCH_FAILED"), "cuda_error"),
    (
        "CUDA_ERROR_MAP_FAILED 205",
        _native("E0502 10:14:09.102771 18231 cuda_driver.cc:402] failed to map IPC handle: CUDA_ERROR_MAP_FAILED"),
        "cuda_error",
    ),
    (
        "CUDA_ERROR_DEVICE_UNAVAILABLE 46",
        _native(
            "E0502 10:14:09.102771 18231 cuda_driver.cc:300] failed call to cuCtxCreate: CUDA_ERROR_DEVICE_UNAVAILABLE"
        ),
        "cuda_error",
    ),
    (
        "CUDA_ERROR_ECC_UNCORRECTABLE 214",
        _native("E0502 10:14:09.102771 18231 gpu_timer.cc:183] failed to synchronize: CUDA_ERROR_ECC_UNCORRECTABLE"),
        "gpu_hardware",
    ),
    (
        "CUDA_ERROR_NO_BINARY_FOR_GPU 209",
        _native("simtk.openmm.OpenMMException: Error loading CUDA module: CUDA_ERROR_NO_BINARY_FOR_GPU (209)"),
        "import_error",
    ),
    (
        "CUDA_ERROR_INVALID_PTX 218",
        _native("simtk.openmm.OpenMMException: Error loading CUDA module: CUDA_ERROR_INVALID_PTX (218)"),
        "import_error",
    ),
    (
        "CUDA_ERROR_INVALID_IMAGE 200",
        _native("Exception: Error loading CUDA module: CUDA_ERROR_INVALID_IMAGE (200)"),
        "import_error",
    ),
    (
        "CUDA_ERROR_JIT_COMPILER_NOT_FOUND 221",
        _native("Exception: Error loading CUDA module: CUDA_ERROR_JIT_COMPILER_NOT_FOUND (221)"),
        "import_error",
    ),
    (
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH 803",
        _native(
            "E0502 10:14:09.102771 18231 cuda_driver.cc:266] failed call to cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: system has unsupported display driver / cuda driver combination"
        ),
        "import_error",
    ),
    (
        "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE 804",
        _native(
            "E0502 10:14:09.102771 18231 cuda_driver.cc:266] failed call to cuInit: CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: forward compatibility was attempted on non supported HW"
        ),
        "import_error",
    ),
    (
        "CUDA_ERROR_STUB_LIBRARY 34",
        _native(
            "E0502 10:14:09.102771 18231 cuda_driver.cc:266] failed call to cuInit: CUDA_ERROR_STUB_LIBRARY: CUDA driver is a stub library"
        ),
        "import_error",
    ),
    (
        "CUDA_ERROR_NO_DEVICE 100",
        _native(
            "E0502 10:14:09.102771 18231 cuda_driver.cc:266] failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"
        ),
        "import_error",
    ),
    (
        "CUDA_ERROR_INVALID_DEVICE 101",
        _native(
            "E0502 10:14:09.102771 18231 cuda_driver.cc:300] failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_INVALID_DEVICE: invalid device ordinal"
        ),
        "argument_error",
    ),
    (
        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES 701",
        _native("Exception: Error invoking kernel: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701)"),
        "framework_error",
    ),
    # ---- HIP, hipError_t (labelled as the CUDA counterpart)
    (
        "hipErrorOutOfMemory 2 (torch)",
        _torch(
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 63.98 GiB of which 1.02 GiB is free."
        ),
        "gpu_oom",
    ),
    ("hipErrorOutOfMemory 2 (HIP error)", _torch("RuntimeError: HIP error: out of memory"), "gpu_oom"),
    ("hipErrorOutOfMemory 2 (name)", _native("hip error hipErrorOutOfMemory at /src/hip/memory.cpp:88"), "gpu_oom"),
    ("hipErrorOutOfMemory 2 (glog)", _glog("Check failed: err == hipSuccess (2 vs. 0)  out of memory"), "gpu_oom"),
    (
        "hipErrorIllegalAddress 700",
        _torch("RuntimeError: HIP error: an illegal memory access was encountered"),
        "cuda_error",
    ),
    (
        "hipErrorIllegalAddress 700 (name)",
        _native("hip error hipErrorIllegalAddress at /src/kernels.cpp:212"),
        "cuda_error",
    ),
    (
        "hipErrorLaunchFailure 719 (name)",
        _native("HIP API failed: hipErrorLaunchFailure (719) at /src/hip/stream.cpp:61"),
        "cuda_error",
    ),
    ("hipErrorUnknown 999", _torch("RuntimeError: HIP error: unknown error"), "cuda_error"),
    (
        "hipErrorIllegalState 401",
        _torch("RuntimeError: HIP error: the operation cannot be performed in the present state"),
        "cuda_error",
    ),
    (
        "hipErrorECCNotCorrectable 214",
        _torch("RuntimeError: HIP error: uncorrectable ECC error encountered"),
        "gpu_hardware",
    ),
    (
        "hipErrorECCNotCorrectable 214 (name)",
        _native("hip error hipErrorECCNotCorrectable at /src/hip/stream.cpp:61"),
        "gpu_hardware",
    ),
    (
        "hipErrorNoBinaryForGpu 209",
        _native("hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"),
        "import_error",
    ),
    (
        "hipErrorNoBinaryForGpu 209 (HIP error)",
        _torch("RuntimeError: HIP error: no kernel image is available for execution on the device"),
        "import_error",
    ),
    ("hipErrorInvalidDeviceFunction 98", _torch("RuntimeError: HIP error: invalid device function"), "import_error"),
    ("hipErrorInvalidDeviceFunction 98 (glog)", _glog("Check failed: err == hipSuccess (98 vs. 0)"), "import_error"),
    (
        "hipErrorInsufficientDriver 35",
        _torch("RuntimeError: HIP error: driver version is insufficient for runtime version"),
        "import_error",
    ),
    ("hipErrorNoDevice 100", _torch("RuntimeError: HIP error: no ROCm-capable device is detected"), "import_error"),
    ("hipErrorNoDevice 100 (torch)", _torch("RuntimeError: No HIP GPUs are available"), "import_error"),
    ("hipErrorInvalidDevice 101", _torch("RuntimeError: HIP error: invalid device ordinal"), "argument_error"),
    ("hipErrorInvalidDevice 101 (name)", _native("hipSetDevice(4) failed: hipErrorInvalidDevice"), "argument_error"),
    (
        "hipErrorLaunchOutOfResources 701",
        _native("hipModuleLaunchKernel failed: hipErrorLaunchOutOfResources"),
        "framework_error",
    ),
    # ---- cuDNN
    ("CUDNN_STATUS_ALLOC_FAILED 2", _torch("RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED"), "gpu_oom"),
    (
        "CUDNN_STATUS_ALLOC_FAILED 2 (cudnn.torch number)",
        _native(
            "cudnnFindConvolutionBackwardDataAlgorithm failed: \t2\t convDesc=[mode : CUDNN_CROSS_CORRELATION datatype : CUDNN_DATA_FLOAT]"
        ),
        "gpu_oom",
    ),
    (
        "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED 4004",
        _torch("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED"),
        "gpu_oom",
    ),
    ("CUDNN_STATUS_NOT_INITIALIZED 1", _torch("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"), "cuda_error"),
    ("CUDNN_STATUS_INTERNAL_ERROR 4", _torch("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR"), "cuda_error"),
    (
        "CUDNN_STATUS_INTERNAL_ERROR 4 (cudnn.torch number)",
        _native(
            "cudnnFindConvolutionForwardAlgorithm failed: \t4\t convDesc=[mode : CUDNN_CROSS_CORRELATION datatype : CUDNN_DATA_FLOAT]"
        ),
        "cuda_error",
    ),
    (
        "CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED 4001",
        _torch("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED"),
        "cuda_error",
    ),
    ("CUDNN_STATUS_MAPPING_ERROR 7", _torch("RuntimeError: cuDNN error: CUDNN_STATUS_MAPPING_ERROR"), "cuda_error"),
    (
        "CUDNN_STATUS_EXECUTION_FAILED 8",
        _torch("RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED"),
        "cuda_error",
    ),
    (
        "CUDNN_STATUS_EXECUTION_FAILED_CUDART 5003",
        _torch("RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED_CUDART"),
        "cuda_error",
    ),
    ("CUDNN_STATUS_ARCH_MISMATCH 6", _torch("RuntimeError: cuDNN error: CUDNN_STATUS_ARCH_MISMATCH"), "import_error"),
    (
        "CUDNN_STATUS_VERSION_MISMATCH",
        _torch("RuntimeError: cuDNN error: CUDNN_STATUS_VERSION_MISMATCH"),
        "import_error",
    ),
    (
        "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH 1002",
        _torch("RuntimeError: cuDNN error: CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH"),
        "import_error",
    ),
    (
        "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED 1008",
        _torch(
            "RuntimeError: CUDNN_BACKEND_TENSOR_DESCRIPTOR cudnnFinalize failed cudnn_status: CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED"
        ),
        "import_error",
    ),
    (
        "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART 3006",
        _torch("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART"),
        "import_error",
    ),
    (
        "CUDNN_STATUS_RUNTIME_PREREQUISITE_MISSING",
        _torch("RuntimeError: cuDNN Frontend error: CUDNN_STATUS_RUNTIME_PREREQUISITE_MISSING"),
        "import_error",
    ),
    # ---- cuBLAS / cuBLASLt
    (
        "CUBLAS_STATUS_ALLOC_FAILED 3",
        _torch("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
        "gpu_oom",
    ),
    (
        "CUBLAS_STATUS_ALLOC_FAILED 3 (onnxruntime)",
        _ort("CUBLAS failure 3: CUBLAS_STATUS_ALLOC_FAILED", "cublasCreate(&cublas_handle_)"),
        "gpu_oom",
    ),
    (
        "CUBLAS_STATUS_EXECUTION_FAILED 13",
        _torch(
            "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`"
        ),
        "cuda_error",
    ),
    (
        "CUBLAS_STATUS_INTERNAL_ERROR 14",
        _torch(
            "RuntimeError: CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasLtMatmul( ltHandle, computeDesc.descriptor(), &alpha_val, mat1_ptr, Adesc.descriptor(), mat2_ptr, Bdesc.descriptor(), &beta_val, result_ptr, Cdesc.descriptor(), result_ptr, Cdesc.descriptor(), &heuristicResult.algo, workspace.data_ptr(), workspaceSize, at::cuda::getCurrentCUDAStream())`"
        ),
        "cuda_error",
    ),
    (
        "CUBLAS_STATUS_NOT_INITIALIZED 1",
        _torch("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`"),
        "cuda_error",
    ),
    (
        "CUBLAS_STATUS_ARCH_MISMATCH 8",
        _torch(
            "RuntimeError: CUDA error: CUBLAS_STATUS_ARCH_MISMATCH when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, CUDA_R_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`"
        ),
        "import_error",
    ),
    # ---- cuFFT, cuSOLVER, cuSPARSE, cuRAND
    ("CUFFT_ALLOC_FAILED 2", _torch("RuntimeError: cuFFT error: CUFFT_ALLOC_FAILED"), "gpu_oom"),
    ("CUFFT_INTERNAL_ERROR 5", _torch("RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR"), "cuda_error"),
    ("CUFFT_EXEC_FAILED 6", _torch("RuntimeError: cuFFT error: CUFFT_EXEC_FAILED"), "cuda_error"),
    ("CUFFT_SETUP_FAILED 7", _torch("RuntimeError: cuFFT error: CUFFT_SETUP_FAILED"), "cuda_error"),
    ("CUFFT_MISSING_DEPENDENCY 17", _torch("RuntimeError: cuFFT error: CUFFT_MISSING_DEPENDENCY"), "import_error"),
    (
        "CUSOLVER_STATUS_ALLOC_FAILED 2",
        _torch("RuntimeError: cusolver error: CUSOLVER_STATUS_ALLOC_FAILED, when calling `cusolverDnCreate(handle)`"),
        "gpu_oom",
    ),
    (
        "CUSOLVER_STATUS_INTERNAL_ERROR 7",
        _torch("RuntimeError: cusolver error: CUSOLVER_STATUS_INTERNAL_ERROR, when calling `cusolverDnCreate(handle)`"),
        "cuda_error",
    ),
    (
        "CUSOLVER_STATUS_EXECUTION_FAILED 6",
        _torch(
            "RuntimeError: cusolver error: CUSOLVER_STATUS_EXECUTION_FAILED, when calling `cusolverDnXgeqrf( handle, params, m, n, CUDA_R_32F, reinterpret_cast<void*>(A), lda, CUDA_R_32F, reinterpret_cast<void*>(tau), CUDA_R_32F, reinterpret_cast<void*>(bufferOnDevice), workspaceInBytesOnDevice, reinterpret_cast<void*>(bufferOnHost), workspaceInBytesOnHost, info)`"
        ),
        "cuda_error",
    ),
    (
        "CUSPARSE_STATUS_ALLOC_FAILED 2",
        _torch("RuntimeError: CUDA error: CUSPARSE_STATUS_ALLOC_FAILED when calling `cusparseCreate(handle)`"),
        "gpu_oom",
    ),
    (
        "CUSPARSE_STATUS_INTERNAL_ERROR 7",
        _torch(
            "RuntimeError: CUDA error: CUSPARSE_STATUS_INTERNAL_ERROR when calling `cusparseSpMM( handle, opA, opB, &alpha, descA, descB, &beta, descC, computeType, CUSPARSE_SPMM_ALG_DEFAULT, dBuffer)`"
        ),
        "cuda_error",
    ),
    (
        "CURAND_STATUS_ALLOCATION_FAILED 102",
        _native("curandCreateGenerator failed: CURAND_STATUS_ALLOCATION_FAILED"),
        "gpu_oom",
    ),
    (
        "CURAND_STATUS_LAUNCH_FAILURE 201",
        _glog("Check failed: status == CURAND_STATUS_SUCCESS (201 vs. 0)  CURAND_STATUS_LAUNCH_FAILURE"),
        "cuda_error",
    ),
    (
        "CURAND_STATUS_PREEXISTING_FAILURE 202",
        _native("curandGenerateNormal failed: CURAND_STATUS_PREEXISTING_FAILURE"),
        "cuda_error",
    ),
    (
        "CURAND_STATUS_INITIALIZATION_FAILED 203",
        _native("curandCreateGenerator failed: CURAND_STATUS_INITIALIZATION_FAILED"),
        "cuda_error",
    ),
    (
        "CURAND_STATUS_VERSION_MISMATCH 100",
        _native("curandCreateGenerator failed: CURAND_STATUS_VERSION_MISMATCH"),
        "import_error",
    ),
    (
        "CURAND_STATUS_ARCH_MISMATCH 204",
        _native("curandCreateGenerator failed: CURAND_STATUS_ARCH_MISMATCH"),
        "import_error",
    ),
    # ---- the HIP libraries (ROCm/HIPIFY's tables: each beside its CUDA counterpart)
    (
        "HIPBLAS_STATUS_ALLOC_FAILED (torch on ROCm)",
        _torch("RuntimeError: CUDA error: HIPBLAS_STATUS_ALLOC_FAILED when calling `hipblasCreate(handle)`"),
        "gpu_oom",
    ),
    (
        "HIPBLAS_STATUS_INTERNAL_ERROR",
        _torch(
            "RuntimeError: CUDA error: HIPBLAS_STATUS_INTERNAL_ERROR when calling `hipblasGemmEx( handle, opa, opb, m, n, k, &falpha, a, HIP_R_16BF, lda, b, HIP_R_16BF, ldb, &fbeta, c, HIP_R_16BF, ldc, HIP_R_32F, HIPBLAS_GEMM_DEFAULT)`"
        ),
        "cuda_error",
    ),
    (
        "HIPBLAS_STATUS_ARCH_MISMATCH",
        _native("hipBLAS error: HIPBLAS_STATUS_ARCH_MISMATCH at /src/gemm.cpp:41"),
        "import_error",
    ),
    (
        "HIPSOLVER_STATUS_ALLOC_FAILED",
        _torch(
            "RuntimeError: hipsolver error: HIPSOLVER_STATUS_ALLOC_FAILED, when calling `hipsolverDnCreate(handle)`"
        ),
        "gpu_oom",
    ),
    (
        "HIPSOLVER_STATUS_EXECUTION_FAILED",
        _torch(
            "RuntimeError: hipsolver error: HIPSOLVER_STATUS_EXECUTION_FAILED, when calling `hipsolverDnSgeqrf(handle, m, n, A, lda, tau, work, lwork, info)`"
        ),
        "cuda_error",
    ),
    (
        "HIPSPARSE_STATUS_MAPPING_ERROR",
        _native("hipSPARSE error: HIPSPARSE_STATUS_MAPPING_ERROR at /src/spmm.cpp:88"),
        "cuda_error",
    ),
    (
        "HIPRAND_STATUS_ALLOCATION_FAILED",
        _native("hiprandCreateGenerator failed: HIPRAND_STATUS_ALLOCATION_FAILED"),
        "gpu_oom",
    ),
    (
        "HIPRAND_STATUS_LAUNCH_FAILURE",
        _native("hiprandGenerateNormal failed: HIPRAND_STATUS_LAUNCH_FAILURE"),
        "cuda_error",
    ),
    (
        "HIPRAND_STATUS_VERSION_MISMATCH",
        _native("hiprandCreateGenerator failed: HIPRAND_STATUS_VERSION_MISMATCH"),
        "import_error",
    ),
    ("HIPFFT_ALLOC_FAILED", _torch("RuntimeError: hipFFT error: HIPFFT_ALLOC_FAILED"), "gpu_oom"),
    ("HIPFFT_EXEC_FAILED", _torch("RuntimeError: hipFFT error: HIPFFT_EXEC_FAILED"), "cuda_error"),
    ("miopenStatusAllocFailed", _torch("RuntimeError: miopenStatusAllocFailed"), "gpu_oom"),
    ("miopenStatusVersionMismatch", _torch("RuntimeError: miopenStatusVersionMismatch"), "import_error"),
    # ---- NCCL, ncclResult_t and ncclGetErrorString
    (
        "ncclUnhandledCudaError 1",
        _torch(
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5"
        ),
        "nccl_error",
    ),
    (
        "ncclSystemError 2",
        _torch(
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3"
        ),
        "nccl_error",
    ),
    (
        "ncclSystemError 2 (name)",
        _native("ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error."),
        "nccl_error",
    ),
    (
        "ncclInternalError 3",
        _torch(
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, internal error - please report this issue to the NCCL developers, NCCL version 2.21.5"
        ),
        "nccl_error",
    ),
    (
        "ncclInternalError 3 (bare string)",
        _torch(
            "RuntimeError: ncclCommInitRank failed: internal error - please report this issue to the NCCL developers"
        ),
        "nccl_error",
    ),
    (
        "ncclInvalidUsage 5",
        _torch(
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5"
        ),
        "framework_error",
    ),
    (
        "ncclRemoteError 6",
        _torch(
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.20.5"
        ),
        "nccl_error",
    ),
]


@pytest.mark.parametrize(("entry", "log", "reason"), CATALOGUE, ids=[entry for entry, _, _ in CATALOGUE])
def test_each_status_of_the_catalogue_reads_as_its_meaning(entry: str, log: str, reason: str) -> None:
    assert reason_of(log) == reason, (entry, reason_and_rule(log))


def test_the_catalogue_names_each_entry_once() -> None:
    entries = [entry for entry, _, _ in CATALOGUE]
    assert len(entries) == len(set(entries))


# ---------------------------------------------------------------- the emitter-gpu rules give these, not a neighbour


def test_new_forms_are_read_by_the_emitter_rules() -> None:
    """The forms no rule read before (the ones the catalogue added), by the rule that reads them."""
    assert reason_and_rule(_nccl("Cuda failure 2 'out of memory'")) == ("gpu_oom", "emitter-gpu-oom")
    assert reason_and_rule(_torch("RuntimeError: HIP error: invalid device function")) == (
        "import_error",
        "emitter-gpu-build-mismatch",
    )
    assert reason_and_rule(_native("failed to synchronize: CUDA_ERROR_ECC_UNCORRECTABLE")) == (
        "gpu_hardware",
        "emitter-gpu-ecc",
    )
    assert reason_and_rule(_native("hipSetDevice(4) failed: hipErrorInvalidDevice")) == (
        "argument_error",
        "emitter-gpu-invalid-device",
    )
    assert reason_and_rule(
        _glog("Check failed: error == cudaSuccess (46 vs. 0)  all CUDA-capable devices are busy or unavailable")
    ) == ("cuda_error", "emitter-gpu-fault")


# ---------------------------------------------------------------- benign lines with the same words


def test_a_status_print_that_says_no_error_is_not_a_fault() -> None:
    log = _native("CUDA error 0: no error\nI0502 10:14:11.020113 18231 solver.cpp:243] Iteration 1220, loss = 2.4410")
    assert reason_of(log) == "unknown"
    log = _native("HIP error: no error (hipGetLastError after warm-up)")
    assert reason_of(log) == "unknown"


def test_hip_s_not_ready_while_polling_is_not_a_fault() -> None:
    """hipErrorNotReady is how hipStreamQuery says the work is still running (hip_runtime_api.h: "not actually
    an error"): a trainer that polls and goes on has not failed."""
    log = _native(
        "hipStreamQuery returned hipErrorNotReady, polling again\nI0502 10:14:11.020113 18231 solver.cpp:243] Iteration 1220, loss = 2.4410"
    )
    assert reason_of(log) == "unknown"


def test_advice_that_mentions_hip_out_of_memory_is_not_an_oom() -> None:
    log = _native(
        "Hint: lower --batch-size or set PYTORCH_HIP_ALLOC_CONF=expandable_segments:True if you hit HIP out of memory errors"
    )
    assert reason_of(log) != "gpu_oom"


def test_a_cuda_init_warning_the_run_survived_is_not_the_cause() -> None:
    """torch's UserWarning that CUDA could not start (Error 803) on a run that then trains on the CPU and
    completes: a warning, not an installation failure that ended the run."""
    log = """
/opt/conda/lib/python3.10/site-packages/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 803: system has unsupported display driver / cuda driver combination (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)
  return torch._C._cuda_getDeviceCount() > 0
[2024-05-02 10:14:07,551] INFO - device: cpu
[2024-05-02 10:14:08,102] INFO - epoch 1 step 10 loss 2.4713
[2024-05-02 10:19:40,551] INFO - training finished, saved checkpoint to out/last.pt
"""
    assert reason_of(log) != "import_error"


def test_a_library_s_own_invalid_device_function_after_hours_stays_a_cuda_fault() -> None:
    """The corpus README's rule (case 575): dlib's "reason: invalid device function" after 120k good steps is
    a CUDA fault, not a build that does not fit; the build-mismatch rule reads only the runtime's prefixes."""
    log = _native(
        "terminate called after throwing an instance of 'dlib::cuda_error'\n"
        "  what():  Error while calling cudaOccupancyMaxPotentialBlockSize(&num_blocks,&num_threads,K) in file "
        "dlib/dlib/cuda/cuda_utils.h:186. code: 98, reason: invalid device function"
    )
    assert reason_of(log) == "cuda_error"
