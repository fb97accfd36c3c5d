"""Whether a piece of text is a plain decimal number, in ASCII digits only.

``str.isdigit()`` is the wrong test in front of ``int()``: it accepts superscripts and other
Unicode digits (``'²'``, ``'¹'``) that ``int()`` then refuses with a ``ValueError``, which is a
traceback where the user deserved a usage error. ``str.isdecimal()`` admits Arabic-Indic and
full-width digits that ``int()`` does take, but no field this tool reads (a port, a pid, a trial
number, a count in an option) means them. One test for all of them, here, and a rule test
(``tests/core/test_numerals.py``) keeps ``isdigit``/``isdecimal``/``isnumeric`` out of the package.
"""

from __future__ import annotations

_ASCII_DIGITS = frozenset("0123456789")

# The largest seed (a recipe's ``seed``, ``--seed``): what a signed 64-bit integer holds, so a
# seed is the same number in every JSON reader and RNG it reaches.
MAX_SEED = 2**63 - 1

# Ranges of counts a recipe key and its command-line option share (recipe/keys.py names them
# too), here so the command line checks them without importing the recipe package (0.3 s).
MAX_TRIALS = 100_000            # trials (per cell), cells[*].trials, stop_after.max_trials
MAX_STEPS = 100_000_000         # steps, cells[*].steps
MAX_CELLS = 10_000              # cells, or mitigation_axis x diagnostic_axis
SLURM_MAX_NODES = 100_000  # nodes, gpus_per_node: beyond any cluster, well inside sbatch's int
SLURM_MAX_GPUS_PER_NODE = 1024
# A count no recipe bounds (iterations, warm-up, repeats): far past any real run, inside any int.
MAX_COUNT = 1_000_000_000
# The largest pid Linux hands out (PID_MAX_LIMIT, 2**22 on 64-bit).
MAX_PID = 4_194_304


def ascii_digits(text: str) -> bool:
    """True when ``text`` is one or more of ``0``-``9`` and nothing else (no sign, space or ``_``).

    >>> ascii_digits("8080"), ascii_digits("²"), ascii_digits(""), ascii_digits(" 1")
    (True, False, False, False)
    """
    return bool(text) and all(ch in _ASCII_DIGITS for ch in text)
