"""Which slow tests need the machine to themselves (the ``alone`` mark), and why.

CI runs the suite in two tiers (scripts/test.sh): every test not marked ``alone``, ``bpftrace``
or ``gpu`` over two pytest-xdist workers, then those in one process. A slow test is ``alone``
when a test beside it could change its answer: it uses a service the machine has once (the
one-node Slurm, bpftrace's probes, a tmux server, the second user's /proc sampler), or it
judges time (a hang found by a deadline, a pattern's run time, a signal's delivery). The rest
of the slow tests (most run the real CLI in a subprocess and wait for it) share the workers.
The fast tests of these files stay where they were: they ran over the workers for weeks.
"""

from __future__ import annotations

ALONE: dict[str, tuple[str, ...]] = {
    "the one-node Slurm (a job queued behind another's is a timeout)": (
        "executor/test_slurm_executor.py", "executor/test_slurm_distributed.py",
        "tui/test_tui_slurm_grid.py", "tui/test_tui_slurm_trial.py",
    ),
    "real bpftrace (probes see the whole machine; its start-up is timed)": (
        "trace/test_trace_cli.py", "trace/test_trace_uprobes.py",
        "trace/test_trace_launch_source.py", "trace/test_trace_device_join.py",
        "trace/test_trace_hip_device_half.py", "privsep/test_privsep_trace.py",
        "reliability/test_rel_orphans.py", "reliability/test_rel_rundir_crashpoints.py",
        "policy/test_policy_crashpoints.py", "multirank/test_multirank_ebpf.py",
        "sweep/test_sweep_trace.py", "metrics/test_metrics_prometheus.py",
        "tui/test_tui_trace_monitor.py", "tui/test_tui_trace_monitor_device.py",
        "tui/test_tui_trace_monitor_phases.py", "tui/test_tui_trace_monitor_h200.py",
        "tui/test_tui_trace_monitor_metrics.py",
    ),
    "the second user and sudo (a /proc sampler judges every process it sees)": (
        "privsep/test_privsep_drop.py", "privsep/test_privsep_envsnap.py",
        "reliability/test_rel_proc_sudo.py", "tui/test_tui_sudo.py",
    ),
    "a real tmux server and terminal sizes (screens are waited for by time)": (
        "tui/test_tui_logs_quickstart.py", "tui/test_tui_first_hour.py",
        "tui/test_tui_audit_tmux_sizes.py", "tui/test_tui_smaller_fixes.py",
        "tui/test_tui_tmux.py", "tui/test_tui_trace_monitor_tmux.py", "tui/test_tui_edit_signals.py",
    ),
    # Found by the first run of the split (2026-12-05): beside a neighbour, a bundle finished
    # before its SIGINT landed (exit 0, not 130) and a queue sweep ran its second point before
    # the stop meant for the first; every slow test that signals a run it watches is here.
    "interrupts a run at a moment it watches for (a neighbour's load moves the moment)": (
        "hwqueue/test_hwqueue_sweep_store.py", "bundle/test_bundle_cli.py",
        "reliability/test_rel_rundir_attacks.py", "trial/test_worker_process.py",
        "trial/test_warm_mode.py", "sweep/test_sweep_resume.py", "sweep/test_sweep_child.py",
        "reliability/test_rel_spawn_gate.py", "hwqueue/test_hwqueue_sweep_isolation.py",
        "agent/test_agent_cli.py", "tui/test_tui_policy.py", "trial/test_worker_launcher_io.py",
        "sweep/test_sweep_batch_output.py", "policy/test_policy_cli.py",
        "envsnap/test_envsnap_capture.py", "core/test_rundir_fs.py",
        "classify/test_worker_classify.py",
    ),
    "judges time (a deadline, a hang, a scrape interval, a pattern's run time)": (
        "metrics/test_metrics_engines.py", "reliability/test_rel_proc_regex.py",
        "reliability/test_rel_proc_containment.py", "reliability/test_rel_signals.py",
        "trial/test_worker_torchrun_hang.py", "multirank/test_multirank_hang_probe.py",
        "multirank/test_multirank_overlap.py", "multirank/test_multirank_hetero.py",
        "tui/test_tui_first_frame_imports.py", "reliability/test_rel_renamed_run.py",
        "trial/test_prepared_log_after_stop.py",
    ),
}

ALONE_FILES: frozenset[str] = frozenset(f for files in ALONE.values() for f in files)
