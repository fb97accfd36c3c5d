"""The recipe sweep's orchestrator (``orchestrator.Sweep``): plans a recipe into trials, runs them
through an executor (local or Slurm) on a ``store.run_store.RunStore``, aggregates and reports.

It sits above the producers (it picks an executor) and below the front ends, beside ``policy``.
"""
