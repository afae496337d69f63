"""Classes of misses from issue 19's nineteenth round (corpus cases 1543-1570: weather and climate models,
machine-learned interatomic potentials and molecular models, operator learning, medical imaging): bash's
job-control report of a background job killed, after a caught error the program went on from; the CUDA driver
API's CUDA_ERROR_* names in another library's words; Hydra that cannot find the primary config; MONAI's wrapper
around a transform that failed; OpenMM without the platform or plugin kernels the run asks for. Error messages
are verbatim from the public reports named in each test (the composed ones say so); hosts, paths and pids may be
made up."""
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


# ---------------------------------------------------------------- the driver API's CUDA_ERROR_* names in a library's words

# openmm/openmm-torch#4 (case 1557): openmm-torch's force on OpenMM's CUDA platform; the CPU platform works.
_OPENMM_INVALID_HANDLE = r"""
(simu) [yaoyic@yaoyi-pc test-openmm-torch]$ python test_model.py
Traceback (most recent call last):
  File "test_model.py", line 15, in <module>
    print(context.getState(getEnergy=True).getPotentialEnergy())
  File "/home/yaoyic/miniconda3/envs/simu/lib/python3.7/site-packages/simtk/openmm/openmm.py", line 11060, in getState
    state = _openmm.Context_getState(self, types, enforcePeriodicBox, groups_mask)
Exception: Error invoking kernel: CUDA_ERROR_INVALID_HANDLE (400)
"""


def test_a_driver_api_fault_in_openmm_s_words_is_a_cuda_fault() -> None:
    assert reason_and_rule(_OPENMM_INVALID_HANDLE) == ("cuda_error", "cuda-library-old-wording")


def test_the_driver_api_s_name_for_a_build_that_does_not_fit_is_an_installation_problem() -> None:
    # seekrcentral/seekr2#8 (the report's title): OpenMM loading its CUDA module under seekr2
    line = "simtk.openmm.OpenMMException: Error loading CUDA module: CUDA_ERROR_INVALID_PTX (218)"
    assert reason_and_rule(line) == ("import_error", "no-kernel-image")


def test_the_driver_api_s_other_names_keep_their_reasons() -> None:
    # the GPU's memory, the GPU's hardware, a runtime without its GPU (cases 305 and 912's lines)
    assert (
        reason_of("failed to allocate 2.00G (2147483648 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory")
        == "gpu_oom"
    )
    assert (
        reason_of(
            "2024-03-05 09:11:40.402113: F tensorflow/stream_executor/lib/statusor.cc:34] Attempting to fetch value instead of handling error Internal: failed initializing StreamExecutor for CUDA device ordinal 0: Internal: failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error encountered"
        )
        == "gpu_hardware"
    )
    assert (
        reason_of(
            "2020-01-12 14:46:01.536588: E tensorflow/stream_executor/cuda/cuda_driver.cc:318] failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"
        )
        == "import_error"
    )


def test_openmm_s_own_exceptions_without_a_cuda_status_are_no_cuda_fault() -> None:
    text = """
  File "/data/shared/software/python_env/anaconda3/envs/rew/lib/python3.9/site-packages/openmm/openmm.py", line 16230, in __init__
    _openmm.Context_swiginit(self, _openmm.new_Context(*args))
openmm.OpenMMException: Particle coordinate is NaN.  For more information, see https://github.com/openmm/openmm/wiki/Frequently-Asked-Questions#nan
"""
    assert reason_of(text) != "cuda_error"


# ---------------------------------------------------------------- Hydra's primary config not found

# atomistic-machine-learning/schnetpack-gschnet#16 (case 1549): gschnet_train against a schnetpack 2.1.0 that no
# longer ships the config the launcher names.
_GSCHNET_PRIMARY_CONFIG = r"""
$ gschnet_train --config-dir=/home/huzheyu/ai_lab/gener_ai/test experiment=gschnet_qm9
Cannot find primary config 'train'. Check that it's in your config search path.

Config search path:
      provider=hydra, path=pkg://hydra.conf
      provider=main, path=pkg://schnetpack.configs
      provider=hydra-colorlog, path=pkg://hydra_plugins.hydra_colorlog.conf
      provider=command-line, path=file:///home/huzheyu/ai_lab/gener_ai/test
      provider=schema, path=structured://

Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
"""


