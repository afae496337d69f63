"""Classes of misses from issue 19's thirteenth round, batch B (corpus cases 1220-1233: speech and audio,
scientific-ML and reinforcement-learning training repositories): Julia's account of an uncaught exception
(its "Stacktrace:" with the innermost frame first, the language's own frames passed over), CUDA.jl's words for
GPU memory, and multiprocessing refusing the process structure a run set up. Error messages are verbatim from
the public reports named in each test; hosts, paths and pids may be made up; where a test is built on a
report's layout with other words, it says so."""
# ruff: noqa: E501, RUF001

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- Julia's uncaught exception

# SciML/NeuralOperators.jl#77 (case 1227): Lux training on CUDA arrays after an architecture change; the
# ambiguous method is found in Base's sum!, called by LuxLib's bias gradient (an installed package).
_NEURALOPERATORS_JL = """
ERROR: MethodError: mapreducedim!(::typeof(identity), ::typeof(Base.add_sum), ::CUDA.CuArray{…}, ::LinearAlgebra.Adjoint{…}) is ambiguous.

Candidates:
  mapreducedim!(f, op, R::GPUArraysCore.AnyGPUArray, A::AbstractArray)
    @ GPUArrays ~/.julia/packages/GPUArrays/u6tui/src/host/mapreduce.jl:10
  mapreducedim!(f, op::Union{typeof(&), typeof(+), typeof(Base._extrema_rf), typeof(Base.add_sum), typeof(max), typeof(min), typeof(|)}, B::AbstractArray, A::LinearAlgebra.Adjoint{T, <:AbstractMatrix} where T)
    @ LinearAlgebra ~/.julia/juliaup/julia-1.11.6+0.x64.linux.gnu/share/julia/stdlib/v1.11/LinearAlgebra/src/adjtrans.jl:443

Possible fix, define
  mapreducedim!(::Any, ::Union{…}, ::GPUArraysCore.AnyGPUArray, ::LinearAlgebra.Adjoint{…} where T)

Stacktrace:
  [1] sum!(f::Function, r::CUDA.CuArray{…}, A::LinearAlgebra.Adjoint{…}; init::Bool)
    @ Base ./reducedim.jl:1006
  [2] sum!(r::CUDA.CuArray{Float32, 2, CUDA.DeviceMemory}, A::LinearAlgebra.Adjoint{Float32, CUDA.CuArray{…}}; init::Bool)
    @ Base ./reducedim.jl:1008
  [3] reduce_sum(x::CUDA.CuArray{Float32, 2, CUDA.DeviceMemory}, y::LinearAlgebra.Adjoint{Float32, CUDA.CuArray{…}})
    @ LuxLib.Impl ~/.julia/packages/LuxLib/bYUJG/src/impl/common_ops.jl:36
"""

# SciML/FluxNeuralOperators.jl#137 (not in the corpus: its run shows no GPU): a BoundsError quoted alone; built
# here on Julia's layout of a script run with `julia train.jl`, the first frame past Base the script's own.
_BOUNDS_IN_SCRIPT = """
ERROR: LoadError: BoundsError: attempt to access 11×64×1 Array{ComplexF32, 3} at index [1:16, 1:64, 1:1]
Stacktrace:
 [1] throw_boundserror(A::Array{ComplexF32, 3}, I::Tuple{UnitRange{Int64}, Base.Slice{Base.OneTo{Int64}}, Base.Slice{Base.OneTo{Int64}}})
   @ Base ./abstractarray.jl:737
 [2] checkbounds
   @ ./abstractarray.jl:702 [inlined]
 [3] train_fno(data::Vector{Tuple{Array{Float32, 3}, Array{Float32, 3}}})
   @ Main /home/user/fno/train.jl:41
 [4] top-level scope
   @ /home/user/fno/train.jl:58
in expression starting at /home/user/fno/train.jl:58
"""

