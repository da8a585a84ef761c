"""Campaign scaling on 1, 2, 4 and 8 GPUs of one host, first and warm runs, with where the time goes.

The runs and the report are :mod:`gcexplore.campaigns.scaling`'s, the decomposition :mod:`gcexplore.campaigns.timing`'s:
this script sets the workers' path and calls them.

Usage (a multi-GPU machine, from the project root, Dask distributed and PyTorch installed)::

    python3 bench/campaign.py --out DIR [--repeats 60] [--gpus 1,2,4,8] [--step 16] [--no-warm] [--no-direct]
                              [--no-fresh] [--cut layouts]
                              [--no-cold] [--forkserver cold|kept] [--gpu-start-too serial|together]
                              [--cpus-too off[,share,local]] [--dispatch-too eager] [--gate-too timed]
                              [--too-gpus 2,4]
    python3 bench/campaign.py --out DIR --alone-again    # no GPU: campaign vs alone again, floors of now

One grid (16 tasks: 4 pairs -- compute+memory, compute+copy, a PyTorch attention+sort
and a GEMM-chain+layer-norm factory from gcexplore/workloads/torch_pairs.py -- x 4 split sets of 2
sizes) runs on 1, then 2, 4 and 8 GPUs (one worker each; a count above the GPUs here is said, not run),
timed as the caller of ``gx.campaign`` sees it:

- first (the default; ``--no-fresh``: cold instead): `gcexplore campaign SPEC`'s path, the first campaign of a
  fresh process: this script again in a new interpreter, the campaign timed from that process's birth (Python's
  start and the imports of gcexplore and Dask in the lead-in), its cluster started as a cold one's; the issue's
  goals (>= 1.85x on 2 GPUs, 3.4x on 4, 6.5x on 8) are said against the 1-GPU first run; the ``--*-too`` runs
  run in this process and compare with a cold 1-GPU run (pass ``--no-fresh`` with them);
- cold: ``gx.campaign(..., devices=)`` in this process starts its own local cluster,
  whose workers warm up as they start (imports, GPU context, kernels) while the client plans,
  and shuts it down in the background once every row is on disk; the client imports the
  factories' module and Dask before any timing (as it has in every run after the first);
- warm: the same campaign on the warm cluster of ``gcexplore cluster start`` (:mod:`gcexplore.campaigns.warm`: a
  server process of its own, its workers' modules imported as they started; ``scheduler=``; its start and a short
  priming campaign are not timed), 8/4/2/1 GPUs after the first runs (goals >= 3.6x on 4 GPUs, 7.0x on 8);
- ``--cut layouts``: every run's tasks a layout each, longest first (``campaign(cut="layouts")``): a second
  run of the bench with it against one without compares the two ways of cutting the first tasks;
- ``--forkserver cold`` (the default): the campaign forkserver is stopped before every campaign, so
  each one (1, 2 and 4 GPUs alike) starts as the first of a process does (spawned workers, a server
  started beside them); ``kept``: a server that imported Dask, pandas, gcexplore and the factories'
  module (PyTorch) started once before any timing (its start printed apart), every campaign's workers
  forked from it, as the second and later campaigns of a process do;
- the N-GPU runs order their tasks longest first by the 1-GPU run's task times
  (``durations=``; ``--no-durations``: by the grid's estimate, which cannot tell these apart);
- the decomposition: cluster start (and the client's wait for it after planning), warm-up per worker (at
  its start + the warm-up task), lead-in (call to a card's first task), task time per card, idle tail (a
  card's last task to the end of the wait), close (its cost to the call; the background shutdown in parentheses);
- the phases of the tasks summed over the cards (build, priming: a worker's first task of a recipe calls it
  once, outside its experiment; experiment, of which checkpoint appends, process CPU time, shard write), the
  first task of a worker against the rest, the median SM clock the sweeps recorded (neighbours' power, heat);
- per task, its experiment time on N cards over on one (the slowdown when N run at once);
- per task, layout and mode: the makespans on N cards against one card (the ratio's 95%
  interval, and at 95% jointly over the comparisons), so that speed is not bought with noise;
- campaign vs alone: one task per pair run alone in this process (``gx.sweep``, no Dask) on the
  1-GPU run's card, its makespans against the same task in the 1-GPU campaign; every comparison's
  row in DIR/campaign_vs_alone.csv, the tasks alone in DIR/alone.parquet;
- the local cluster's start per worker: forkserver (the campaign's start to its server's imports done;
  0 when kept), spawn (to the worker process's birth), boot (Dask's worker set-up until the preload),
  gcexplore's import, context, kernels and the factories' modules, join; each worker's CPUs;
- the host-side rest between repetitions per phase (gcexplore/campaigns/phases.py): the GPU waiting at the gate and
  the rest besides it, with the host's enqueueing, waiting and collecting, from each task's engine record;
- ``--gpu-start-too`` / ``--cpus-too`` / ``--dispatch-too`` / ``--gate-too``: the ``--too-gpus`` counts again with
  GCEXPLORE_GPU_START / GCEXPLORE_WORKER_CPUS / GCEXPLORE_DISPATCH / GCEXPLORE_GATE set so (an A/B on one host,
  against the same 1-GPU run, or that setting's own 1-GPU run when 1 is among the --too-gpus).

Written to DIR/campaign_bench.md and .json; DIR/campaign-<N>gpu[-warm] are the campaign folders
and DIR/campaign.parquet the 2-GPU cold result as one file (bench/campaign_folder.py turns it into
the folder gcexplore/data/campaign, notebook 04's recording).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))  # the workers

if __name__ == "__main__":  # spawned workers re-import this module: only the script itself runs the campaigns
    from gcexplore.campaigns.scaling import main

    sys.exit(main())