def test_hydra_s_primary_config_not_found_is_a_missing_file() -> None:
    assert reason_and_rule(_GSCHNET_PRIMARY_CONFIG) == ("file_not_found", "hydra-primary-config-missing")


def test_the_same_for_a_library_that_composes_its_own_config() -> None:
    # yangchris11/samurai#44: SAMURAI's demo through SAM 2's build_sam2_video_predictor
    text = r"""
      Traceback (most recent call last):
        File "/kaggle/working/samurai/scripts/demo.py", line 44, in main
          predictor = build_sam2_video_predictor(model_cfg, args.model_path, device="cuda:0")
        File "/opt/conda/lib/python3.10/site-packages/sam2/build_sam.py", line 71, in build_sam2_video_predictor
          cfg = compose(config_name=config_file, overrides=hydra_overrides)
hydra.errors.MissingConfigException: Cannot find primary config 'configs/samurai/sam2.1_hiera_b+.yaml'. Check that it's in your config search path.
"""
    assert reason_of(text) == "file_not_found"
    # facebookresearch/sam2#474 (the report's title)
    assert reason_of("hydra.errors.MissingConfigException: Primary config module 'sam2' not found.") == "file_not_found"


def test_hydra_s_other_refusals_keep_their_reasons() -> None:
    # a plugin's group that is not installed (4D-Humans, case 1328) and an override of a key the config lacks
    assert (
        reason_of("hydra.errors.MissingConfigException: In 'hydra/config': Could not find 'hydra/job_logging/colorlog'")
        == "import_error"
    )
    assert reason_of("hydra.errors.ConfigCompositionException: Could not override 'lr'.") == "argument_error"


# ---------------------------------------------------------------- MONAI's wrapper around a transform that failed

# Project-MONAI/MONAILabel#1015 (case 1548): MONAI Label's segmentation training with its ThreadDataLoader; the
# exception the transform raised is cut in the report.
_MONAILABEL_APPLYING_TRANSFORM = r"""
[2022-09-25 04:36:39,812] [393] [MainThread] [INFO] (monailabel.utils.async_tasks.task:36) - Train request: {'model': 'segmentation', 'name': 'train_01', 'pretrained': True, 'device': 'cuda', 'max_epochs': 50, 'early_stop_patience': -1, 'val_split': 0.2, 'train_batch_size': 1, 'val_batch_size': 1, 'multi_gpu': True, 'gpus': 'all', 'dataset': 'SmartCacheDataset', 'dataloader': 'ThreadDataLoader', 'client_id': 'user-xyz'}
  File "/home/amitjc/anaconda3/envs/monailabel-env/lib/python3.9/site-packages/monai/transforms/transform.py", line 118, in apply_transform
    raise RuntimeError(f"applying transform {transform}") from e
RuntimeError: applying transform <monai.transforms.spatial.dictionary.RandFlipd object at 0x7feea7583760>
Exception in thread Thread-9:
Traceback (most recent call last):
  File "/home/amitjc/anaconda3/envs/monailabel-env/lib/python3.9/site-packages/monai/transforms/transform.py", line 90, in apply_transform
    return [_apply_transform(transform, item, unpack_items) for item in data]
  File "/home/amitjc/anaconda3/envs/monailabel-env/lib/python3.9/site-packages/monai/transforms/intensity/dictionary.py", line 421, in __call__
    d[key] = self.shifter(d[key], factor=factor, randomize=False)
"""


def test_monai_s_transform_wrapper_is_the_data_pipeline_s() -> None:
    assert reason_and_rule(_MONAILABEL_APPLYING_TRANSFORM) == ("dataloader_error", "monai-transform-failed")


def test_ignite_s_account_of_the_same_wrapper() -> None:
    # Project-MONAI/MONAILabel#718: DeepEdit training on the spleen dataset from 3D Slicer
    line = "[2022-04-01 12:53:20,154] [20720] [MainThread] [ERROR] (ignite.engine.engine.SupervisedTrainer:853) - Current run is terminating due to exception: applying transform <monai.transforms.compose.Compose object at 0x00000289860C3670>"
    assert reason_and_rule(line) == ("dataloader_error", "monai-transform-failed")


