"""Classes of misses from issue 19's rounds one hundred and seventy-nine to one hundred and eighty-one (corpus cases
6280-6339: reports found by generic queries that show at least one line the failing run printed: TensorRT, ONNX
Runtime, Triton Inference Server and model export; graph neural networks; scientific and molecular models; taken as
the search returned them). Error messages are verbatim from the public reports named in each test; hosts, paths and
pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # microsoft/onnxruntime#26635 (case 6281): ONNX Runtime GenAI built without the CUDA execution provider.
        (
            "Loading model...\nUnhandled exception. Microsoft.ML.OnnxRuntimeGenAI.OnnxRuntimeGenAIException: CUDA execution provider is not enabled in this build.\n   at GenAIChat.Program.Main(String[] args) in D:\\src\\GenAIChat\\Program.cs:line 21\n",
            "import_error",
            "library-built-without",
        ),
        # triton-inference-server/server#3916 (case 6283): Triton's own signal handler over its backtrace.
        (
            "Signal (11) received.\n0# 0x000055E8DF741EB9 in tritonserver\n1# 0x00007F730F47E210 in /usr/lib/x86_64-linux-gnu/libc.so.6\n5# TRITONBACKEND_ResponseSend in /opt/tritonserver/bin/../lib/libtritonserver.so\n",
            "framework_error",
            "segfault-in-text",
        ),
        # pytorch/TensorRT#1600 (case 6296): the link of a source build cannot resolve libtorch's symbols.
        (
            "$ bazel build //:libtorchtrt --platforms //toolchains:jetpack_5.0 -c opt\nbazel-out/aarch64-opt/bin/core/conversion/_objs/conversion/conversion.o:conversion.cpp:function torch_tensorrt::core::conversion::VerifyConverterSupportForBlock(torch::jit::Block const*, bool): error: undefined reference to 'torch::jit::SourceRange::highlight(std::ostream&) const'\n",
            "import_error",
            "undefined-symbol",
        ),
        # mingj2021/segment-anything-tensorrt#2 (case 6298): an engine serialized by another TensorRT.
        (
            "all characters read successfully.\n1: [stdArchiveReader.cpp::nvinfer1::rt::StdArchiveReader::StdArchiveReader::40] Error Code 1: Serialization (Serialization assertion stdVersionRead == serializationVersion failed.Version tag does not match. Note: Current Version: 213, Serialized Engine Version: 232)\n4: [runtime.cpp::nvinfer1::Runtime::deserializeCudaEngine::50] Error Code 4: Internal Error (Engine deserialization failed.)\n",
            "checkpoint_load_error",
            "tensorrt-engine-mismatch",
        ),
        # yuvraj108c/ComfyUI-Dwpose-Tensorrt#5 (case 6299): polygraphy's words for it, under ComfyUI's cut traceback.
        (
            '[!] Could not deserialize engine. See log for details.\n!!! Exception during processing !!! Could not deserialize engine. See log for details.\nTraceback (most recent call last):\n  File "/workspace/ComfyUI/execution.py", line 205, in get_output_data\n',
            "checkpoint_load_error",
            "tensorrt-engine-mismatch",
        ),
        # dmlc/dgl#7438 (case 6318): DGL's loader missing its own C++ library for the installed torch.
        (
            "FileNotFoundError: Cannot find DGL C++ graphbolt library at /home/james/src/jbm/dgl/python/dgl/graphbolt/libgraphbolt_pytorch_2.3.0.so\n",
            "import_error",
            "library-built-without",
        ),
        # amorehead/alphafold_non_docker#1 (case 6320): absl's check of a required flag.
        (
            "flag --use_gpu_relax=None: Flag --use_gpu_relax must have a value other than None.\n",
            "argument_error",
            "cli-parser-refusal",
        ),
        # aqlaboratory/openfold#500 (case 6333): fair-esm's check of the state dict it loaded.
        (
            "Traceback (most recent call last):\n  File \"/home/wan/esmfold_test/esmfold_test.py\", line 4, in <module>\n    model = esm.pretrained.esmfold_v1()\nRuntimeError: Keys 'trunk.structure_module.ipa.linear_q_points.linear.weight, trunk.structure_module.ipa.linear_q_points.linear.bias' are missing.\n",
            "checkpoint_load_error",
            "state-dict-mismatch",
        ),
        # deepmodeling/deepmd-kit#2528 (case 6335): LAMMPS refusing its command line.
        (
            "(deepmd) $ mpirun -n 11 -ppn 1 lmp -sk gpu -pk gpu 1 11x1 inp4.neb\nERROR: Invalid command-line argument (src/lammps.cpp:439)\n",
            "argument_error",
            "cli-parser-refusal",
        ),
        # deepmodeling/deepmd-kit#3022 (case 6336): a LAMMPS built without DeePMD-kit's pair style.
        (
            "  read_data CPU = 0.006 seconds\nERROR: Unrecognized pair style 'deepmd' (src/force.cpp:275)\nLast command: pair_style deepmd Ti5_small_i2_compressed_step01.pb\n",
            "import_error",
            "library-built-without",
        ),
        # ecmwf-lab/ai-models-graphcast#16 (case 6338): a jaxlib without the CUDA backend the model asks for.
        (
            "2024-04-24 09:16:13,447 INFO Converting GRIB to xarray: 3 seconds.\nRuntimeError: Unknown backend gpu\nFor simplicity, JAX has removed its internal frames from the traceback of the following exception. Set JAX_TRACEBACK_FILTERING=off to include these.\n",
            "import_error",
            "library-built-without",
        ),
    ],
)
def test_round179_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_missing_keys_sentence_inside_other_words_is_not_the_loaders() -> None:
    assert reason_and_rule("INFO: 3 keys are missing from the cache; fetching them\n") == ("unknown", None)
