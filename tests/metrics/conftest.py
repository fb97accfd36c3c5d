"""A real Prometheus (Debian's ``prometheus`` package) on loopback, scraping given ports every
second, queried through its HTTP API; tests that need it skip with the reason when it is absent
(scripts/test.sh installs it, so CI runs them)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.trace.conftest import bpftrace, fakelibs  # noqa: F401  (fixtures for the trace runs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Prometheus:
    url: str
    targets: dict[str, int]
    proc: subprocess.Popen[bytes]

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]["result"]

    def value(self, promql: str, at: float | None = None) -> float | None:
        result = self.query(promql, at)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, promql: str, timeout: float = 90) -> float:
        """Polls until ``promql`` has a result; returns the query time (a moment at which the
        scraped figures are the ones asked for)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = time.time()
            if self.query(promql, now):
                return now
            time.sleep(0.5)
        raise AssertionError(f"Prometheus never answered {promql!r}")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    exe = shutil.which("prometheus")
    if exe is None:
        pytest.skip("Prometheus is not installed (apt-get install prometheus; scripts/test.sh does)")
    d = tmp_path_factory.mktemp("prometheus")
    targets = {"trace": free_port(), "sweep": free_port()}
    config = "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n" + "".join(
        f"  - job_name: {job}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        for job, port in targets.items())
    (d / "prometheus.yml").write_text(config)
    port = free_port()
    log = (d / "prometheus.log").open("wb")
    proc = subprocess.Popen([exe, f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"Prometheus did not start: {(d / 'prometheus.log').read_text()[-2000:]}")
        time.sleep(0.3)
    prom = Prometheus(url, targets, proc)
    try:
        # targets are scraped only after the scrape manager's first update (~5 s after ready):
        # a run started before that would be seen at its end only
        prom.wait_for(f"count(up) == {len(targets)}", timeout=60)
        yield prom
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def run_dir_of(out: Path) -> Path:
    dirs = [p.parent for p in out.glob("*/*/matrix.json")]
    assert len(dirs) == 1, dirs
    return dirs[0]
