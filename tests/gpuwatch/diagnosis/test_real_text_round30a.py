"""Classes of misses from issue 19's thirtieth round (corpus cases 1942-1955, driving policies in simulation: LMDrive,
Roach, TCP, navsim, CIL, RL-ViGen, ThinkTwice, MetaDrive, InterFuser, CARLA's gym; 1962-1981, spiking networks:
SpikingJelly, snnTorch, BindsNET, Spike-Driven Transformer, QKFormer, brian2cuda, SLAYER, SpikeGPT): TensorFlow's
missing checkpoint key with its "(see above for traceback)", the simulator's TCP connection closing, and autograd's
check on a graph already freed. Error messages are verbatim from the public reports named in each test; hosts,
paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule

# mvpcom/carlaILTrainer#6 (case 1949).
_TF_KEY_NOT_FOUND = """
python run_CIL.py
NotFoundError (see above for traceback): Key Network/Branch_0/Variable not found in checkpoint
     [[Node: save/RestoreV2 = RestoreV2[dtypes=[DT_FLOAT, DT_FLOAT], _device="/job:localhost/replica:0/task:0/device:CPU:0"](_arg_save/Const_0_0, save/RestoreV2/tensor_names, save/RestoreV2/shape_and_slices)]]
"""

# (case 1955) CARLA's gym environment resetting after the simulator went away.
_CARLA_TCP = """
  File "/home/ubuntu/carla-gym/carla_gym/envs/carla/tcp.py", line 91, in _read_n
    raise TCPConnectionError(self._logprefix + 'connection closed')
carla.tcp.TCPConnectionError: (localhost:44405) connection closed
Killing live carla processes set()
"""

# BICLab/Spike-Driven-Transformer-V2#17 (case 1969): the message alone.
_BACKWARD_TWICE = """
Epoch: [0]  [ 120/1251]  eta: 0:21:10  lr: 0.000010  loss: 6.8012
Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.
"""


def test_tensorflow_s_missing_checkpoint_key_after_its_traceback_note_is_the_checkpoint_s() -> None:
    assert reason_and_rule(_TF_KEY_NOT_FOUND) == ("checkpoint_load_error", "state-dict")


def test_the_simulator_closing_its_tcp_connection_is_the_network() -> None:
    assert reason_and_rule(_CARLA_TCP) == ("network_error", "http-connection-dropped")


def test_autograd_backward_through_a_freed_graph_is_the_framework_s_check() -> None:
    assert reason_and_rule(_BACKWARD_TWICE) == ("framework_error", "autograd-inplace")
