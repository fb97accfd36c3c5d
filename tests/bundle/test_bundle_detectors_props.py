"""detectors.py and decoders.py under hypothesis: a provider token or a value next to a key
that names a secret, in any surrounding text, coloured or wrapped at column 80, never
survives a scrub; counts survive; every decoder writes back the bytes it opened."""

from __future__ import annotations

import zlib

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from aorta_tui.bundle.decoders import open_layer, zip_bytes, zip_members
from aorta_tui.bundle.detectors import normalized
from aorta_tui.bundle.redact import FileState, RedactionConfig, Scrubber, outside_placeholders

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# surrounding text: no letters or digits touching the token (a token inside a word is a word)
around = st.text(alphabet=" \n\t;,()[]{}|'\"=:", max_size=20)
PREFIXES = {"ghp_": 36, "github_pat_11": 70, "sk-proj-": 48, "sk-ant-api03-": 80, "hf_": 34,
            "npm_": 36, "nvapi-": 64, "ya29.": 60, "glpat-": 20}
KEYED = ["--aws-secret-access-key {v}", "--password={v}", "docker login -u bob -p {v}",
         '{{"SecretAccessKey": "{v}"}}', "x?a=1&token={v}&b=2", "&sig={v}", "X-Auth-Token: {v}",
         "SharedAccessKey={v};", "machine h login u password {v}", '"auth": "{v}"',
         '{{"name": "DB_PASSWORD", "value": "{v}"}}', "- name: API_SECRET\n  value: {v}",
         "client_secret := '{v}'", "apiKey: {v}"]


def _scrubbed(text: str) -> str:
    scrub = Scrubber(RedactionConfig())
    scrub.learn_text(text)
    return scrub.scrub_text(text, FileState())[0]


def _leaks(value: str, out: str) -> bool:
    parts: list[str] = []
    outside_placeholders(out, lambda part: parts.append(part) or "")
    return any(value in part for part in parts)


@FAST
@given(st.sampled_from(sorted(PREFIXES)), st.data(), around, around)
def test_a_provider_token_never_survives(prefix: str, data, before: str, after: str) -> None:
    body = data.draw(st.text(ALNUM, min_size=PREFIXES[prefix], max_size=PREFIXES[prefix] + 8))
    token = prefix + body
    assert not _leaks(token, _scrubbed(f"{before}{token}{after}"))


@FAST
@given(st.sampled_from(KEYED), st.text(ALNUM, min_size=12, max_size=40), around)
def test_a_value_next_to_a_secret_key_never_survives(form: str, value: str, before: str) -> None:
    from aorta_tui.bundle.detectors import looks_random

    assume(looks_random(value))  # the weaker keys (sig, auth) hide only random-looking values
    assert not _leaks(value, _scrubbed(before + form.format(v=value) + "\n"))


@FAST
@given(st.text(ALNUM, min_size=20, max_size=60), st.integers(1, 18),
       st.sampled_from(["\x1b[0m", "\x1b[1;32m", "\x1b]0;t\x07"]))
def test_a_coloured_or_wrapped_value_never_survives(value: str, cut: int, code: str) -> None:
    from aorta_tui.bundle.detectors import is_number, looks_random

    assume(looks_random(value) and not is_number(value[:cut]) and not is_number(value[cut:]))
    coloured = f"\x1b[1mAPI_TOKEN\x1b[0m={code}{value[:cut]}{code}{value[cut:]}\n"
    out = _scrubbed(coloured)
    assert not _leaks(value[:cut], out) or cut < 6
    long = (value * 4)[:64 + cut]  # longer than the 64 columns after the name: it wraps
    line = "export HF_TOKEN=" + long
    out = _scrubbed(line[:80] + "\n" + line[80:] + "\n")
    assert not _leaks(long[:64], out)
    assert not _leaks(long[64:], out) or len(long) - 64 < 6  # a tail under 6 is not learned