# Built on the layout before Julia 1.6 (the error as its repr, each frame on one line: "[1] f(...) at
# path:line"): a Flux layer's matrix product, the first frame past the standard library a package's.
_OLD_LAYOUT_IN_PACKAGE = """
ERROR: LoadError: DimensionMismatch("A has dimensions (64,128) but B has dimensions (64,32)")
Stacktrace:
 [1] gemm_wrapper!(::Array{Float32,2}, ::Char, ::Char, ::Array{Float32,2}, ::Array{Float32,2}) at /buildworker/worker/package_linux64/build/usr/share/julia/stdlib/v1.5/LinearAlgebra/src/matmul.jl:569
 [2] (::Dense{typeof(relu),Array{Float32,2},Array{Float32,1}})(::Array{Float32,2}) at /home/user/.julia/packages/Flux/05b38/src/layers/basic.jl:123
 [3] top-level scope at /home/user/model.jl:12
"""


def test_a_julia_exception_is_judged_by_the_first_frame_past_the_language() -> None:
    assert reason_and_rule(_NEURALOPERATORS_JL) == ("framework_error", "julia-MethodError")
    assert reason_and_rule(_BOUNDS_IN_SCRIPT) == ("script_error", "julia-BoundsError")
    assert reason_and_rule(_OLD_LAYOUT_IN_PACKAGE) == ("framework_error", "julia-DimensionMismatch")


def test_a_julia_exception_whose_message_a_rule_knows_keeps_that_reason() -> None:
    # CUDA.jl's OutOfGPUMemoryError in its own words, over the same stacktrace layout.
    oom = _NEURALOPERATORS_JL.replace(
        "ERROR: MethodError: mapreducedim!(::typeof(identity), ::typeof(Base.add_sum), ::CUDA.CuArray{…}, ::LinearAlgebra.Adjoint{…}) is ambiguous.",
        "ERROR: LoadError: OutOfGPUMemoryError: Out of GPU memory trying to allocate 5.960 GiB",
    )
    assert reason_and_rule(oom) == ("gpu_oom", "cuda-oom")
    assert reason_of("ERROR: Out of GPU memory trying to allocate 2.000 GiB") == "gpu_oom"


def test_a_python_logger_error_line_is_not_julia() -> None:
    # No "Stacktrace:" after it: a logged line, read as before.
    assert reason_of("ERROR: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB") == "gpu_oom"
    logged = "ERROR: KeyError: 'lr'\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    cfg['lr']\nKeyError: 'lr'\n"
    assert reason_of(logged) == "script_error"


# ---------------------------------------------------------------- multiprocessing's refusals

# facebookresearch/seamless_communication#402 (case 1223): finetune.py run with IPython's %run in a Colab kernel.
_SEAMLESS_CONTEXT = """
%run finetune.py --mode SPEECH_TO_TEXT --train_dataset /content/my_m4t_dataset/train_manifest.json --eval_dataset /content/my_m4t_dataset/validation_manifest.json --learning_rate 1e-6 --warmup_steps 100 --max_epochs 10 --patience 5 --model_name seamlessM4T_v2_large --save_model_to /content/my_3m4t_dataset/checkpoint.pt
RuntimeError: context has already been set
"""

# The same refusal under multiprocessing's own frame (Python's wording; the frames are multiprocessing's and
# a script's, as a traceback of it reads).
_CONTEXT_WITH_FRAMES = """
Traceback (most recent call last):
  File "/content/train.py", line 210, in <module>
    mp.set_start_method("spawn")
  File "/usr/lib/python3.10/multiprocessing/context.py", line 247, in set_start_method
    raise RuntimeError('context has already been set')
RuntimeError: context has already been set
"""

# A DataLoader with workers inside a pool's daemonic worker.
_DAEMONIC = """
Traceback (most recent call last):
  File "/usr/local/lib/python3.8/dist-packages/torch/utils/data/dataloader.py", line 918, in __init__
    w.start()
  File "/usr/lib/python3.8/multiprocessing/process.py", line 118, in start
    assert not _current_process._config.get('daemon'), \\
AssertionError: daemonic processes are not allowed to have children
"""


def test_multiprocessing_refusing_the_runs_process_structure_is_the_scripts() -> None:
    assert reason_and_rule(_SEAMLESS_CONTEXT) == ("script_error", "multiprocessing-structure")
    assert reason_and_rule(_CONTEXT_WITH_FRAMES) == ("script_error", "multiprocessing-structure")
    assert reason_and_rule(_DAEMONIC) == ("script_error", "multiprocessing-structure")
    # Other RuntimeErrors alone keep the taxonomy's reading by type.
    assert reason_of("RuntimeError: Global alloc not supported yet") == "framework_error"
