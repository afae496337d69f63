"""Classes of misses from issue 19's rounds one hundred and ninety-eight to two hundred and three (corpus cases
6660-6771: PaddlePaddle; NVIDIA's recipes; GPU molecular dynamics and HPC codes; medical imaging; Rust, Julia, C++, Java
and .NET frameworks; UCX, CUDA-aware MPI and GPUDirect; reports found by generic queries that show a printed line, taken
as the search returned them), and one older miss of the same classes (2962). Error messages are verbatim from the public
reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # PaddlePaddle/PaddleOCR#6848 (case 6663): Paddle's loss scaler halved to nothing.
        (
            "Found inf or nan, current scale is: 8.881784197001252e-16, decrease to: 8.881784197001252e-16*0.5\n",
            "loss_divergence",
            "loss-nan",
        ),
        # lammps/lammps#2086 (case 6708): Kokkos built for another GPU.
        (
            "Kokkos::Cuda::initialize ERROR: likely mismatch of architecture\n",
            "import_error",
            "no-kernel-image",
        ),
        # samuelmurail/gromacs_py#22 (case 6700): GROMACS cannot build its GPU kernels.
        (
            "Failed to compile NBNXN kernels for GPU #NVIDIA A100-SXM4-40GB\n",
            "import_error",
            "no-kernel-image",
        ),
        # deepmodeling/deepmd-kit#533 (case 6701): CUDA's own string in a program's assert.
        (
            "cuda assert: invalid argument /scratch/qf9/user/softwares/deepmd-kit-api-20210417/source/lib/include/gpu_cuda.h 48.\n",
            "cuda_error",
            "cuda-fault",
        ),
        # deeplearning4j/deeplearning4j#7795 (case 6741): the CUDA samples' check, two spaces before code=.
        (
            '    CUDA error at /mnt/jenkins/workspace/deeplearning4j-deeplearning4j-1.0.0-beta4-linux-x86_64-cuda-10.0/libnd4j/blas/cuda/NativeOps.cu:1903  code=77(<unknown>) "dZ"\n',
            "cuda_error",
            "cuda-error-number",
        ),
        # MFlowCode/MFC#989 (case 6713): the OpenACC runtime's OOM.
        (
            "Out of memory allocating 4499256832 bytes of device memory\n"
            "total/free CUDA memory: 85094825984/2894921728\n",
            "gpu_oom",
            "cuda-oom",
        ),
        # brucefan1983/GPUMD#725 (case 6714): GPUMD's check macro.
        (
            "CUDA Error:\nError code: 2\nError text: out of memory\n",
            "gpu_oom",
            "cuda-oom",
        ),
        # NVIDIA/multi-gpu-programming-models#14 (case 6771): cudaMalloc's OOM first, the illegal accesses after it.
        (
            'ERROR: CUDA RT call "cudaMalloc(&a_new, nx * ny * sizeof(real))" in line 378 of file jacobi.cpp failed with out of memory (2).\n'
            'ERROR: CUDA RT call "cudaMemset(a_new, 0, nx * ny * sizeof(real))" in line 381 of file jacobi.cpp failed with invalid argument (1).\n'
            'ERROR: CUDA RT call "cudaDeviceSynchronize()" in line 385 of file jacobi.cpp failed with an illegal memory access was encountered (700).\n',
            "gpu_oom",
            "cuda-oom",
        ),
        # conda-forge/openmpi-feedstock#203 (case 6762): Open MPI built without CUDA support.
        (
            "The user requested CUDA support with the --mca mpi_cuda_support 1 flag\n"
            "but the library was not compiled with any support.\n",
            "import_error",
            "library-built-without",
        ),
        # argonne-lcf/user-guides#441 (case 6764): Cray MPICH without its GTL library.
        (
            "MPIDI_CRAY_init: GPU_SUPPORT_ENABLED is requested, but GTL library is not linked\n",
            "import_error",
            "library-built-without",
        ),
        # pytorch/pytorch#22681 (case 6746): LibTorch's CUDA kernels missing from a Debug build.
        (
            "cuda_dispatch_ptr INTERNAL ASSERT FAILED at C:\\w\\1\\s\\windows\\pytorch\\aten\\src\\ATen/native/DispatchStub.h:70, please report a bug to PyTorch. DispatchStub: missing CUDA kernel (operator () at C:\\w\\1\\s\\windows\\pytorch\\aten\\src\\ATen/native/DispatchStub.h:70)\n",
            "import_error",
            "library-built-without",
        ),
        # deepmodeling/deepmd-kit#716 (case 6717): LAMMPS asked for a package it was built without.
        (
            "ERROR: Using suffix gpu without GPU package installed (src/lammps.cpp:801)\n",
            "import_error",
            "library-built-without",
        ),
        # NVIDIA/nvshmem#40 (case 6767): the driver's NVLink fabric state out of sync.
        (
            "[1891044.581319] NVRM: nvCheckOkFailedNoLog: Check failed: NVLink fabric state cached by the driver is out of sync [NV_ERR_FABRIC_STATE_OUT_OF_SYNC] (0x00000087) returned from status @ mem_multicast_fabric.c:2917\n",
            "nvlink_error",
            "nvlink-fatal",
        ),
        # deeplearning4j/deeplearning4j#4707 (case 6751): the JVM's report of a native crash.
        (
            "# A fatal error has been detected by the Java Runtime Environment:\n"
            "#  SIGSEGV (0xb) at pc=0x00007fc2da6a1c20, pid=5160, tid=0x00007fc30444d700\n",
            "framework_error",
            "native-crash-reported",
        ),
        # deepjavalibrary/djl#2962 (case 6749): NVRTC refusing the fuser's generated code.
        (
            '2 errors detected in the compilation of "default_program".\nnvrtc compilation failed: \n',
            "framework_error",
            "framework-own-limit",
        ),
        # dotnet/machinelearning-modelbuilder#912 (case 6753): Model Builder without its GPU service.
        (
            "GPU Service not found. Falling back to CPU AutoML Service.\nTraining cancelled\n",
            "framework_error",
            "framework-own-limit",
        ),
        # BLAST-WarpX/warpx#4236 (case 6715): the process manager failing while MPI starts.
        (
            "MPICH ERROR [Rank 0] [job id 4292261.0] [Thu Aug  3 00:01:58 2023] [nid006593] - Abort(1616271) (rank 0 in comm 0): Fatal error in PMPI_Init_thread: Other MPI error, error stack:\n"
            "MPIDU_bc_table_create(204)..:  PMI_Allgather failed: -1\n",
            "network_error",
            "mpi-init-pmi-failed",
        ),
        # torch/demos#43 (case 6752): Lua's argument check.
        (
            "~/torch/install/bin/luajit: bad argument #3 to '?' (torch.*Tensor expected, got userdata)\n",
            "script_error",
            "lua-bad-argument",
        ),
        # glotzerlab/hoomd-blue#263 (case 6705): a simulation's state gone to NaN.
        (
            "**ERROR**: Particle with unique tag 6 has NaN for its position.\n",
            "loss_divergence",
            "loss-nan",
        ),
        # dceresoli/qe-gipaw#30 (case 6710): Quantum ESPRESSO's eigensolver giving up.
        (
            "     from c_bands : error #         1\n     too many bands are not converged\n",
            "framework_error",
            "framework-own-limit",
        ),
        # openucx/ucx#3359 (case 6760): UCX reading a device buffer as host memory.
        (
            "[1552252595.845746] [ip-172-31-30-104:7421 :0]         cma_ep.c:113  UCX  ERROR process_vm_readv delivered 0 instead of 16000, error message Bad address\n",
            "framework_error",
            "ucx-device-buffer-as-host",
        ),
        # JuliaGPU/CUDA.jl#920 (case 6744): CUDA.jl refusing a CPU routine a GPU array.
        (
            "[ Info: Start Training\nArgumentError: cannot take the CPU address of a CuArray{Float32, 1}\n",
            "framework_error",
            "framework-own-limit",
        ),
        # NVIDIA/gdrcopy#184 (case 6766): a C assertion in gdrcopy's own test.
        (
            'error in gdr_pin_buffer with code=22\nAssertion "(status) == (0)" failed at copylat.cpp:195\n',
            "framework_error",
            "native-abort",
        ),
        # pytorch/pytorch#161232 (case 6768): NVSHMEM's initialisation giving up.
        (
            "src/host/init/init.cu:nvshmemi_check_state_and_init:1117: nvshmem initialization failed, exiting \n",
            "framework_error",
            "framework-own-limit",
        ),
        # Older miss 2962 (QingyongHu/RandLA-Net): numpy's empty-sequence words with no frame shown.
        (
            "****EPOCH 0****\nValueError: attempt to get argmin of an empty sequence\n",
            "dataloader_error",
            "empty-data",
        ),
    ],
)
def test_round198_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_the_samples_check_with_code_2_is_the_allocators() -> None:
    assert reason_and_rule(
        'CUDA error at /src/kernels.cu:88  code=2(cudaErrorMemoryAllocation) "cudaMalloc(&d, n)"\n'
    ) == (
        "gpu_oom",
        "cuda-oom",
    )


def test_a_loss_scale_that_is_still_large_is_no_divergence() -> None:
    text = "Found inf or nan, current scale is: 1024.0, decrease to: 1024.0*0.5\n"
    assert reason_and_rule(text) == ("unknown", None)


def test_an_empty_sequence_under_the_scripts_own_frame_stays_the_scripts() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/proj/search.py", line 12, in <module>\n'
        "    best = np.argmin(scores)\n"
        "ValueError: attempt to get argmin of an empty sequence\n"
    )
    assert reason_and_rule(text) == ("script_error", "exception-ValueError")
