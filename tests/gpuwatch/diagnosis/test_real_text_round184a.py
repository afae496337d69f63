"""Classes of misses from issue 19's rounds one hundred and eighty-four to one hundred and eighty-six (corpus cases
6380-6432: data loading and storage, checkpoints and resuming, runs stopped from outside; reports found by generic
queries that show a printed line, taken as the search returned them). Error messages are verbatim from the public
reports named in each test; hosts, paths, pids and job names may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule

_TORCH_LOAD = (
    "Traceback (most recent call last):\n"
    '  File "src/eval_task_addition.py", line 27, in <module>\n'
    "    finetuned_state_dict = torch.load(finetuned_checkpoint)\n"
    '  File "/opt/conda/envs/tv/lib/python3.10/site-packages/torch/serialization.py", line 815, in load\n'
    "    return _legacy_load(opened_file, map_location, pickle_module, **pickle_load_args)\n"
)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # biocore/qiime#1048 (case 6430) and marbl/canu#1214 (case 6431): Torque ends a job at its wall-time limit.
        (
            "  processed 1000000 / 1214877 sequences\n=>> PBS: job killed: walltime 259217 exceeded limit 259200\n",
            "preempted",
            "preempted",
        ),
        # CoBrALab/MAGeTbrain#20 (case 6429): Moab's mail for the same end.
        (
            "PBS Job Id: 26066307.gpc-sched-ib0\njob deleted\nJob deleted at request of root@gpc-sched-ib0\nMOAB_INFO:  job exceeded wallclock limit\n",
            "preempted",
            "preempted",
        ),
        # cavalleria/cavaface#57 (case 6409): a TorchScript archive read with torch.load.
        (
            "Traceback (most recent call last):\n  File \"train.py\", line 112, in <module>\n    BACKBONE.load_state_dict(torch.load('IR_SE_100_Combined_Epoch_24.pth'))\nModuleNotFoundError: No module named '__torch__'\n",
            "checkpoint_load_error",
            "torchscript-archive-via-torch-load",
        ),
        # nomic-ai/contrastors#60 (case 6390): a gzip shard streamed from S3 ends early.
        (
            'gzip.py 507 read\nraise EOFError("Compressed file ended before the "\nEOFError:\n\nCompressed file ended before the end-of-stream marker was reached\n',
            "dataloader_error",
            "compressed-data-truncated",
        ),
        # mlfoundations/task_vectors#11 (case 6401): torch.load's own check of the file, raised in its frames.
        (
            _TORCH_LOAD + "RuntimeError: Invalid magic number; corrupt file?\n",
            "checkpoint_load_error",
            "exception-RuntimeError",
        ),
        # pytorch/pytorch#12042 (case 6404): storages of the wrong size in a checkpoint saved during training.
        (
            _TORCH_LOAD + "RuntimeError: storage has wrong size: expected -4669315570785868528 got 512\n",
            "checkpoint_load_error",
            "exception-RuntimeError",
        ),
    ],
)
def test_round184_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_walltime_the_scheduler_reports_as_used_is_no_kill() -> None:
    # Torque's end-of-job summary names the walltime used; only "job killed: walltime ... exceeded limit" is the kill.
    assert reason_and_rule("resources_used.walltime=01:02:03\nExit_status=0\n") == ("unknown", None)