@FAST
@given(st.sampled_from(sorted(PREFIXES)), st.text(ALNUM, min_size=80, max_size=120),
       st.from_regex(r"[A-Z][A-Z0-9]{5,12}(_[A-Z0-9]{1,6}){0,2}", fullmatch=True),
       st.sampled_from(["=1", "_SC_016=x", ": ok", "=" + "v" * 30]))
def test_a_line_after_an_80_column_token_keeps_its_first_word(prefix: str, body: str, word: str,
                                                              rest: str) -> None:
    """A token that fills a line to column 80 reads as wrapped into the next line; when the
    match stops inside that line's first word (`CORPUS_SC_016=`), the word is the next line's
    own, not the token's tail: learned, it was hidden everywhere (the ticket T-CORPUS)."""
    token = (prefix + body)[:80]
    text = f"{token}\n{word}{rest}\nticket T-{word}\n"
    out = _scrubbed(text)
    assert f"ticket T-{word}" in out
    assert not _leaks(token, out)


@FAST
@given(st.text(max_size=200))
def test_normalized_pieces_join_to_the_span(text: str) -> None:
    norm, seams = normalized(text)
    if seams is not None and norm:
        a, b = 0, len(norm)
        assert "".join(seams.pieces(a, b)) == norm


@FAST
@given(st.sampled_from(["num_tokens", "max_new_tokens", "NUM_TOKENS", "total_tokens"]),
       st.integers(0, 10**9))
def test_a_token_count_is_evidence(name: str, count: int) -> None:
    text = f"{name}={count} NCCL_BUFFSIZE={count} seq_len {count}\n"
    assert _scrubbed(text) == text


@FAST
@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=200),
       st.sampled_from(["utf-16", "utf-16-le", "utf-32"]))
def test_a_text_layer_writes_back_what_it_opened(text: str, codec: str) -> None:
    data = text.encode(codec, "surrogatepass") if codec != "utf-16-le" else \
        b"\xff\xfe" + text.encode(codec, "surrogatepass")
    layer = open_layer(data, 0)
    assert layer is not None
    assert layer.rewrap(layer.inner) == data


@FAST
@given(st.binary(min_size=1, max_size=500), st.binary(max_size=40))
def test_zlib_and_zip_layers_round_trip(body: bytes, prefix: bytes) -> None:
    stream = zlib.compress(body)
    layer = open_layer(stream, 0)
    assert layer is not None and layer.inner == body
    assert zlib.decompress(layer.rewrap(layer.inner)) == body
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("m.bin", body)
    got = zip_members(prefix + buf.getvalue())
    if not prefix.startswith(b"PK"):
        assert got is not None
        pre, members = got
        assert pre == prefix and members[0][1] == body
        again = zip_members(zip_bytes(pre, [(members[0][0], "m.bin", body)]))
        assert again is not None and again[1][0][1] == body


FRAGMENTS = st.lists(st.sampled_from(
    ["HF_TOKEN", "=", "abc123XYZ", " ", "\n", '"', "'", ":", "password", "a.b", "-", "key",
     "MyApiKey", "x", "_", "0", "secret_key", " = ", "\t", "Ünï", "--token", "&sig"]), max_size=30)


@FAST
@given(FRAGMENTS)
def test_trying_the_pair_rules_near_secret_words_finds_what_a_full_scan_does(parts) -> None:
    from aorta_tui.bundle import detectors, redact

    text = "".join(parts)
    cases = [(detectors._PAIR_RE, detectors.SECRET_WORDS, r"[\w.-]"),
             (redact._KEYWORD_RE, redact._CORE_WORDS, "[A-Za-z0-9_.-]"),
             (redact._SECRET_PAIR_RES[0], redact._CORE_WORDS, "[A-Za-z0-9_]"),
             (redact._SECRET_PAIR_RES[1], redact._CORE_WORDS, "[A-Za-z0-9_]")]
    for regex, words, chars in cases:
        full = [m.span() for m in regex.finditer(text)]
        near = [m.span() for m in detectors.finditer_near(regex, text, words, chars)]
        assert near == full, (regex.pattern[:40], text)
