"""Classes of misses from issue 19's rounds one hundred and seventy-seven and one hundred and seventy-eight (corpus
cases 6240-6275: reports found by generic queries that show at least one line the failing run printed: multi-node
launchers (Horovod, MPI, DeepSpeed's and accelerate's, torch's rendezvous), JAX, XLA and TensorFlow on GPUs; taken as
the search returned them). Error messages are verbatim from the public reports named in each test; hosts, paths and
pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule

_TCPSTORE = (
    "Traceback (most recent call last):\n"
    '  File "/home/u/envs/p36/lib/python3.7/site-packages/torch/distributed/distributed_c10d.py", line 406, in init_process_group\n'
    "    store, rank, world_size = next(rendezvous(url))\n"
    '  File "/home/u/envs/p36/lib/python3.7/site-packages/torch/distributed/rendezvous.py", line 143, in _env_rendezvous_handler\n'
    "    store = TCPStore(master_addr, master_port, world_size, start_daemon)\n"
)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # horovod/horovod#1414 (case 6245): horovodrun over two servers; its task servers never call the driver back.
        (
            "Waiting for the hosts to acknowledge.\nException: Timed out waiting for tasks to start. Please check connectivity between servers. You may need to increase the --start-timeout parameter if you have too many servers.\n",
            "network_error",
            "launcher-hosts-unreachable",
        ),
        # horovod/horovod#2803 (case 6246): horovodrun's ssh check of the second host times out.
        (
            "Checking ssh on all remote hosts.\nssh not successful for host 172.31.50.18:\nssh: connect to host 172.31.50.18 port 12345: Connection timed out\n\nTraceback (most recent call last):\n  File \"/usr/local/lib/python3.7/dist-packages/horovod/runner/launch.py\", line 586, in _run_static\n    raise RuntimeError('could not connect to some hosts via ssh')\nRuntimeError: could not connect to some hosts via ssh\n",
            "network_error",
            "launcher-hosts-unreachable",
        ),
        # karpathy/llm.c#426 (case 6250): every Slurm task aborts in Open MPI, MPI_Barrier called before MPI_Init.
        (
            "*** The MPI_Barrier() function was called before MPI_INIT was invoked.\n*** This is disallowed by the MPI standard.\n*** Your MPI job will now abort.\nsrun: error: gpu2-003: task 0: Exited with exit code 1\n",
            "script_error",
            "mpi-called-outside-init",
        ),
        # huggingface/accelerate#2240 (case 6251): torch's elastic rendezvous parsing the endpoint accelerate passed on.
        (
            'Traceback (most recent call last):\n  File "/home/u/envs/ft/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", line 95, in create_rdzv_handler\n    master_addr, master_port = parse_rendezvous_endpoint(endpoint, -1)\n  File "/home/u/envs/ft/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/utils.py", line 105, in parse_rendezvous_endpoint\n    raise ValueError(\nValueError: The port number of the rendezvous endpoint \'None:None\' must be an integer between 0 and 65536.\n',
            "argument_error",
            "launcher-refused-input",
        ),
        # yangkky/distributed_tutorial#3 (case 6253) and facebookresearch/fairseq#604 (case 6254): the TCPStore of the
        # rendezvous never reaches the master: ETIMEDOUT in its own words.
        (_TCPSTORE + "RuntimeError: Connection timed out\n", "network_error", "connection-reset"),
        # wutzebaer/tensorflow-5090#3 (case 6261): XLA finds no ptxas and no nvJitLink in the install.
        (
            "XLA-Kompilierung fehlgeschlagen!\nNo PTX compilation provider is available. Neither ptxas/nvlink nor nvjtlink is available. As a fallback you can enable JIT compilation in the CUDA driver via the flag `--xla_gpu_unsafe_fallback_to_driver_on_ptxas_not_found`. Details:\n",
            "import_error",
            "undefined-symbol",
        ),
        # jax-ml/jax#11828 (case 6263): a jaxlib built against another CUDA than the one found at run time.
        (
            "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: CustomCall failed: jaxlib/cuda/cuda_prng_kernels.cc:32: operation cudaGetLastError() failed: cudaGetErrorString symbol not found.\n",
            "import_error",
            "undefined-symbol",
        ),
        # tensorflow/tensorflow#50606 (case 6264): TensorFlow 2's cuDNN pooling kernel fails to launch.
        (
            "InternalError:  dnn PoolBackward launch failed\n\t [[node gradient_tape/model/average_pooling2d/AvgPool/AvgPoolGrad (defined at <ipython-input-8-b1480782523a>:1) ]] [Op:__inference_train_function_23418]\n",
            "cuda_error",
            "cuda-library-old-wording",
        ),
        # sanchit-gandhi/whisper-jax#211 (case 6270): zsh's job table reports the process killed.
        (
            "WARNING:2025-06-15 17:04:55,449:jax._src.xla_bridge:791: An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. Falling back to cpu.\n[1]    13708 killed     python whisper-jax.py\n",
            "host_oom",
            "sigkill-in-text",
        ),
        # The same kill of a foreground command, in zsh's words.
        ("Epoch 3/10\nzsh: killed     python train.py\n", "host_oom", "sigkill-in-text"),
        # tensorflow/tensorflow#33809 (case 6271): six's raise_from, run from a string, between TensorFlow's execute
        # and the exception: TensorFlow's frame is the last that counts.
        (
            'Traceback (most recent call last):\n  File "train.py", line 143, in <module>\n    callbacks=callbacks)\n  File "/home/olk/.venv/tf2/lib/python3.6/site-packages/tensorflow_core/python/keras/engine/training.py", line 728, in fit\n    use_multiprocessing=use_multiprocessing)\n  File "/home/olk/.venv/tf2/lib/python3.6/site-packages/tensorflow_core/python/eager/execute.py", line 67, in quick_execute\n    six.raise_from(core._status_to_exception(e.code, message), None)\n  File "<string>", line 3, in raise_from\ntensorflow.python.framework.errors_impl.InvalidArgumentError:  var and grad do not have the same shape[2,1536] [512,1536]\n',
            "framework_error",
            "exception-InvalidArgumentError",
        ),
    ],
)
def test_round177_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_ssh_that_finds_no_route_alone_is_a_consequence_not_the_launchers_verdict() -> None:
    # A machine that powered off answers ssh the same way (case 5902): ssh's line stays the weak cascade.
    assert reason_and_rule("ssh: connect to host gpu-srv01 port 2180: No route to host\n") == (
        "network_error",
        "connection-reset",
    )


def test_zsh_reporting_a_job_done_is_no_kill() -> None:
    assert reason_and_rule("[1]  + 48213 done       python train.py\n") == ("unknown", None)
