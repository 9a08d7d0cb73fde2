"""The pytest plugin, run on inner test files with pytester."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

APP = """
import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route


async def _frames(frames):
    for frame in frames:
        yield frame


def _route(path, frames):
    async def endpoint(request):
        return StreamingResponse(_frames(frames), media_type="text/event-stream")

    return Route(path, endpoint)


def make_app():
    return Starlette(
        routes=[
            _route("/ok", [b"data: a\\n\\n", b"data: b\\n\\n"]),
            _route("/cut", [b"data: a\\n\\n", b"data: b"]),
            _route("/chat", [b"data: [DONE]\\n\\n", b"data: [DONE]\\n\\n"]),
            _route("/role", [
                b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
                b'"choices":[{"index":0,"delta":{"role":"assistant","content":"a"},'
                b'"finish_reason":null}]}\\n\\n',
                b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
                b'"choices":[{"index":0,"delta":{"role":"assistant","content":"b"},'
                b'"finish_reason":"stop"}]}\\n\\n',
                b"data: [DONE]\\n\\n",
            ]),
        ]
    )


def get(url):
    with httpx.stream("GET", url) as response:
        return b"".join(response.iter_raw())
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run the inner tests in a subprocess, as a user's run would load the plugin.

    In process, pytester drops the modules the inner run imported (httpcore's lazily
    imported ones among them), which breaks httpx's exception mapping for later tests.
    The plugins of other packages, which the inner tests never use, stay out (as the
    Makefile keeps langsmith's out of the suite's own runs), each paid once per inner run:
    importing hypothesis is about two thirds of a bare pytest's start-up, and langsmith's
    plugin (installed with the LangGraph SDK) takes a bare pytest from 0.8 s to 2.1 s.
    """
    return pytester.runpytest_subprocess(
        "-p", "no:hypothesispytest", "-p", "no:langsmith_plugin", *args
    )


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(streams=APP)
    return pytester


def test_clean_stream_passes(inner: pytest.Pytester) -> None:
    """A test whose streams are clean passes, and the fixture exposes the reports."""
    inner.makepyfile(
        """
        from streams import get, make_app

        def test_ok(streamguard_server):
            url = streamguard_server.serve(make_app())
            assert get(url + "/ok") == b"data: a\\n\\ndata: b\\n\\n"
            streamguard_server.settle()
            assert [r.path for r in streamguard_server.reports] == ["/ok"]
            assert streamguard_server.url == url
        """
    )
    result = run(inner)
    result.assert_outcomes(passed=1)


def test_error_finding_fails_the_test_with_the_list(inner: pytest.Pytester) -> None:
    """An error-severity finding fails the test with the stream, rule, place and frame."""
    inner.makepyfile(
        """
        from streams import get, make_app

        def test_cut(streamguard_server):
            url = streamguard_server.serve(make_app())
            get(url + "/ok")
            get(url + "/cut")
        """
    )
    result = run(inner)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_cut*",
            "streamguard: 1 stream(s) with error findings",
            "/cut (protocol sse, outcome completed, 1 event(s), 16 byte(s)):",
            "  - unterminated_frame [error] at event 1, byte 9: 7 byte(s) after the last blank "
            "line at the end of the body (starting at byte 9); clients discard the unfinished "
            "event",
            '(allow a rule with @pytest.mark.streamguard_allow("rule") or the streamguard_allow '
            "ini option)",
        ]
    )
    assert "/ok (" not in result.stdout.str()


def test_warnings_do_not_fail_the_test(inner: pytest.Pytester) -> None:
    """Only error-severity findings fail: a warning such as role_repeated does not."""
    inner.makepyfile(
        """
        from streams import get, make_app

        def test_role(streamguard_server):
            url = streamguard_server.serve(make_app())
            get(url + "/role")
            streamguard_server.settle()
            assert streamguard_server.reports[0].rules() == ["role_repeated"]
        """
    )
    run(inner).assert_outcomes(passed=1)


def test_marker_allows_named_rules(inner: pytest.Pytester) -> None:
    """@pytest.mark.streamguard_allow lets the named rules through, and only those."""
    inner.makepyfile(
        """
        import pytest
        from streams import get, make_app

        @pytest.mark.streamguard_allow("unterminated_frame")
        def test_cut_allowed(streamguard_server):
            get(streamguard_server.serve(make_app()) + "/cut")

        @pytest.mark.streamguard_allow("unterminated_frame")
        def test_other_rule_still_fails(streamguard_server):
            get(streamguard_server.serve(make_app()) + "/chat")
        """
    )
    result = run(inner)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "/chat (protocol openai_chat, outcome completed, 2 event(s), 28 byte(s)):",
            "  - duplicate_terminal [error] at event 1, byte 14: event 1 repeats the terminal "
            "signal first sent as event 0",
            "      data: [DONE]",
        ]
    )


def test_marker_with_an_unknown_rule_is_an_error(inner: pytest.Pytester) -> None:
    """A typo in the marker errors the test at setup, naming the closest rule."""
    inner.makepyfile(
        """
        import pytest
        from streams import get, make_app

        @pytest.mark.streamguard_allow("unterminated_frme")
        def test_typo(streamguard_server):
            get(streamguard_server.serve(make_app()) + "/cut")
        """
    )
    result = run(inner)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.streamguard_allow: unknown streamguard rule name(s) in allow: "
            "'unterminated_frme' (did you mean 'unterminated_frame'?); `streamguard rules` "
            "lists them"
        ]
    )


def test_ini_option_allows_rules_for_every_test(inner: pytest.Pytester) -> None:
    """The streamguard_allow ini option allows its rules in every test."""
    inner.makeini("[pytest]\nstreamguard_allow =\n    unterminated_frame\n    duplicate_terminal\n")
    inner.makepyfile(
        """
        from streams import get, make_app

        def test_cut(streamguard_server):
            url = streamguard_server.serve(make_app())
            get(url + "/cut")
            get(url + "/chat")
        """
    )
    run(inner).assert_outcomes(passed=1)


def test_ini_option_with_an_unknown_rule_is_a_usage_error(inner: pytest.Pytester) -> None:
    """A typo in the ini option stops the run with a usage error naming it."""
    inner.makeini("[pytest]\nstreamguard_allow = no_such_rule\n")
    inner.makepyfile("def test_nothing():\n    pass\n")
    result = run(inner)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: streamguard_allow ini option: unknown streamguard rule name(s) in allow: "
            "'no_such_rule'; `streamguard rules` lists them"
        ]
    )


def test_a_failing_test_is_not_reported_twice(inner: pytest.Pytester) -> None:
    """When the test itself fails, its own failure is reported and not the streams'."""
    inner.makepyfile(
        """
        from streams import get, make_app

        def test_fails(streamguard_server):
            get(streamguard_server.serve(make_app()) + "/cut")
            assert 1 == 2
        """
    )
    result = run(inner)
    result.assert_outcomes(failed=1)
    assert "streamguard: " not in result.stdout.str()


