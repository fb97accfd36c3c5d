"""Fixtures of the privilege-separation tests: the second user and a directory of theirs."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sudo_support import SudoUser, ensure_user, make_user_dir


@pytest.fixture(scope="session")
def sudo_user() -> SudoUser:
    return ensure_user()


@pytest.fixture()
def user_dir(sudo_user: SudoUser) -> Iterator[Path]:
    path = make_user_dir(sudo_user)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
