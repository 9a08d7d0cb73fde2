"""Data that is not JSON: one wording for every protocol, and frames that ran together."""

from __future__ import annotations

import pytest

from streamguard import check_stream
from streamguard.protocols import BUILT_IN

#: The protocols whose events carry JSON data.
JSON_PROTOCOLS = [spec.name for spec in BUILT_IN if spec.name != "sse"]

RAN_TOGETHER = "frames ran together"


def _not_json_messages(body: bytes, protocol: str) -> list[str]:
    report = check_stream(body, protocol=protocol)
    return [f.message for f in report.findings if f.rule == "invalid_json"]


@pytest.mark.parametrize("protocol", JSON_PROTOCOLS)
def test_two_documents_in_one_events_data_are_frames_that_ran_together(protocol: str) -> None:
    """Two JSON lines in one event's data: invalid_json says a blank line went missing."""
    messages = _not_json_messages(b'data: {"a": 1}\ndata: {"b": 2}\n\n', protocol)
    assert len(messages) == 1
    assert "data is not JSON (" in messages[0]
    assert RAN_TOGETHER in messages[0]
    assert '"a"' not in messages[0]  # the data by size only


@pytest.mark.parametrize("protocol", JSON_PROTOCOLS)
def test_one_document_over_several_data_lines_is_json(protocol: str) -> None:
    """A JSON document split over data lines is one document: no invalid_json at all."""
    assert _not_json_messages(b'data: {"a":\ndata: 1}\n\n', protocol) == []


@pytest.mark.parametrize(
    "body",
    [
        b"data: hello\ndata: world\n\n",  # text over two lines: not JSON, nothing ran together
        b'data: {"a": \ndata: oops\n\n',  # a broken document, its first line no document
        b'data: {"a": 1} trailing\n\n',  # one line
    ],
)
def test_data_that_is_simply_not_json_says_nothing_of_frames(body: bytes) -> None:
    """Data that is not JSON for another reason gets the plain wording."""
    messages = _not_json_messages(body, "openai_chat")
    assert len(messages) == 1
    assert RAN_TOGETHER not in messages[0]
