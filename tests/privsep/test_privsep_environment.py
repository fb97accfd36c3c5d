"""What the drop puts back of the environment sudo changed (privsep/boot.invoking_environment)."""

from __future__ import annotations

from aorta_tui.privsep.boot import InvokingUser, invoking_environment

USER = InvokingUser(uid=1001, gid=1002, name="alice", home="/home/alice", shell="/bin/zsh", groups=(1002,))
SUDO_ENV = {"PATH": "/usr/sbin:/usr/bin", "HOME": "/root", "USER": "root", "LOGNAME": "root",
            "SHELL": "/bin/bash", "MAIL": "/var/mail/root", "SUDO_UID": "1001", "SUDO_GID": "1002",
            "SUDO_USER": "alice", "CUDA_VISIBLE_DEVICES": "0"}


def test_identity_variables_are_the_users_and_roots_mailbox_goes() -> None:
    env = invoking_environment(SUDO_ENV, USER, {})
    assert (env["HOME"], env["USER"], env["LOGNAME"], env["SHELL"]) == ("/home/alice", "alice", "alice", "/bin/zsh")
    assert "MAIL" not in env
    assert env["SUDO_USER"] == "alice" and env["CUDA_VISIBLE_DEVICES"] == "0"  # the rest as sudo passed it


def test_path_and_virtualenv_come_from_the_invoking_shell() -> None:
    shell = {"PATH": "/home/alice/venv/bin:/usr/bin", "VIRTUAL_ENV": "/home/alice/venv", "TERM": "tmux-256color",
             "LANG": "de_DE.UTF-8", "SECRET_OF_THE_SHELL": "x"}
    env = invoking_environment(SUDO_ENV, USER, shell)
    assert env["PATH"] == "/home/alice/venv/bin:/usr/bin"
    assert env["VIRTUAL_ENV"] == "/home/alice/venv"
    assert env["TERM"] == "tmux-256color" and env["LANG"] == "de_DE.UTF-8"
    assert "SECRET_OF_THE_SHELL" not in env  # only the listed variables are taken from the shell


def test_without_the_shell_a_kept_virtualenv_goes_first_on_sudos_path() -> None:
    env = invoking_environment({**SUDO_ENV, "VIRTUAL_ENV": "/opt/venv"}, USER, {})
    assert env["PATH"] == "/opt/venv/bin:/usr/sbin:/usr/bin"


def test_what_sudo_kept_wins_over_the_shell() -> None:
    env = invoking_environment({**SUDO_ENV, "VIRTUAL_ENV": "/opt/kept", "TERM": "xterm"}, USER,
                               {"VIRTUAL_ENV": "/home/alice/other", "TERM": "vt100"})
    assert env["VIRTUAL_ENV"] == "/opt/kept" and env["TERM"] == "xterm"