def test_marker_is_registered(inner: pytest.Pytester) -> None:
    """The marker is declared, so --strict-markers accepts it."""
    result = run(inner, "--markers")
    result.stdout.fnmatch_lines(
        ["@pytest.mark.streamguard_allow(*rules): findings of these streamguard rules do not *"]
    )


def test_a_failed_assertion_shows_the_callers_line_not_streamguards_body(
    inner: pytest.Pytester,
) -> None:
    """``assert_stream_ok`` hides its own frame from pytest's traceback: the failure shows
    the test's line and the message, not streamguard's source."""
    inner.makepyfile(
        """
        from streamguard.testing import assert_stream_ok

        def test_cut():
            assert_stream_ok(b"data: a\\n\\ndata: b")
        """
    )
    result = run(inner)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "assert_stream_ok(b" in output  # the caller's line
    assert "unterminated_frame" in output  # the message
    assert "allowed = check_allowed(allow)" not in output  # streamguard's own body


def test_serving_an_app_that_has_the_middleware_already_is_an_error(
    inner: pytest.Pytester,
) -> None:
    """An app with streamguard mounted (added as Starlette middleware, or wrapped by hand)
    would be watched twice by the fixture, every finding counted twice: refused, saying
    why. The same app without it is served."""
    inner.makepyfile(
        """
        import pytest
        from streams import get, make_app
        from streamguard import StreamGuardMiddleware

        def test_added(streamguard_server):
            app = make_app()
            app.add_middleware(StreamGuardMiddleware)
            with pytest.raises(ValueError, match="watched twice"):
                streamguard_server.serve(app)

        def test_wrapped(streamguard_server):
            with pytest.raises(ValueError, match="watched twice"):
                streamguard_server.serve(StreamGuardMiddleware(make_app()))

        def test_plain(streamguard_server):
            url = streamguard_server.serve(make_app())
            get(url + "/ok")
            assert len(streamguard_server.reports) == 1
        """
    )
    run(inner).assert_outcomes(passed=3)
