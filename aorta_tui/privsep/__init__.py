"""Privilege separation: under ``sudo`` a small helper keeps root, the tool becomes the user.

``boot`` forks the helper and drops; ``protocol`` is the wire format and the argument checks;
``helper`` is the root side's loop; ``client`` the unprivileged side's connection. The verbs
themselves (start a catalogue bpftrace program, read tracefs, GPU knobs, root-only snapshot
fields) are defined by the packages that own those jobs and handed to the helper by the CLI
(``cli/privileged.py``), so this package imports nothing above ``core``. docs/security.md
"""
