"""Parsers of what squeue, sacct and sbatch print: any text gives data or None, never a crash."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.executor import slurm_cmd as sc

_STATES = sorted(sc.TERMINAL | sc.ALIVE)


def test_a_squeue_line_of_an_array_task():
    info = sc.parse_job_line("12_3|RUNNING|node07|2026-12-01T13:07:53|2026-12-01T13:07:55|NONE|None|aorta-x")
    assert info is not None and info.job_id == "12_3" and info.state == "RUNNING"
    assert info.node == "node07" and info.alive and info.end is None and info.reason is None
    assert info.start - info.submit == 2


def test_sacct_spellings():
    info = sc.parse_job_line("12|CANCELLED by 1000|n1|2026-12-01T13:07:53|Unknown|Unknown||j")
    assert info is not None and info.state == "CANCELLED" and not info.alive and info.start is None
    assert sc.parse_job_line("12_[4-9]|PENDING||2026-12-01T13:07:53|N/A|N/A|None|j") is None  # summary
    assert sc.parse_sbatch_parsable("4711;cluster-a\n") == "4711"
    assert sc.parse_sbatch_parsable("Submitted batch job 4711") is None


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300))
def test_any_text_parses_to_jobs_or_nothing(attack_tally, text):
    jobs = sc.parse_jobs(text)
    assert all(isinstance(j, sc.JobInfo) and j.job_id for j in jobs.values())
    assert sc.parse_sbatch_parsable(text) is None or sc.parse_sbatch_parsable(text).isdigit()
    sc.parse_time(text)
    sc.parse_state(text)
    attack_tally.record("slurm output parser (random text)", cases=1, failures=0,
                        promise="data or None, never an exception")


@settings(max_examples=300, deadline=None)
@given(job=st.integers(1, 10**9), task=st.none() | st.integers(0, 10**6),
       state=st.sampled_from(_STATES), by=st.none() | st.integers(0, 70000),
       node=st.sampled_from(["", "n1", "gpu-node-07", "node[1-4]"]),
       submit=st.integers(1_600_000_000, 1_900_000_000), wait=st.integers(0, 10_000))
def test_a_well_formed_line_round_trips(attack_tally, job, task, state, by, node, submit, wait):
    def stamp(t: int) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))

    job_id = f"{job}" if task is None else f"{job}_{task}"
    state_text = state if by is None else f"{state} by {by}"
    line = f"{job_id}|{state_text}|{node}|{stamp(submit)}|{stamp(submit + wait)}|N/A|None|name"
    info = sc.parse_job_line(line)
    assert info is not None and info.job_id == job_id and info.state == state
    assert info.node == (node or None)
    assert info.alive == (state in sc.ALIVE)
    assert info.start - info.submit == wait or abs(info.start - info.submit - wait) == 3600  # DST
    attack_tally.record("slurm output parser (well-formed lines)", cases=1, failures=0,
                        promise="every field read back")
