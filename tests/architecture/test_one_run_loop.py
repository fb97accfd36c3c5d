"""Issue 36 item 2: the engines that run planned trials into a run directory share one loop.

``trial/run_loop.run_planned`` takes the run's lock, opens the journal first on the bus and says
``RunStarted``; each engine (the recipe sweep, the policy sweep, the queue sweep) is a
``TrialEngine`` that fills in only its own steps. The rule, read from the code's AST: the
subclasses of ``TrialEngine`` are exactly those three, each of their modules calls
``run_planned``, and no engine module takes a run store's lock or opens its journal itself.
(The CLI's own ``RunStarted`` lines for commands without a run directory, ``queue run`` and
``trace``, are front-end events, not a run loop: ``cli/`` is not an engine package.)
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "aorta_tui"
LOOP = PACKAGE / "trial" / "run_loop.py"
ENGINES = {
    "sweep/orchestrator.py": "Sweep",
    "policy/evaluator.py": "PolicyEvaluator",
    "hwqueue/sweep.py": "_StoreSweep",
}
# the steps only the loop takes (the store package defines them; the journal writer's own
# lock is the store's business)
LOOP_ONLY_CALLS = {"acquire", "open_journal"}
FRONT_ENDS = {"cli", "tui"}


def _engine_modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py")
            if p.relative_to(PACKAGE).parts[0] not in FRONT_ENDS | {"store"}]


def _base_names(cls: ast.ClassDef) -> set[str]:
    names = set()
    for base in cls.bases:
        node = base.value if isinstance(base, ast.Subscript) else base
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return names


def _trial_engines(tree: ast.AST) -> list[str]:
    return [n.name for n in ast.walk(tree)
            if isinstance(n, ast.ClassDef) and "TrialEngine" in _base_names(n)]


def _calls(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, receiver, method) of every ``x.method(...)`` call."""
    return [(n.lineno, ast.unparse(n.func.value), n.func.attr) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]


def _calls_function(tree: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
               for n in ast.walk(tree))


def test_the_three_engines_are_the_only_trial_engines_and_each_runs_the_one_loop() -> None:
    found: dict[str, list[str]] = {}
    for path in _engine_modules():
        engines = _trial_engines(ast.parse(path.read_text(encoding="utf-8")))
        if engines:
            found[str(path.relative_to(PACKAGE))] = engines
    assert found == {module: [cls] for module, cls in ENGINES.items()}
    for module in ENGINES:
        tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
        assert _calls_function(tree, "run_planned"), f"{module} does not call run_planned"


def test_no_engine_module_takes_a_run_lock_or_opens_a_journal_itself() -> None:
    offenders = []
    for path in _engine_modules():
        if path == LOOP:
            continue
        for line, receiver, method in _calls(ast.parse(path.read_text(encoding="utf-8"))):
            # a threading lock's acquire is not a run directory's: only store receivers count
            if method in LOOP_ONLY_CALLS and "store" in receiver.lower():
                offenders.append(f"{path.relative_to(PACKAGE)}:{line}: {receiver}.{method}()")
    assert offenders == []


def test_the_rule_sees_an_engine_that_opens_its_own_journal() -> None:
    """The check itself fails on the shape the engines had before the loop (not vacuous)."""
    tree = ast.parse("class Mine(TrialEngine[int, Out]):\n"
                     "    def run(self):\n"
                     "        self._store.acquire()\n"
                     "        self.bus.prepend(self._store.open_journal())\n")
    assert _trial_engines(tree) == ["Mine"]
    hits = [(r, m) for _, r, m in _calls(tree) if m in LOOP_ONLY_CALLS and "store" in r.lower()]
    assert hits == [("self._store", "acquire"), ("self._store", "open_journal")]
    assert not _calls_function(tree, "run_planned")
