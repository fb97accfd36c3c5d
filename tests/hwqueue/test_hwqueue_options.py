"""`queue run`'s options as data (hwqueue/options.py): the policy sweep's trials read them
below the command line, so the table must say every option of the real `queue run`."""

from __future__ import annotations

import dataclasses

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.cli.queue_cmd import app
from aorta_tui.core.errors import UsageError
from aorta_tui.hwqueue.harness import QueueRunConfig
from aorta_tui.hwqueue.options import CLI_ONLY, OPTIONS, SET_BY_SWEEP, queue_overrides, trial_config


def _queue_run_flags() -> set[str]:
    group = typer.main.get_command(app)
    run = group.commands["run"]  # type: ignore[attr-defined]
    return {flag for param in run.params for flag in (*param.opts, *param.secondary_opts)
            if flag.startswith("-")}


def test_every_queue_run_option_is_in_the_table_or_named_as_not_for_a_trial() -> None:
    table = {flag for opt in OPTIONS for flag in opt.flags}
    known = table | set(SET_BY_SWEEP) | set(CLI_ONLY)
    assert _queue_run_flags() - known == set()  # a new `queue run` option must be placed
    assert table - _queue_run_flags() == set()  # and the table names no option that is gone


def test_every_option_sets_a_field_of_the_queue_run() -> None:
    fields = {f.name for f in dataclasses.fields(QueueRunConfig)}
    assert {opt.field for opt in OPTIONS} <= fields


_simple = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=8)
_overrides = st.fixed_dictionaries({}, optional={
    "sync_mode": _simple, "dtype": _simple, "timing": _simple, "stream_priority": _simple,
    "detail_iterations": st.integers(1, 10_000), "graph": st.just(True), "ebpf_trace": st.just(True),
    "keep_timeline": st.just(True), "devices": st.lists(_simple, min_size=1, max_size=3),
    "params": st.dictionaries(_simple, _simple, min_size=1, max_size=3)})


def _as_flags(over: dict[str, object], inline: bool) -> list[str]:
    by_field = {opt.field: opt for opt in OPTIONS}
    out: list[str] = []
    for name, value in over.items():
        flag = by_field[name].flags[0]
        if value is True:
            out.append(flag)
            continue
        values = ([f"{k}={v}" for k, v in value.items()] if isinstance(value, dict)
                  else [",".join(value)] if isinstance(value, list) else [str(value)])
        for v in values:
            out += [f"{flag}={v}"] if inline else [flag, v]
    return out


@given(_overrides, st.booleans())
def test_flags_written_for_fields_parse_back_to_those_fields(over: dict[str, object], inline: bool) -> None:
    assert queue_overrides(_as_flags(over, inline), where="t") == over


@given(st.lists(st.text(max_size=12), max_size=6))
def test_any_argument_list_parses_or_is_a_usage_error(args: list[str]) -> None:
    try:
        queue_overrides(args, where="policy 'x' harness_args")
    except UsageError as exc:
        assert "policy 'x' harness_args" in exc.message  # located: the policy and the field


@pytest.mark.parametrize(("args", "words"), [
    (["--no-such-option"], "is not a `queue run` option"),
    (["--repeat", "3"], "not a trial"),
    (["--timing"], "needs a value"),
    (["--graph=yes"], "takes no value"),
    (["--detail-iterations", "0"], "whole number >= 1"),
    (["--detail-iterations", "nan"], "whole number >= 1"),
    (["--detail-iterations", "\u0663"], "whole number >= 1"),  # an Arabic-Indic 3: int() takes it
    (["--param", "novalue"], "is not KEY=VALUE"),
    (["--streams", "4"], "is set by the sweep itself"),
    (["-o=out.json"], "is set by the sweep itself"),
])
def test_bad_flags_are_refused_with_the_source_named(args: list[str], words: str) -> None:
    with pytest.raises(UsageError, match="policy 'lc' harness_args") as info:
        queue_overrides(args, where="policy 'lc' harness_args")
    assert words in info.value.message


def test_later_sources_win_and_params_merge_and_size_auto_resolves() -> None:
    base = QueueRunConfig(workload="tiny_kernel_stress", streams=2, device="cpu", size="auto")
    cfg = trial_config(base, ("--queue-arg", ["--timing", "events", "--param", "a=1", "--param", "b=2"]),
                       ("policy", ["--timing=auto", "--param", "b=3", "--graph"]))
    assert (cfg.timing, cfg.params, cfg.graph) == ("auto", {"a": "1", "b": "3"}, True)
    assert cfg.size == "tiny"  # auto on a CPU, as `queue run` resolves it
    assert base.timing == "auto" and base.params == {}  # the base is not changed
