"""The secret corpus a probe trial plants, and what a bundle must not let through.

Run as a program (the probe command, or the fake rocprofv3 collector with ``--collector DIR``)
it writes every form in its place: stdout (with a NUL byte in it: a "binary" log), stderr, a
result file (JSON), a collector's output (CSV), a gzip artifact and the variables of a
mitigations sidecar (:func:`sidecar`), which it prints. Imported, ``planted(place)``
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

PLACES = ("stdout", "stderr", "result", "collector", "gzip", "artifact", "sidecar")
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
        **{f"wide_{form}": value for form, (_line, value) in wide(place).items()},
    }


HEX = "0123456789abcdef"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def wide(place: str) -> dict[str, tuple[str, str]]:
    """Issue 35's text forms: form -> (the line a log or a tool prints, the secret in it)."""
    def f(tag: str, n: int, alphabet: str = ALNUM) -> str:
        return _fill(f"{tag}-{place}", n, alphabet)

    forms = {
        "sts_json": ('{"Credentials": {"AccessKeyId": "ASIA%s", "SecretAccessKey": "%s"}}',
                     (f("stsid", 16, UPPER), f("sts", 40, B64))),
        "cli_secret_flag": ("aws configure --aws-secret-access-key %s", (f("cli", 40, B64),)),
        "ya29": ("Authorization header was ya29.%s", (f("ya", 60, ALNUM + "_-"),)),
        "azure_sig": ("GET https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2026&sig=%s",
                      (f("sig", 43, ALNUM) + "%3D",)),
        "azure_sak": ("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=root;"
                      "SharedAccessKey=%s;", (f("sak", 43, ALNUM) + "=",)),
        "github_pat": ("pushing with github_pat_%s", ("11" + f("pat", 80, ALNUM + "_"),)),
        "openai_proj": ("OPENAI ok sk-proj-%s", (f("oai", 48, ALNUM + "_-"),)),
        "anthropic": ("client init sk-ant-api03-%s", (f("ant", 93, ALNUM + "_-"),)),
        "hf_bare": ("downloading with hf_%s", (f("hf", 34, ALNUM),)),
        "npm": ("//registry.npmjs.org/:_authToken npm_%s", (f("npm", 36, ALNUM),)),
        "twilio": ("twilio api key SK%s", (f("tw", 32, HEX),)),
        "mailgun": ("mailgun api:key-%s", (f("mg", 32, ALNUM),)),
        "ngc": ("ngc config nvapi-%s", (f("ngc", 64, ALNUM + "_-"),)),
        "netrc": ("machine api.example.org login bob password %s", (f("netrc", 20, ALNUM),)),
        "docker_p": ("docker login -u bob -p %s registry.example.org", (f("dkp", 20, ALNUM),)),
        "password_flag": ("mysql --password %s -h db", (f("mysql", 18, ALNUM),)),
        "docker_auth": ('{"auths": {"reg.example": {"auth": "%s"}}}', (f("dka", 40, ALNUM),)),
        "k8s_json": ('{"env": [{"name": "DB_PASSWORD", "value": "%s"}]}', (f("k8sj", 22, ALNUM),)),
        "jwt": ("cookie session=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IifQ.%s",
                (f("jwt", 43, ALNUM + "_-"),)),
        "numeric_password": ('{"db_password": %s}', (f("num", 12, "123456789"),)),
        "escaped_url": ('{"remote": "https:\\/\\/bob:%s@git.example.org\\/r"}',
                        (f("esc", 16, ALNUM),)),
        "query_token": ("GET /api/v1/items?page=2&token=%s&x=1", (f("qt", 32, ALNUM),)),
        "s3_presigned": ("https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                         "&X-Amz-Signature=%s", (f("s3", 64, HEX),)),
        "ansi_key": ("\x1b[1mAPI_TOKEN\x1b[0m=\x1b[32m%s\x1b[0m", (f("ansi", 30, ALNUM),)),
        "header": ("X-Auth-Token: %s", (f("xat", 32, ALNUM),)),
        "ini": ("secret_key = %s", (f("ini", 32, ALNUM),)),
        "yaml_token": ("  access_token: %s", (f("yml", 36, ALNUM),)),
        "ini_password": ("password = %s", (f("inip", 20, ALNUM),)),
        "yaml_nested": ("db:\n  password: %s", (f("ymlp", 20, ALNUM),)),
        "php_arrow": ("'api_secret' => '%s',", (f("php", 28, ALNUM),)),
        "go_assign": ('client_secret := "%s"', (f("go", 28, ALNUM),)),
        "json_access": ('{"access_token": "%s", "expires_in": 3600}', (f("jat", 40, ALNUM),)),
        "json_refresh": ('{"refresh_token": "%s"}', (f("jrt", 40, ALNUM),)),
        "camel_apikey": ('{"apiKey": "%s"}', (f("camel", 32, ALNUM),)),
        "export_quoted": ("export WANDB_API_KEY='%s'", (f("wandb", 40, HEX),)),
        "cookie": ("Cookie: %s", (f("cookie", 32, ALNUM),)),
        "private_token": ("PRIVATE-TOKEN: %s", (f("ptok", 24, ALNUM),)),
        "bearer": ("Authorization: Bearer %s", (f("bear", 40, ALNUM),)),
        "proxy_url": ("https_proxy=http://user:%s@proxy.example:3128", (f("proxy", 16, ALNUM),)),
        "postgres_url": ("DATABASE_URL=postgres://app:%s@db:5432/x", (f("pg", 16, ALNUM),)),
        "gitlab": ("gitlab glpat-%s", (f("glpat", 20, ALNUM),)),
        "google_api": ("maps key AIza%s", (f("aiza", 35, ALNUM),)),
        "aws_key_id": ("aws key id AKIA%s", (f("akia", 16, UPPER),)),
        "stripe": ("stripe sk_live_%s", (f("stripe", 24, ALNUM),)),
        "slack_user": ("slack xoxp-%s", ("1234567890-" + f("xoxp", 30, LOWER),)),
        "databricks": ("databricks dapi%s", (f("dapi", 32, HEX),)),
        "gho": ("oauth gho_%s", (f("gho", 36, ALNUM),)),
        "openai_svc": ("service sk-svcacct-%s", (f("svc", 48, ALNUM),)),
        "anthropic_admin": ("admin sk-ant-admin01-%s", (f("antadm", 60, ALNUM),)),
        "hf_in_url": ("git clone https://user:hf_%s@huggingface.co/org/m", (f("hfu", 34, ALNUM),)),
        "query_api_key": ("GET /v1/x?api_key=%s HTTP/1.1", (f("qak", 32, ALNUM),)),
        "query_access_token": ("GET /v1/x?a=1&access_token=%s", (f("qat", 32, ALNUM),)),
        "flag_equals": ("psql --db-password=%s", (f("fleq", 20, ALNUM),)),
        "flag_token": ("huggingface-cli login --token %s", (f("fltok", 30, ALNUM),)),
        "kube_yaml": ("- name: API_SECRET\n  value: %s", (f("k8sy", 24, ALNUM),)),
        "netrc_lines": ("machine files.example\n  login bob\n  password %s", (f("netrc2", 20, ALNUM),)),
        "x_api_key_lower": ("x-api-key: %s", (f("xak", 32, ALNUM),)),
        "amz_security_token": ("&X-Amz-Security-Token=%s", (f("amzst", 60, ALNUM),)),
        "mailgun_new": ("mailgun %s", (f("mgn1", 32, HEX) + "-" + f("mgn2", 8, HEX) + "-"
                                       + f("mgn3", 8, HEX),)),
        "sendgrid": ("sendgrid SG.%s", (f("sg1", 22, ALNUM) + "." + f("sg2", 43, ALNUM),)),
    }
    out = {name: (line % values, values[-1]) for name, (line, values) in forms.items()}
    wrap = f("wrap", 70, ALNUM)  # a token the terminal wrapped at column 80
    head = "DEPLOY_SECRET=" + wrap
    out["wrapped"] = (head[:80] + "\n" + head[80:] if len(head) > 80 else head, wrap)
    long = f("wrap2", 100, ALNUM)
    line = "export GH_TOKEN=" + long
    out["wrapped_long"] = (line[:80] + "\n" + line[80:], long)
    return out


# harmless evidence a bundle must keep as it is (issue 35: each was destroyed once)
HARMLESS = (
    "num_tokens=131072", "NCCL_BUFFSIZE=131072", "seq_len 131072", "max_new_tokens: 512",
    "model.layers.0.self_attn.q_proj.weight", "APEXbaseline", "AKCmitigations",
    "fxgraph/ab/fab3c9d2e1f0a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0",
    "aorta-T-CORPUS-probe", "job_name=llama70b-pretrain-apex", "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
)


def wide_text(place: str) -> str:
    return "\n".join([line for line, _v in wide(place).values()] + list(HARMLESS)) + "\n"


def text(place: str) -> str:
    """Every form as a log, a script or a tool prints it."""
    return "\n".join([*_blocks(place), wide_text(place), f"{MARKER} end"]) + "\n"


def _blocks(place: str) -> list[str]:
    """The first forms, one entry each (a private key's lines together)."""
    v = planted(place)
    return [
        f"{MARKER} in {place}",
        f"cloning with token {v['github_token']} (a bare GitHub token)",
        f"slack notify {v['slack_token']}",
        f"curl -H 'X-Api-Key: {v['x_api_key']}' https://api.example/v1",
        f"aws_secret_access_key = {v['aws_spaced']}",
        f"git remote https://bob:{v['url_password']}@git.example.org/team/repo.git",
        "\n".join(["-----BEGIN OPENSSH PRIVATE KEY-----", v["ssh_key_body"],
                   "QyNTUxOQAAACDRxkS" + _fill(f"ssh2-{place}", 30, B64),
                   "-----END OPENSSH PRIVATE KEY-----"]),
        "\n".join(["-----BEGIN RSA PRIVATE KEY-----", v["rsa_key_body"],
                   "-----END RSA PRIVATE KEY-----"]),
        f"the secret on its own: {os.environ.get('AWS_SECRET_ACCESS_KEY', '(not set)')}",
    ]


SIDECAR_MITIGATION = "corpus_sidecar"
SIDECAR_PREFIX = "CORPUS_SC_"


def sidecar() -> dict[str, dict]:
    """The sidecar place: a mitigations sidecar whose variables hold every form of
    ``planted("sidecar")`` (one form's text each, a private key whole) and the harmless
    strings; the trial prints them, and the run records them (plan, result, journal)."""
    entries = [*_blocks("sidecar"), *(line for line, _v in wide("sidecar").values()), *HARMLESS]
    env = {f"{SIDECAR_PREFIX}{i:03d}": entry for i, entry in enumerate(entries)}
    return {SIDECAR_MITIGATION: {"env": env, "description": "the corpus's sidecar place"}}


def containers() -> dict[str, tuple[str, bytes]]:
    """Issue 35's containers: form -> (file name, bytes); the secret is :func:`container_values`'s."""
    import base64
    import io
    import zipfile
    import zlib

    v = container_values()
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("env.txt", f"GH_TOKEN={v['zip_prefixed']}\n")
    dump = f"AWS_SECRET_ACCESS_KEY={v['base64_env']}\nHOME=/root\n".encode()
    return {
        "utf16_bom": ("win.log", f"HF_TOKEN={v['utf16_bom']}\r\n".encode("utf-16")),
        "utf16_le": ("ps.log", f"password={v['utf16_le']}\n".encode("utf-16-le")),
        "utf32_be": ("u32.txt", b"\x00\x00\xfe\xff" + f"api_key={v['utf32_be']}\n".encode("utf-32-be")),
        "npy_unicode": ("names.npy", _npy(["layer0", f"hf_{v['npy_unicode']}", "ok"])),
        "zip_prefixed": ("bundle.sh", b"#!/bin/sh\nexit 0\n" + zbuf.getvalue()),
        "zlib_raw": ("state.zlib", zlib.compress(f"DB_PASSWORD={v['zlib_raw']}\n".encode())),
        "base64_env": ("env.b64.log", b"ENV_DUMP " + base64.b64encode(dump) + b"\n"),
        "gzip_utf16": ("nested.log.gz", gzip.compress(f"SECRET={v['gzip_utf16']}\n".encode("utf-16"))),
    }


def container_values() -> dict[str, str]:
    return {name: _fill(f"c-{name}", 32, ALNUM) for name in (
        "utf16_bom", "utf16_le", "utf32_be", "npy_unicode", "zip_prefixed", "zlib_raw",
        "base64_env", "gzip_utf16")}


def _npy(items: list[str]) -> bytes:
    """A 1-D numpy unicode array as numpy.save writes it (format 1.0), without numpy."""
    width = max(len(x) for x in items)
    head = repr({"descr": f"<U{width}", "fortran_order": False, "shape": (len(items),)})
    head += " " * (-(10 + len(head) + 1) % 64) + "\n"
    body = b"".join(x.ljust(width, "\x00").encode("utf-32-le") for x in items)
    return b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head.encode() + body


def name_values() -> dict[str, str]:
    """Secrets in file names (a tool that names its output after its token)."""
    return {"name_hf": "hf_" + _fill("n-hf", 34, ALNUM),
            "name_assign": _fill("n-as", 24, ALNUM),
            "name_ghp": "ghp_" + _fill("n-gh", 36, ALNUM)}


def file_names() -> list[str]:
    v = name_values()
    return [f"{v['name_hf']}.log", f"HF_TOKEN={v['name_assign']}.txt", f"cache-{v['name_ghp']}"]


# the command after `--` and the environment the trial prints: values of their own
ARG_SECRET = "sk-proj-" + _fill("arg", 48, ALNUM)
ENV_PRINTED = "nvapi-" + _fill("envp", 64, ALNUM)


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
    with open(os.path.join(art, "notes.txt"), "w") as fh:
        fh.write(text("artifact"))
    for _form, (name, data) in containers().items():
        with open(os.path.join(art, name), "wb") as fh:
            fh.write(data)
    for name in file_names():
        with open(os.path.join(art, name), "w") as fh:
            fh.write("named output\n")
    print(f"extra args: {os.environ.get('CI_EXTRA_ARGS', '(unset)')}")
    for name in sorted(n for n in os.environ if n.startswith(SIDECAR_PREFIX)):
        print(f"{name}={os.environ[name]}")  # the sidecar's variables, as an env dump shows them
    return 0


if __name__ == "__main__":
    sys.exit(main())
