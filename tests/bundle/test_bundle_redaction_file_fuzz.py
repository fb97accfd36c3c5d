"""--redaction-from files under hypothesis: a RedactionConfig or a located exit-2 error,
never another exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.bundle.archive import load_redaction_file
from aorta_tui.bundle.redact import RedactionConfig
from aorta_tui.core.errors import AortaError, ExitCode

# Its last test records what the others ran in the attack harness table, so the whole file
# runs in one tier (slow: --fast leaves it all out) and on one xdist worker (its group: CI
# runs this tier with --dist loadgroup), in file order; a worker's counts reach no other.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("tally-bundle_redaction_file_fuzz")]

KEYS = ["scrub_env_keys", "scrub_paths", "scrub_ip_addresses", "redaction", "scrub_path", "x"]
values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3), max_leaves=8)
documents = st.dictionaries(st.sampled_from(KEYS), values, max_size=4) | values
COUNT = {"cases": 0, "failures": 0}


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=documents, as_json=st.booleans(), noise=st.text(max_size=20))
def test_a_redaction_file_loads_or_is_a_located_usage_error(tmp_path, doc, as_json, noise):
    COUNT["cases"] += 1
    path = tmp_path / ("r.json" if as_json else "r.yaml")
    text = json.dumps(doc) if as_json else json.dumps(doc) + ("\n" + noise if noise else "")
    path.write_text(text)
    try:
        got = load_redaction_file(path)
    except AortaError as exc:
        ok = exc.exit_code == ExitCode.USAGE and str(path) in exc.render()
        COUNT["failures"] += not ok
        assert ok, exc.render()
        return
    except Exception:
        COUNT["failures"] += 1
        raise
    assert isinstance(got, RedactionConfig)


def test_zz_record_the_count(attack_tally):
    attack_tally.record("bundle --redaction-from fuzzer", cases=COUNT["cases"],
                        failures=COUNT["failures"],
                        promise="a RedactionConfig or a located exit 2, never 70")
    assert COUNT["cases"] >= 100 and COUNT["failures"] == 0
