"""``conformance`` and ``probe`` URLs: a malformed one is a usage error that quotes nothing
secret, and a base URL's query string (Azure's ``?api-version=``) survives (issue 44)."""

from __future__ import annotations

import json

import pytest

from streamguard.cli import main
from streamguard.conformance import chat_url
from tests.conformance_server import FakeState
from tests.test_conformance_protocols import fake_endpoint

#: Malformed URLs, each with the secret it holds where a port, a user or a scheme would be.
MALFORMED = [
    ("http://h:sk-KEY/v1", "sk-KEY"),
    ("http://user:sk-PASSWORD@h:99999/v1", "sk-PASSWORD"),
    ("http://[::1/v1?key=sk-QUERY", "sk-QUERY"),
    ("sk-BARE/v1", "sk-BARE"),
    ("http:///v1?key=sk-NOHOST", "sk-NOHOST"),
]


@pytest.mark.parametrize(("url", "secret"), MALFORMED)
@pytest.mark.parametrize(
    "command",
    [
        ["conformance", "--model", "m", "--variants", "plain"],
        ["conformance", "--model", "m", "--dry-run"],
        ["probe", "--timeout", "1"],
    ],
    ids=["conformance", "dry-run", "probe"],
)
def test_a_malformed_url_is_a_usage_error_that_quotes_no_secret(
    url: str, secret: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, conformance raised a ValueError out of main (exit 1, a traceback) and probe
    quoted the port text: here, the key."""
    code = main([command[0], url, *command[1:]])
    out, err = capsys.readouterr()
    assert code == 2
    assert "not a valid URL" in err
    assert secret not in out + err


def test_a_probe_that_fails_names_the_url_without_credentials_or_query(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with fake_endpoint("openai_chat", FakeState()) as url:
        pass  # the port is free again: the connection is refused
    secret = url.replace("http://", "http://user:sk-PASSWORD@") + "?key=sk-QUERY"
    code = main(["probe", secret, "--timeout", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert "request failed: ConnectError" in err
    assert "sk-" not in err


def test_the_path_goes_before_the_query() -> None:
    assert chat_url("http://h/v1?api-version=2024-10-21") == (
        "http://h/v1/chat/completions?api-version=2024-10-21"
    )
    assert chat_url("http://h/v1/?api-version=1") == "http://h/v1/chat/completions?api-version=1"
    assert chat_url("http://h/v1/chat/completions?a=1") == "http://h/v1/chat/completions?a=1"


def test_a_base_url_with_a_query_string_reaches_the_endpoint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before, the path went after the query: every variant was a 404."""
    state = FakeState()
    with fake_endpoint("openai_chat", state) as url:
        code = main(["conformance", url + "?api-version=2024-10-21", "--model", "fake",
                     "--variants", "plain", "--json"])  # fmt: skip
    [variant] = json.loads(capsys.readouterr().out)["variants"]
    assert (variant["outcome"], variant["reason"]) == ("pass", "")
    assert code == 0


def test_the_dry_run_shows_the_real_path_and_the_query_names_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, it printed ``POST http://host/v1``: the query (and the path appended after
    it) left out, hiding the 404s to come."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    base = "http://127.0.0.1:9/v1?api-version=2024-10-21&key=sk-QUERY"
    assert main(["conformance", base, "--model", "m", "--variants", "plain", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (
        "POST http://127.0.0.1:9/v1/chat/completions?api-version=***&key=*** "
        "(no authorization header)"
    )
    assert "sk-QUERY" not in out
    main(["conformance", base, "--model", "m", "--variants", "plain", "--dry-run", "--json"])
    endpoint = json.loads(capsys.readouterr().out)["endpoint"]
    assert endpoint == "http://127.0.0.1:9/v1/chat/completions?api-version=***&key=***"
