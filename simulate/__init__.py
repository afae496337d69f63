"""Simulation and demonstration, kept out of the shared core because they need httpx and matplotlib.

- `simulate.cluster`: weeks of a cluster's failures replayed through the real diagnosis and restart
  policy (`gpuwatch simulate`); `simulate.live` drives a real server with many simulated agents.
- `simulate.demo`: the whole pipeline on one machine (`gpuwatch demo`), with `simulate.demo_job`
  as its stand-in training job.

It imports `gpuwatch` only; the server and the agents it needs run as their own processes. This file
stays empty because `simulate.cli` is loaded on every `gpuwatch` command.
"""
