"""Classes of misses from issue 19's nineteenth round (corpus cases 1543-1570: weather and climate models,
machine-learned interatomic potentials and molecular models, operator learning, medical imaging): bash's
job-control report of a background job killed, after a caught error the program went on from. Error messages
are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from gpuwatch.diagnosis.logview import PROGRESS
from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- bash's job-control report of a kill

# gcorso/DiffDock#48 (case 1554): DiffDock inference run in the background; the complex that fails is caught and
# counted, the run prints its summary, and bash reports the job killed.
_DIFFDOCK_CAUGHT_THEN_KILLED = r"""
Size of test dataset:  1
0it [00:00, ?it/s]Failed on ['data/7rfw_receptor.pdb____data/7rfw_ligand.mol2'] index 2 is out of bounds for axis 0 with size 2
1it [01:09, 70.00s/it]
Failed for 1 complexes
Skipped 0 complexes
Results are in results/user_predictions_small
[2]-  Killed                  python -m inference --protein_path data/7rfw_receptor.pdb --ligand data/7rfw_ligand.mol2 --out_dir results/user_predictions_small --inference_steps 20 --samples_per_complex 40 --batch_size 10 --actual_steps 18 --no_final_step_noise
"""


def test_a_background_job_bash_reports_killed_is_a_kill() -> None:
    assert reason_and_rule(_DIFFDOCK_CAUGHT_THEN_KILLED) == ("host_oom", "sigkill-in-text")


def test_the_job_report_alone_is_a_kill() -> None:
    assert reason_and_rule(
        "[2]-  Killed                  python -m inference --protein_path data/7rfw_receptor.pdb"
    ) == (
        "host_oom",
        "sigkill-in-text",
    )


def test_tqdm_s_bar_without_a_total_is_progress_and_its_zeroth_step_is_not() -> None:
    assert PROGRESS.search("1it [01:09, 70.00s/it]")
    assert PROGRESS.search("139it [11:44:06, 32.48s/it]")
    assert not PROGRESS.search("0it [00:00, ?it/s]")
    assert not PROGRESS.search("Failed on ['complex_0'] index 2 is out of bounds for axis 0 with size 2")


def test_the_caught_error_without_the_kill_is_still_the_index_error() -> None:
    text = _DIFFDOCK_CAUGHT_THEN_KILLED.replace(
        "[2]-  Killed                  python -m inference", "[2]-  Done                    python -m inference"
    )
    assert reason_of(text) == "script_error"


def test_other_signals_in_a_job_report_are_shell_reported_crashes() -> None:
    assert reason_of("[1]+  Segmentation fault      (core dumped) python train.py --cfg base.yaml") == "framework_error"
    assert reason_of("[2]-  Bus error               python infer.py") == "framework_error"


def test_a_job_that_is_done_or_stopped_is_no_failure() -> None:
    assert reason_of("[1]+  Done                    python train.py") == "unknown"
    assert reason_of("[1]+  Stopped                 python train.py") == "unknown"
