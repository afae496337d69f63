"""Classes of misses from issue 19's rounds one hundred and thirty-four to one hundred and thirty-eight (corpus cases
5096-5220: reports on TensorFlow and Keras training on GPUs, self-supervised vision pretraining, image classification
training, protein and molecular model training, and GAN training, taken as the search returned them). Error messages are
verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule", "name"),
    [
        # tensorflow/tensorflow#25160 (case 5106): a TF1 notebook's Conv2D: cuDNN failed to initialise, its message first
        (
            'Failed to get convolution algorithm. This is probably because cuDNN failed to initialize, so try looking to see if a warning log message was printed above.\nCaused by op \'Conv2D_12\', defined at:\n  File "/home/wtl/anaconda3/lib/python3.7/runpy.py", line 193, in _run_module_as_main\n    "__main__", mod_spec)\n  File "/home/wtl/anaconda3/lib/python3.7/runpy.py", line 85, in _run_code\n    exec(code, run_globals)\n  File "/home/wtl/anaconda3/lib/python3.7/site-packages/ipykernel_launcher.py", line 16, in <module>\n    app.launch_new_instance()\n  File "/home/wtl/anaconda3/lib/python3.7/site-packages/traitlets/config/application.py", line 658, in launch_instance\n    app.start()\n  File "/home/wtl/anaconda3/lib/python3.7/site-packages/ipykernel/kernelapp.py", line 505, in start\n    self.io_loop.start()\n  File "/home/wtl/anaconda3/lib/python3.7/site-packages/tornado/platform/asyncio.py", line 132, in start\n    self.asyncio_loop.run_forever()\n  File "/home/wtl/anaconda3/lib/python3.7/asyncio/base_events.py", line 528, in run_forever\n    self._run_once()\n  File "/home/wtl/anaconda3/lib/python3.7/asyncio/base_events.py", line 1764, in _run_once\n    handle._run()\n  File "/home/wtl/anaconda3/lib/python3.7/asyncio/events.py", line 88, in _run\n    self._context.run(self._callback, *self._args)\n',
            "cuda_error",
            "tf-cudnn-conv-algorithm",
            "notebook.log",
        ),
        # irdanish11/AnomalyEventDetection#1 (case 5107): a Conv3D model: the same message inside TensorFlow's '2 root error(s) found' block
        (
            "UnknownError: 2 root error(s) found.\n  (0) Unknown: Failed to get convolution algorithm. This is probably because cuDNN failed to initialize, so try looking to see if a warning log message was printed above.\n\t [[{{node conv3d/Conv3D}}]]\n\t [[metrics/acc/Identity/_183]]\n  (1) Unknown: Failed to get convolution algorithm. This is probably because cuDNN failed to initialize, so try looking to see if a warning log message was printed above.\n\t [[{{node conv3d/Conv3D}}]]\n0 successful operations.\n0 derived errors ignored.\n",
            "cuda_error",
            "tf-cudnn-conv-algorithm",
            "train.log",
        ),
        # frankkramer-lab/MIScnn#146 (case 5108): MIScnn in Colab: the same message as an UnknownError in a notebook traceback
        (
            "Epoch 1/100\n\n---------------------------------------------------------------------------\n\nUnknownError                              Traceback (most recent call last)\n\n[<ipython-input-17-0920e1d4f2e6>](https://localhost:8080/#) in <module>()\n      2 \n      3 sample_list = data_io.get_indiceslist()\n----> 4 model.train(sample_list[0:50], epochs=100)\n\n2 frames\n\n[/usr/local/lib/python3.7/dist-packages/tensorflow/python/eager/execute.py](https://localhost:8080/#) in quick_execute(op_name, num_outputs, inputs, attrs, ctx, name)\n     57     ctx.ensure_initialized()\n     58     tensors = pywrap_tfe.TFE_Py_Execute(ctx._handle, device_name, op_name,\n---> 59                                         inputs, attrs, num_outputs)\n     60   except core._NotOkStatusException as e:\n     61     if name is not None:\n\nUnknownError:  Failed to get convolution algorithm. This is probably because cuDNN failed to initialize, so try looking to see if a warning log message was printed above.\n\t [[node model/conv3d/Conv3D\n (defined at /usr/local/lib/python3.7/dist-packages/keras/layers/convolutional.py:238)\n]] [Op:__inference_train_function_5792]\n\nErrors may have originated from an input operation.\nInput Source operations connected to node model/conv3d/Conv3D:\nIn[0] IteratorGetNex\n",
            "cuda_error",
            "tf-cudnn-conv-algorithm",
            "notebook.log",
        ),
        # Sentdex/pygta5#125 (case 5109): tflearn on Windows: the same message after 'UnknownError (see above for traceback)'
        (
            "UnknownError (see above for traceback): Failed to get convolution algorithm. This is probably because cuDNN failed to initialize, so try looking to see if a warning log message was printed above.\n\t [[node Conv2D/Conv2D (defined at C:\\Users\\johnny\\AppData\\Roaming\\Python\\Python36\\site-packages\tflearn\\layers\\conv.py:99) ]]\n",
            "cuda_error",
            "tf-cudnn-conv-algorithm",
            "train.log",
        ),
        # facebookresearch/dinov2#492 (case 5122): DINOv2: the metric logger's running averages gone inf
        (
            "I20250104 12:12:42 90 dinov2 helpers.py:102] Training  [   1250/2500000]  eta: 40 days, 13:22:08  lr: 0.0006 (0.0003)  wd: 0.0400 (0.0400)  mom: 0.9940 (0.9940)  last_layer_lr: 0.0000 (0.0000)  current_batch_size: 380.0000 (380.0000)  total_loss: 6.7223 (inf)  dino_local_crops_loss: 4.9698 (5.1138)  dino_global_crops_loss: 0.6292 (0.6445)  koleo_loss: 0.0315 (inf)  ibot_loss: 1.0857 (1.1301)  time: 1.363414  data: 0.000342  max mem: 61695\nI20250104 12:12:55 90 dinov2 helpers.py:102] Training  [   1260/2500000]  eta: 40 days, 13:03:52  lr: 0.0006 (0.0003)  wd: 0.0400 (0.0400)  mom: 0.9940 (0.9940)  last_layer_lr: 0.0006 (0.0000)  current_batch_size: 380.0000 (380.0000)  total_loss: 6.7171 (inf)  dino_local_crops_loss: 4.9707 (5.1126)  dino_global_crops_loss: 0.6294 (0.6444)  koleo_loss: 0.0315 (inf)  ibot_loss: 1.0856 (1.1297)  time: 1.356799  data: 0.000374  max mem: 61695\nI20250104 12:13:10 90 dinov2 helpers.py:102] Training  [   1270/2500000]  eta: 40 days, 13:28:36  lr: 0.0006 (0.0003)  wd: 0.0400 (0.0400)  mom: 0.9940 (0.9940)  last_layer_lr: 0.0006 (0.0000)  current_batch_size: 380.0000 (380.0000)  total_loss: 6.7171 (inf)  dino_local_crops_loss: 4.9704 (5.1115)  dino_global_crops_loss: 0.6289 (0.6443)  koleo_loss: 0.0315 (inf)  ibot_loss: 1.0836 (1.1294)  time: 1.412941  data: 0.000429  max mem: 61695\n",
            "loss_divergence",
            "loss-running-average-nonfinite",
            "train.log",
        ),
        # narumiruna/pytorch-distributed-example#4 (case 5130): a torch.distributed example: torch built without distributed support
        (
            "$ python main.py --init-method tcp://127.0.0.1:23456 --rank 0 --world-size 3\nError:PyTorch built without distributed support\n",
            "import_error",
            "torch-without-distributed",
            "train.log",
        ),
        # ray-project/ray#45825 (case 5148): Ray TorchTrainer across two hosts: a Ray task re-raising torch's DistStoreError
        (
            '(RayTrainWorker pid=3738, ip=172.17.130.64) [W socket.cpp:432] [c10d] While waitForInput, poolFD failed with (errno: 0 - Undefined error: 0). (RayTrainWorker pid=9616) [W socket.cpp:432] [c10d] While waitForInput, poolFD failed with (errno: 0 - Success). 2024-06-10 14:40:30,679\tERROR tune_controller.py:1331 -- Trial task failed for trial TorchTrainer_1fa3e_00000 Traceback (most recent call last): File "/home/cooper/.virtualenvs/Distributed-Transformer/lib/python3.10/site-packages/ray/air/execution/_internal/event_manager.py", line 110, in resolve_future result = ray.get(future) File "/home/cooper/.virtualenvs/Distributed-Transformer/lib/python3.10/site-packages/ray/_private/auto_init_hook.py", line 21, in auto_init_wrapper return fn(*args, **kwargs) File "/home/cooper/.virtualenvs/Distributed-Transformer/lib/python3.10/site-packages/ray/_private/client_mode_hook.py", line 103, in wrapper return func(*args, **kwargs) File "/home/cooper/.virtualenvs/Distributed-Transformer/lib/python3.10\n/site-packages/ray/_private/worker.py", line 2623, in get values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout) File "/home/cooper/.virtualenvs/Distributed-Transformer/lib/python3.10/site-packages/ray/_private/worker.py", line 861, in get_objects raise value.as_insta\nu may want to consider increasing the `CheckpointConfig(num_to_keep)` or decreasing the frequency of saving checkpoints. You can suppress this error by setting the environment variable TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S to a smaller value than the current threshold (5.0). 2024-06-10 14:40:30,686\tINFO tune.py:1007 -- Wrote the latest version of all result files and experiment state to \'/home/cooper/ray_results/TorchTrainer_2024-06-10_14-10-23\' in 0.0016s. 2024-06-10 14:40:30,688\tERROR tune.py:1035 -- Trials did not complete: [TorchTrainer_1fa3e_00000] Training errored after 0 iterations at 2024-06-10 14:40:30. Total running time: 30min 7s Error file: /tmp/ray/session_2024-06-10_14-04-38_857705_4700/artifacts/2024-06-10_14-10-23/TorchTrainer_2024-06-10_14-10-23/driver_artifacts/TorchTrainer_1fa3e_00000_0_2024-06-10_14-10-23/error.txt ray.exceptions.RayTaskError(DistStoreError): ray::_Inner.train() (pid=9544, ip=172.17.130.246, actor_id=13a44d0d2f3b811d00db9b340300\n0000, repr=TorchTrainer) File "/home/cooper/.virtualenvs/Distributed-Transformer/lib/python3.10/site-packages/ray/tune/trainable/trainable.py", line 331, in train raise skipped from exception_cause(skipped) File "/home/cooper/.virtualenvs/Distributed-Transformer/lib/python3.10/site-packages/ray/air/_internal/util.py", line 98, in ru\n',
            "network_error",
            "dist-network",
            "driver.log",
        ),
        # kimyoon-young/centerNet-deep-sort#8 (case 5160): centerNet-deep-sort: torchvision's ImageFolder finding no image in the named directory
        (
            '==================================== ERRORS ====================================\n__________________________ ERROR collecting train.py ___________________________\ntrain.py:44: in <module>\n    torchvision.datasets.ImageFolder(train_dir, transform=transform_train),\n../../anaconda3/envs/CenterNet/lib/python3.6/site-packages/torchvision/datasets/folder.py:178: in __init__\n    target_transform=target_transform)\n../../anaconda3/envs/CenterNet/lib/python3.6/site-packages/torchvision/datasets/folder.py:79: in __init__\n    "Supported extensions are: " + ",".join(extensions)))\nE   RuntimeError: Found 0 files in subfolders of: /home/ying/centerNet-deep-sort-master/deep/data/train\nE   Supported extensions are: .jpg,.jpeg,.png,.ppm,.bmp,.pgm,.tif\n!!!!!!!!!!!!!!!!!!! Interrupted: 1 errors during collection !!!!!!!!!!!!!!!!!!!!\n=========================== 1 error in 0.51 seconds ============================\nProcess finished with exit code 0\n',
            "file_not_found",
            "imagefolder-no-files",
            "train.log",
        ),
        # NVlabs/stylegan2-ada-pytorch#212 (case 5198): stylegan2-ada: its CUDA plugin failing to build at start-up
        (
            "Constructing networks...\nSetting up PyTorch plugin \"bias_act_plugin\"... Failed!\n/home/jaewoong/stylegan2-ada-pytorch/torch_utils/ops/bias_act.py:50: UserWarning: Failed to build CUDA kernels for bias_act. Falling back to slow reference\nimplementation. Details:\n\nTraceback (most recent call last):\n  File \"/home/jaewoong/anaconda3/envs/ss/lib/python3.8/site-packages/torch/utils/cpp_extension.py\", line 1533, in _run_ninja_build\n    subprocess.run(\n  File \"/home/jaewoong/anaconda3/envs/ss/lib/python3.8/subprocess.py\", line 516, in run\n    raise CalledProcessError(retcode, process.args,\nsubprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.\n\nThe above exception was the direct cause of the following exception:\n\nTraceback (most recent call last):\n  File \"/home/jaewoong/stylegan2-ada-pytorch/torch_utils/ops/bias_act.py\", line 48, in _init\n    _plugin = custom_ops.get_plugin('bias_act_plugin', sources=sources, extra_cuda_cflags=['--use_fast_math'])\n  File \"/home/jaewoong/stylegan2-ada-pytorch/torch_utils/custom_ops.py\", line 110, in get_plugin\n",
            "import_error",
            "cuda-plugin-build-failed",
            "train.log",
        ),
        # marcoppasini/musika#22 (case 5206): Musika's GAN: the progress bar's losses gone nan
        (
            "Epoch 41/250: 100%|████████████████| 9375/9375 [07:11<00:00, 21.73it/s, DR=713, DF=nan, G=nan, GP=2.16e+4, LR=0.0001, TIME=0.0615]\n",
            "loss_divergence",
            "progress-bar-metric-nan",
            "train.log",
        ),
        # POSTECH-CVLab/PyTorch-StudioGAN#175 (case 5207): StudioGAN's WGAN-GP: 'G/D Losses go NaN', a title after finite loss lines
        (
            "!python src/main.py -t -hdf5 -l -metrics is fid prdc -ref test --num_workers 2 --save_freq 5000 \\\n    -cfg src/configs/CIFAR10/WGAN-GP.yaml \\\n    -data ./cifar10 -save . -mpc --post_resizer friendly --eval_backbone InceptionV3_tf\n [INFO] 2022-11-02 23:50:13 > Step:    900 Progress: 0.9% Elapsed: 0:07:59 Gen_loss: -2.982 Dis_loss: -1.749 \n [INFO] 2022-11-02 23:51:06 > Step:   1000 Progress: 1.0% Elapsed: 0:08:52 Gen_loss: 12.56 Dis_loss: -1.571 \n [INFO] 2022-11-02 23:52:00 > Step:   1100 Progress: 1.1% Elapsed: 0:09:46 Gen_loss: 6.941 Dis_loss: -1.659 \n [INFO] 2022-11-02 23:52:53 > Step:   1200 Progress: 1.2% Elapsed: 0:10:38 Gen_loss: 6.988 Dis_loss: -3.02 \n [INFO] 2022-11-02 23:53:46 > Step:   1300 Progress: 1.3% Elapsed: 0:11:32 Gen_loss: 9.656 Dis_loss: -1.676 \nG/D Losses go NaN (Not A Number) in WGAN-GP training\n",
            "loss_divergence",
            "loss-nan",
            "train.log",
        ),
        # lucidrains/stylegan2-pytorch#221 (case 5219): lucidrains' stylegan2 on Windows: 'DataLoader worker exited unexpectedly' without pids, a title
        (
            'default<C:\\Users\\Mista No\\Desktop\\00000-20210308T180120Z-001\\00000>:   0%|                  | 0/150000 [00:14<?, ?it/s]\nTraceback (most recent call last):\n  File "d:\\anaconda3\\envs\\stylegan2\\lib\\site-packages\\torch\\utils\\data\\dataloader.py", line 986, in _try_get_data\n    data = self._data_queue.get(timeout=timeout)\n  File "d:\\anaconda3\\envs\\stylegan2\\lib\\queue.py", line 178, in get\n    raise Empty\n_queue.Empty\n\nThe above exception was the direct cause of the following exception:\n\nTraceback (most recent call last):\n  File "d:\\anaconda3\\envs\\stylegan2\\lib\\runpy.py", line 194, in _run_module_as_main\n    return _run_code(code, main_globals, None,\n  File "d:\\anaconda3\\envs\\stylegan2\\lib\\runpy.py", line 87, in _run_code\n    exec(code, run_globals)\n  File "D:\\anaconda3\\envs\\stylegan2\\Scripts\\stylegan2_pytorch.exe\\__main__.py", line 7, in <module>\n  File "d:\\anaconda3\\envs\\stylegan2\\lib\\site-packages\\stylegan2_pytorch\\cli.py", line 185, in main\n    fire.Fire(train_from_folder)\n  File "d:\\anaconda3\\envs\\stylegan2\\lib\\site-packages\\fire\\core.py", line 141, in Fire\n    component_trace = _Fire(component, args, parsed_flag_args, context, name)\nDataLoader worker exited unexpectedly\n',
            "dataloader_error",
            "dataloader",
            "train.log",
        ),
        # carpedm20/DiscoGAN-pytorch#12 (case 5212): DiscoGAN on four K80s: old torch's torch.cuda.nccl.NcclError
        (
            'python main.py --dataset=maps --num_gpu=4\npix2pix processing: 100%|#######################| 1096/1096 [00:00<00:00, 178591.97it/s]\npix2pix processing: 100%|#######################| 1096/1096 [00:00<00:00, 213732.43it/s]\n[*] MODEL dir: logs/maps_2017-10-26_20-36-34\n[*] PARAM path: logs/maps_2017-10-26_20-36-34/params.json\n  0%|                                                        | 0/500000 [00:00<?, ?it/s]\n\nTraceback (most recent call last):\n  File "main.py", line 41, in <module>\n    main(config)\n  File "main.py", line 33, in main\n    trainer.train()\n  File "/home/nbserver/DiscoGAN-pytorch/trainer.py", line 193, in train\n    x_AB = self.G_AB(x_A).detach()\n  File "/usr/local/lib/python2.7/dist-packages/torch/nn/modules/module.py", line 224, in\n __call__\n    result = self.forward(*input, **kwargs)\n  File "/usr/local/lib/python2.7/dist-packages/torch/nn/parallel/data_parallel.py", line\n 59, in forward\n    replicas = self.replicate(self.module, self.device_ids[:len(inputs)])\ntorch.cuda.nccl.NcclError: System Error (2)\n',
            "nccl_error",
            "torch-legacy-ncclerror",
            "train.log",
        ),
        # divamgupta/image-segmentation-keras#290 (case 5096): keras_segmentation: Keras's data adapter refusing y with a generator
        (
            '$ python ResNet_Vanilla_3_class-Updated.py\nTraceback (most recent call last):\n  File "ResNet_Vanilla_3_class-Updated.py", line 348, in <module>\n    val_steps_per_epoch=len(glob("/home/maavaylon/Data1/test/img/*"))\n  File "/home/maavaylon/LBNL_Seg/LBNL_Segmentation_crf/image_segmentation_keras/keras_segmentation/train.py", line 187, in train\n    use_multiprocessing=gen_use_multiprocessing)\n  File "/home/maavaylon/anaconda3/envs/fit/lib/python3.7/site-packages/tensorflow/python/keras/engine/training.py", line 1064, in fit\n    steps_per_execution=self._steps_per_execution)\n  File "/home/maavaylon/anaconda3/envs/fit/lib/python3.7/site-packages/tensorflow/python/keras/engine/data_adapter.py", line 1112, in __init__\n    model=model)\n  File "/home/maavaylon/anaconda3/envs/fit/lib/python3.7/site-packages/tensorflow/python/keras/engine/data_adapter.py", line 769, in __init__\n    raise ValueError("`y` argument is not supported when using "\nValueError: `y` argument is not supported when using python generator as input.\n',
            "script_error",
            "keras-argument-not-supported",
            "train.log",
        ),
    ],
)
def test_round134_class(text: str, reason: str, rule: str, name: str) -> None:
    assert reason_and_rule(text, name) == (reason, rule)


def test_tensorflows_own_out_of_memory_lines_outrank_the_cudnn_message_they_cause() -> None:
    """cuDNN failing to initialise is often memory TensorFlow could not get; when the run printed that, it is the answer."""
    text = (
        "2019-03-01 10:00:01.123: E tensorflow/stream_executor/cuda/cuda_driver.cc:806] failed to allocate 2.00G (2147483648 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"
        "UnknownError: Failed to get convolution algorithm. This is probably because cuDNN failed to initialize, so try looking to see if a warning log message was printed above.\n"
    )
    assert reason_and_rule(text)[0] == "gpu_oom"


def test_a_plugin_that_fell_back_gives_way_to_the_error_the_run_printed() -> None:
    """A plugin build that failed is weak: the run may go on with the slow path."""
    text = (
        'Setting up PyTorch plugin "bias_act_plugin"... Failed!\n'
        "Traceback (most recent call last):\n"
        '  File "train.py", line 40, in <module>\n'
        '    batch["labels"]\n'
        "KeyError: 'labels'\n"
    )
    assert reason_and_rule(text)[0] == "script_error"


def test_a_progress_bars_finite_metrics_are_not_a_divergence() -> None:
    text = "Epoch 3/250: 100%|████| 9375/9375 [07:11<00:00, 21.73it/s, DR=713, DF=0.42, G=1.3, GP=2.16e+4, LR=0.0001]\n"
    assert reason_and_rule(text)[0] == "unknown"