_WRAPPED = r"""
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/monai/transforms/transform.py", line 141, in apply_transform
    return _apply_transform(transform, data, unpack_items, lazy, overrides, log_stats)
  File "/opt/conda/lib/python3.10/site-packages/monai/transforms/io/array.py", line 275, in __call__
    img = reader.read(filename)
INNER

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/monai/transforms/transform.py", line 171, in apply_transform
    raise RuntimeError(f"applying transform {transform}") from e
RuntimeError: applying transform <monai.transforms.io.dictionary.LoadImaged object at 0x7f3b2c1d5e10>
"""


def test_what_the_wrapper_wraps_decides_when_it_names_its_cause() -> None:
    # composed: the chained traceback MONAI prints, with the wrapped exception kept
    missing = "FileNotFoundError: [Errno 2] No such file or directory: '/data/imagesTr/liver_17.nii.gz'"
    assert reason_of(_WRAPPED.replace("INNER", missing)) == "file_not_found"
    oom = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.53 GiB (GPU 0; 7.79 GiB total capacity; 5.80 GiB already allocated; 812.00 MiB free; 6.12 GiB reserved in total by PyTorch)"
    assert reason_of(_WRAPPED.replace("INNER", oom)) == "gpu_oom"
    assert reason_of(_WRAPPED.replace("INNER", "KeyError: 'label'")) == "dataloader_error"


def test_other_words_for_applying_a_transform_are_not_monai_s_wrapper() -> None:
    assert reason_of("INFO: applying transform to 1200 images") == "unknown"


# ---------------------------------------------------------------- OpenMM without the platform or plugin the run asks for

# openmm/openmm-ml#27 (case 1558): openmm-ml's test with an openmm-torch built from source against a nightly OpenMM.
_OPENMM_ML_KERNELS = r"""
======================================================================
ERROR: testCreateMixedSystem (__main__.TestMLPotential)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/home/mwieder/openmm-ml/test/TestMLPotential.py", line 19, in testCreateMixedSystem
    mixedContext = mm.Context(mixedSystem, mm.VerletIntegrator(0.001), platform)
  File "/data/shared/software/python_env/anaconda3/envs/rew/lib/python3.9/site-packages/openmm/openmm.py", line 16230, in __init__
    _openmm.Context_swiginit(self, _openmm.new_Context(*args))
openmm.OpenMMException: Specified a Platform for a Context which does not support all required kernels
"""


def test_a_platform_without_the_plugin_s_kernels_is_an_installation_problem() -> None:
    assert reason_and_rule(_OPENMM_ML_KERNELS) == ("import_error", "openmm-platform-missing")


def test_a_platform_that_is_not_registered_is_the_same_class() -> None:
    # openmm/openmm#4370: the CUDA plugin that did not load (libcuda.so.1 not found)
    text = r"""
Traceback (most recent call last):
  File "/home/compu/pythonProject/PTA/swm4_droplet.py", line 18, in <module>
    platform = Platform.getPlatformByName('CUDA')
  File "/home/compu/anaconda3/envs/pythonProjects/lib/python3.10/site-packages/openmm/openmm.py", line 18453, in getPlatformByName
    return _openmm.Platform_getPlatformByName(name)
openmm.OpenMMException: There is no registered Platform called "CUDA"
"""
    assert reason_and_rule(text) == ("import_error", "openmm-platform-missing")


def test_openmm_s_other_exceptions_are_not_this_class() -> None:
    text = r"""
  File "/home/user/miniconda3/envs/omm/lib/python3.11/site-packages/openmm/openmm.py", line 3620, in step
    return _openmm.LangevinMiddleIntegrator_step(self, steps)
openmm.OpenMMException: Particle coordinate is NaN.  For more information, see https://github.com/openmm/openmm/wiki/Frequently-Asked-Questions#nan
"""
    assert reason_of(text) != "import_error"
