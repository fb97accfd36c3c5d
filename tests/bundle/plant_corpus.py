"""The secret corpus a probe trial plants, and what a bundle must not let through.

Run as a program (the probe command, or the fake rocprofv3 collector with ``--collector DIR``)
it writes every form in its place: stdout (with a NUL byte in it: a "binary" log), stderr, a
result file (JSON), a collector's output (CSV) and a gzip artifact. Imported, ``planted(place)``
gives the values the test greps for. Each place has values of its own, so each place must be
caught on its own (a value hidden in one file is hidden in all once learned, which would let a
file nobody scanned pass).

The AWS secret printed on its own comes from the trial's environment (``AWS_SECRET_ACCESS_KEY``,
set by the shell that runs the sweep, not by the one that bundles): one value in every place.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

PLACES = ("stdout", "stderr", "result", "collector", "gzip")
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTEDAWS"  # 40 characters, as AWS writes them
MARKER = "corpus-marker-kept"  # plain evidence next to the secrets: it must survive


def _fill(seed: str, n: int, alphabet: str) -> str:
    """``n`` characters of ``alphabet`` derived from ``seed`` (deterministic, random-looking)."""
    import hashlib

    out = []
    counter = 0
    while len(out) < n:
        digest = hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        out.extend(alphabet[b % len(alphabet)] for b in digest)
        counter += 1
    return "".join(out[:n])


ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"
B64 = ALNUM + "+/"


def planted(place: str) -> dict[str, str]:
    """form -> the secret value planted in ``place`` (what must not reach the archive)."""
    return {
        "github_token": "ghp_" + _fill(f"gh-{place}", 36, ALNUM),
        "slack_token": f"xoxb-{_fill(f'sd-{place}', 10, '0123456789')}-"
                       f"{_fill(f'se-{place}', 12, '0123456789')}-{_fill(f'sl-{place}', 24, LOWER)}",
        "x_api_key": _fill(f"xk-{place}", 32, ALNUM),
        "aws_spaced": _fill(f"aw-{place}", 40, B64),
        "url_password": f"p@ss/w0rd!{_fill(f'pw-{place}', 6, ALNUM)}",
        "url_password_tail": f"ss/w0rd!{_fill(f'pw-{place}', 6, ALNUM)}",  # after its '@'
        "ssh_key_body": "b3BlbnNzaC1rZXktdjEAAAAA" + _fill(f"ssh-{place}", 40, B64),
        "rsa_key_body": "MIIEowIBAAKCAQEA" + _fill(f"rsa-{place}", 48, B64),
        "aws_alone": AWS_SECRET,
    }


def text(place: str) -> str:
    """Every form as a log, a script or a tool prints it."""
    v = planted(place)
    return "\n".join([
        f"{MARKER} in {place}",
        f"cloning with token {v['github_token']} (a bare GitHub token)",
        f"slack notify {v['slack_token']}",
        f"curl -H 'X-Api-Key: {v['x_api_key']}' https://api.example/v1",
        f"aws_secret_access_key = {v['aws_spaced']}",
        f"git remote https://bob:{v['url_password']}@git.example.org/team/repo.git",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        v["ssh_key_body"],
        "QyNTUxOQAAACDRxkS" + _fill(f"ssh2-{place}", 30, B64),
        "-----END OPENSSH PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----",
        v["rsa_key_body"],
        "-----END RSA PRIVATE KEY-----",
        f"the secret on its own: {os.environ.get('AWS_SECRET_ACCESS_KEY', '(not set)')}",
        f"{MARKER} end",
    ]) + "\n"


def _collector(out_dir: str, cmd: list[str]) -> int:
    """A stand-in rocprofv3 (a real program on PATH): runs the command, then writes its CSV and
    summary with the secrets in them, as a profiler that records the environment would."""
    os.makedirs(out_dir, exist_ok=True)
    rc = subprocess.call(cmd)
    rows = ["Name,Calls,TotalDurationNs,AverageNs,Percentage,MinNs,MaxNs,StdDev"]
    rows += [f'"{line}",1,1000,1000,100.0,1000,1000,0.0' for line in text("collector").splitlines()]
    with open(os.path.join(out_dir, "aorta_kernel_stats.csv"), "w") as fh:
        fh.write("\n".join(rows) + "\n")
    with open(os.path.join(out_dir, "aorta_rocprof_summary.txt"), "w") as fh:
        fh.write(text("collector"))
    return rc


def main() -> int:
    argv = sys.argv[1:]
    if "--" in argv and "-d" in argv:  # called as rocprofv3 -d DIR ... -- CMD
        sep = argv.index("--")
        return _collector(argv[argv.index("-d") + 1], argv[sep + 1:])
    art = os.environ["AORTA_ARTIFACT_DIR"]
    # stdout holds one NUL byte: a log a bundle once called binary and copied whole
    sys.stdout.write(text("stdout").replace(f"{MARKER} end", f"{MARKER} end\x00"))
    sys.stderr.write(text("stderr"))
    v = planted("result")
    result = {"status": "ok", "marker": MARKER, "log": text("result"),
              "auth": {"X-Api-Key": v["x_api_key"]}, "remote": f"https://bob:{v['url_password']}@h/"}
    with open(os.path.join(art, "probe_result.json"), "w") as fh:
        json.dump(result, fh, indent=2)
    with gzip.open(os.path.join(art, "trace.log.gz"), "wt") as fh:
        fh.write(text("gzip"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
