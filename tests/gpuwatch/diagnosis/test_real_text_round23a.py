"""Classes of misses from issue 19's twenty-third round (corpus cases 1701-1721: reinforcement-learning training
stacks: stable-baselines3 and its zoo, FinRL and ElegantRL, d3rlpy, Acme, TF-Agents, RL4J, mjlab on rsl_rl, DeepRacer,
EPyMARL and PyMARL, the MAPPO codebase, the MARL book's code, OpenAI baselines, Intel's Coach, garage): the NaN
named before the loss ("NaN detected in loss function, aborting training."), which the loss-nan rule read only the
other way round; a Java stack trace whose innermost frame logback marks with the library jar it came from
("~[rl4j-core-1.0.0-beta.jar:na]"), where the exception line alone had been judged by its type; and a traceback
frame pasted with the head of its path cut off, 'File "' lost with it
('python3.10/site-packages/tensorflow/python/ops/check_ops.py", line 1153, in assert_rank'), which was no frame,
so the exception under it was judged by its type alone. Error messages are verbatim from the public reports named
in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- the NaN named before the loss

# ARCC-RACE/deepracer-for-dummies#50 (case 1707): DeepRacer local training crashes after arbitrary iterations.
_DEEPRACER_NAN = r"""
/usr/local/lib/python3.6/dist-packages/numpy/core/_methods.py:26: RuntimeWarning: invalid value encountered in reduce
  return umr_maximum(a, axis, None, out, keepdims)
/usr/local/lib/python3.6/dist-packages/numpy/core/_methods.py:29: RuntimeWarning: invalid value encountered in reduce
  return umr_minimum(a, axis, None, out, keepdims)
{"simapp_exception": {"version": "1.0", "date": "2019-09-11 02:54:19.345983", "function": "training_worker", "message": "NaN detected in loss function, aborting training. Job failed!", "exceptionType": "training_worker.exceptions", "eventType": "system_error", "errorCode": "503"}}
"""


def test_nan_detected_in_the_loss_is_a_divergence() -> None:
    assert reason_and_rule(_DEEPRACER_NAN) == ("loss_divergence", "loss-nan")


def test_the_same_order_for_gradients_and_an_inf() -> None:
    assert reason_of("NaN detected in gradients, skipping the run") == "loss_divergence"
    assert reason_of("Inf values detected in the loss at step 1200") == "loss_divergence"


def test_no_nan_detected_and_nan_elsewhere_are_not_a_divergence() -> None:
    # a check that found nothing
    assert reason_of("step 500: no NaN detected in loss, continuing") == "unknown"
    # NaN found in the input data, not in the loss
    assert reason_of("NaN detected in input observations, replaced by zeros") == "unknown"


# ---------------------------------------------------------------- a frame pasted with its head cut off

# tensorflow/agents#958 (case 1712): a TF-Agents training loop on a user's environment; the report kept the
# last frame only, from the middle of its path.
_TF_AGENTS_CUT_FRAME = r"""
python3.10/site-packages/tensorflow/python/ops/check_ops.py", line 1153, in assert_rank
    raise ValueError(
ValueError: Tensor  must have rank 3.  Received rank 2, shape (1, 0)
"""


def test_a_frame_with_its_head_cut_off_still_says_where_it_was_raised() -> None:
    assert reason_and_rule(_TF_AGENTS_CUT_FRAME) == ("framework_error", "exception-ValueError")


def test_a_cut_frame_in_the_run_s_own_code_is_the_script_s() -> None:
    # the same cut in the project's own file: the run's ValueError
    assert (
        reason_of(
            'rl_project/envs/trading_env.py", line 88, in step\n'
            "    raise ValueError(\n"
            "ValueError: Tensor  must have rank 3.  Received rank 2, shape (1, 0)"
        )
        == "script_error"
    )


def test_prose_that_quotes_a_path_is_not_a_frame() -> None:
    # a quoted path without the line and the function is no frame: the exception keeps its type's reason
    assert (
        reason_of(
            'see tensorflow/python/ops/check_ops.py", the rank check\nValueError: Tensor  must have rank 3.  Received rank 2, shape (1, 0)'
        )
        == "script_error"
    )


# ---------------------------------------------------------------- a Java frame in a library's jar

# deeplearning4j/deeplearning4j#5266 (case 1702): RL4J's QLearningDiscrete on VizDoom, after the upgrade.
_RL4J_NPE = """
java.lang.NullPointerException: null
	at org.deeplearning4j.rl4j.learning.sync.Transition.dup(Transition.java:50) ~[rl4j-core-1.0.0-beta.jar:na]
	at org.deeplearning4j.rl4j.learning.sync.Transition.dup(Transition.java:38) ~[rl4j-core-1.0.0-beta.jar:na]
	at org.deeplearning4j.rl4j.learning.sync.ExpReplay.getBatch(ExpReplay.java:45) ~[rl4j-core-1.0.0-beta.jar:na]
	at org.deeplearning4j.rl4j.learning.sync.ExpReplay.getBatch(ExpReplay.java:52) ~[rl4j-core-1.0.0-beta.jar:na]
	at org.deeplearning4j.rl4j.learning.sync.qlearning.discrete.QLearningDiscrete.trainStep(QLearningDiscrete.java:162) ~[rl4j-core-1.0.0-beta.jar:na]
	at org.deeplearning4j.rl4j.learning.sync.qlearning.QLearning.trainEpoch(QLearning.java:93) ~[rl4j-core-1.0.0-beta.jar:na]
	at org.deeplearning4j.rl4j.learning.sync.SyncLearning.train(SyncLearning.java:38) ~[rl4j-core-1.0.0-beta.jar:na]
	at org.deeplearning4j.examples.rl4j.Doom.doomLearn(Doom.java:101) [classes/:na]
	at org.deeplearning4j.examples.rl4j.Doom.main(Doom.java:79) [classes/:na]
"""


def test_a_java_exception_raised_in_a_library_jar_is_the_framework_s() -> None:
    assert reason_and_rule(_RL4J_NPE) == ("framework_error", "exception-NullPointerException")


def test_a_java_exception_in_the_application_s_classes_or_without_frames_stays_the_script_s() -> None:
    # the innermost frame in the application's own classes
    assert (
        reason_of(
            "java.lang.NullPointerException: null\n"
            "\tat org.deeplearning4j.examples.rl4j.Doom.doomLearn(Doom.java:101) [classes/:na]\n"
            "\tat org.deeplearning4j.examples.rl4j.Doom.main(Doom.java:79) [classes/:na]"
        )
        == "script_error"
    )
    # the same exception with no frame under it
    assert reason_of("java.lang.NullPointerException: null") == "script_error"
