"""Classes of misses from issue 19's fourteenth round, batch A (corpus cases 1270-1287: federated learning,
AutoML and hyper-parameter search, model compression): TensorFlow 2's eager out-of-memory words, a simulation
engine that cannot place a client with the resources asked for, CUDA's refusals of a kernel launch's own
configuration, builds of MXNet and PaddlePaddle without GPU support, NNI's missing GPU index, and a loss named
NaN the other way round. Error messages are verbatim from the public reports named in each test; hosts, paths
and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- TensorFlow 2's eager OOM

# flwrlabs/flower#3159 (case 1270): a Flower simulation's server-side evaluate_fn builds a Keras model on the
# GPU; Flower's crash message after it lists possible causes as advice.
_FLOWER_TF_OOM = """
  File "/home/melih.cosgun/conda/gpu_env/lib/python3.9/site-packages/keras/backend.py", line 2100, in random_uniform
    return tf.random.stateless_uniform(
tensorflow.python.framework.errors_impl.ResourceExhaustedError: {{function_node __wrapped__Mul_device_/job:localhost/replica:0/task:0/device:GPU:0}} failed to allocate memory [Op:Mul]

ERROR flwr 2024-03-19 18:07:43,863 | app.py:315 | Your simulation crashed :(. This could be because of several reasons.The most common are:
         > Your system couldn't fit a single VirtualClient: try lowering `client_resources`.
"""


def test_tensorflow_eager_failed_to_allocate_memory_is_gpu_oom() -> None:
    assert reason_and_rule(_FLOWER_TF_OOM) == ("gpu_oom", "framework-oom-wording")
    assert (
        reason_of(
            "tensorflow.python.framework.errors_impl.ResourceExhaustedError: failed to allocate memory [Op:AddV2]"
        )
        == "gpu_oom"
    )


def test_the_same_words_on_the_cpu_are_not_the_gpus() -> None:
    line = "tensorflow.python.framework.errors_impl.ResourceExhaustedError: {{function_node __wrapped__Mul_device_/job:localhost/replica:0/task:0/device:CPU:0}} failed to allocate memory [Op:Mul]"
    assert reason_of(line) != "gpu_oom"


# ---------------------------------------------------------------- a simulation that cannot place a client

# flwrlabs/flower#4138 (case 1272): another job held GPU3 of six; the traceback is cut by the report and the
# error line is the title.
_FLOWER_ACTORPOOL = """
Error executing job with overrides: ['num_rounds=3']
Traceback (most recent call last):
  File "/home/ubuntu/son.nh/venomancer_flower/main.py", line 47, in main
    history = fl.simulation.start_simulation(
  File "/home/ubuntu/miniconda3/envs/pytorch-gpu/lib/python3.10/site-packages/flwr/simulation/app.py", line 289, in start_simulation
ValueError: ActorPool is empty. Stopping Simulation. Check 'client_resources' passed to `start_simulation`
"""


def test_an_empty_actor_pool_is_the_launchs_request() -> None:
    assert reason_and_rule(_FLOWER_ACTORPOOL) == ("argument_error", "simulation-resources-unmet")


def test_flowers_advice_after_a_crash_is_not_the_cause() -> None:
    assert (
        reason_of("         > Your system couldn't fit a single VirtualClient: try lowering `client_resources`.")
        == "unknown"
    )


# ---------------------------------------------------------------- a kernel launch's own configuration

# autogluon/autogluon#3063 (case 1273): CatBoost on GPU inside AutoGluon's fit; the same fit runs on CPU.
_CATBOOST_LAUNCH = """
Fitting model: CatBoost ...
	Training CatBoost with GPU, note that this may negatively impact model quality compared to CPU training.
Application terminated with error: ??+0 (0x7F4862637B94)
??+0 (0x7F4AF9326A00)

(TCatBoostException) catboost/cuda/cuda_lib/cuda_base.h:261: CUDA error 9: invalid configuration argument
uncaught exception:
    address -> 0x3087f1b0410
    what() -> "catboost/cuda/cuda_lib/cuda_base.h:261: CUDA error 9: invalid configuration argument"
    type -> TCatBoostException
"""


def test_a_launch_configuration_cuda_refuses_is_the_launching_code() -> None:
    assert reason_and_rule(_CATBOOST_LAUNCH) == ("framework_error", "cuda-launch-config")
    assert reason_of("RuntimeError: CUDA error: invalid configuration argument") == "framework_error"
    assert reason_of("RuntimeError: CUDA error: too many resources requested for launch") == "framework_error"


def test_device_faults_stay_cuda_errors() -> None:
    assert reason_of("RuntimeError: CUDA error: an illegal memory access was encountered") == "cuda_error"
    assert reason_of("RuntimeError: CUDA error: unspecified launch failure") == "cuda_error"


# ---------------------------------------------------------------- builds without GPU support

# autogluon/autogluon#916 (case 1274): each image-classification trial's result carries its traceback as
# quoted strings.
_AUTOGLUON_MXNET = """
               '    raise get_last_ffi_error()\\n'
               'mxnet.base.MXNetError: Traceback (most recent call last):\\n'
               '  File "src/ndarray/ndarray.cc", line 1298\\n'
               'MXNetError: GPU is not enabled\\n',
  'train_acc': -1,
  'valid_acc': -1}
"""


def test_mxnet_and_paddle_built_without_cuda_are_installation_problems() -> None:
    assert reason_and_rule(_AUTOGLUON_MXNET) == ("import_error", "gpu-support-absent")
    assert (
        reason_of("RuntimeError: Cannot use GPU because you have installed CPU version PaddlePaddle.") == "import_error"
    )


# ---------------------------------------------------------------- NNI's missing GPU index

# microsoft/nni#2874 (case 1275): the error line is the title, laid out as nnimanager.log writes.
_NNI_GPU_INDEX = """
[9/8/2020, 5:19:44 PM] DEBUG [ 'GET: /experiment: body:\\n{}' ]
[9/8/2020, 5:19:44 PM] ERROR [ 'Training service error: Specified GPU index not found:' ]
[9/8/2020, 5:20:49 PM] INFO [ 'Change NNIManager status from: ERROR to: STOPPING' ]
[9/8/2020, 5:20:49 PM] INFO [ 'Stopping experiment, cleaning up ...' ]
"""


def test_a_gpu_index_the_machine_lacks_is_the_launchs() -> None:
    assert reason_and_rule(_NNI_GPU_INDEX) == ("argument_error", "invalid-device-ordinal")


# ---------------------------------------------------------------- a NaN loss named the other way round

# himkt/allennlp-optuna#49 (case 1277): Optuna's warning carries the exception's repr.
_OPTUNA_NAN = """
[W 2021-11-22 20:26:30,880] Trial X failed because of the following error: ValueError('nan loss encountered')
2021-11-22 20:26:30,886 - CRITICAL - root - Uncaught exception
Traceback (most recent call last):
  File "site-packages/optuna/study/_optimize.py", line 264, in _run_trial
    raise func_err
"""


def test_nan_loss_encountered_is_a_divergence() -> None:
    assert reason_and_rule(_OPTUNA_NAN) == ("loss_divergence", "loss-nan")
    assert reason_of("ValueError: nan loss encountered") == "loss_divergence"
    assert reason_of("Batch 212: Invalid loss, terminating training") == "loss_divergence"
