"""A protocol of one's own (examples/job_progress_protocol.py), registered from outside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from examples import job_progress_protocol
from examples.job_progress_protocol import MAX_JOB_CHARS, SPEC, JobProgressChecker, build_app
from streamguard import Outcome, StreamGuardMiddleware, StreamReport, check_stream
from streamguard.protocols import (
    CHECKERS,
    SPECS,
    ProtocolSpec,
    register,
    request_facts_read_by,
    unregister,
)
from streamguard.protocols.auto import protocol_for_path
from streamguard.request import RequestFacts
from streamguard.rule_docs import RULE_DOCS
from streamguard.rules import RULES, Rule, rules_for
from streamguard.testing import serve

from .asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start
from .servers import wait_until

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def registered() -> Iterator[None]:
    register(SPEC)
    yield
    unregister(SPEC.name)


def _stream(*events: tuple[str, str]) -> list[bytes]:
    return [f"event: {name}\ndata: {data}\n\n".encode() for name, data in events]


def test_under_uvicorn_the_protocol_is_detected_and_checked() -> None:
    """Served by a real server, each job stream is detected by its path and judged."""
    reports: list[StreamReport] = []
    try:
        with serve(build_app(on_report=reports.append, metrics=False)) as url:
            for job in ("healthy", "backwards", "unfinished"):
                httpx.get(f"{url}/jobs/{job}/events").raise_for_status()
            wait_until(lambda: len(reports) == 3, 10)
    finally:
        unregister(SPEC.name)
    by_path = {report.path: report for report in reports}
    healthy = by_path["/jobs/healthy/events"]
    assert (healthy.protocol, healthy.protocol_source, healthy.outcome, healthy.findings) == (
        "job_progress",
        "path",
        Outcome.COMPLETED,
        (),
    )
    backwards = by_path["/jobs/backwards/events"]
    assert [(f.rule, f.event_index) for f in backwards.findings] == [("progress_went_back", 2)]
    unfinished = by_path["/jobs/unfinished/events"]
    assert unfinished.outcome is Outcome.UNCLOSED
    assert [f.rule for f in unfinished.findings] == ["missing_terminal"]


def test_a_first_progress_event_decides_auto(registered: None) -> None:
    """Off its path, the first ``progress`` event tells the protocol."""
    report = check_stream(
        _stream(("progress", '{"job":"j","percent":5}'), ("done", '{"job":"j"}'),
                ("progress", '{"job":"j","percent":6}')),
        protocol="auto",
    )  # fmt: skip
    assert (report.protocol, report.protocol_source) == ("job_progress", "event")
    assert [f.rule for f in report.findings] == ["event_after_terminal"]


def test_its_own_rules_join_the_catalog_and_leave_with_it(registered: None) -> None:
    """Registering adds its rules and docs; unregistering removes them again."""
    assert {"progress_went_back", "job_changed", "missing_terminal"} <= {
        rule.name for rule in rules_for("job_progress")
    }
    assert RULES["job_changed"].protocols == ("job_progress",)
    assert (
        RULE_DOCS["progress_went_back"].fix == "Send each job's progress from one place, in order."
    )
    assert protocol_for_path("/api/jobs/7/events") == "job_progress"
    unregister(SPEC.name)
    try:
        assert "job_changed" not in RULES
        assert "progress_went_back" not in RULE_DOCS
        assert "job_progress" not in CHECKERS
        assert protocol_for_path("/api/jobs/7/events") is None
        with pytest.raises(ValueError, match="unknown protocol 'job_progress'"):
            check_stream([], protocol="job_progress")
    finally:
        register(SPEC)


def test_a_spec_that_clashes_is_refused_and_leaves_no_trace(registered: None) -> None:
    """A taken name, a misnamed checker or a clashing rule: a ValueError, nothing kept."""
    with pytest.raises(ValueError, match="'job_progress' is registered already"):
        register(ProtocolSpec(name="job_progress", checker=JobProgressChecker, summary="again"))
    with pytest.raises(ValueError, match="is named 'job_progress'; set the class's name"):
        register(ProtocolSpec(name="jobs2", checker=JobProgressChecker, summary="misnamed"))

    class Clashing(JobProgressChecker):
        name = "clashing"

    other = Rule("missing_terminal", SPEC.rules[0].severity, "a different summary")
    with pytest.raises(ValueError, match="'missing_terminal', which is declared already"):
        register(ProtocolSpec(name="clashing", checker=Clashing, summary="x", rules=(other,)))
    assert "clashing" not in SPECS
    assert RULES["missing_terminal"].summary != "a different summary"
    assert "clashing" not in RULES["missing_terminal"].protocols


def _install_plugin(site: Path) -> None:
    """A distribution in ``site`` that names the example's spec in the entry-point group."""
    dist = site / "job_progress_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: job-progress-plugin\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[streamguard.protocols]\njob_progress = examples.job_progress_protocol:SPEC\n"
    )


def test_an_installed_entry_point_registers_it_for_the_cli(tmp_path: Path) -> None:
    """A distribution naming the spec in the entry-point group makes the CLI check it."""
    _install_plugin(tmp_path)
    capture = tmp_path / "backwards.sse"
    capture.write_bytes(
        b"".join(_stream(*[("progress", f'{{"job":"j","percent":{p}}}') for p in (9, 3)]))
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from streamguard.cli import main; sys.exit(main())",
         "check", "--protocol", "job_progress", str(capture)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert "progress_went_back" in run.stdout, run.stdout + run.stderr
    assert "missing_terminal" in run.stdout


def test_a_broken_entry_point_warns_and_streamguard_still_works(tmp_path: Path) -> None:
    """A plugin that fails to load is named in a warning at first look-up; detection works."""
    dist = tmp_path / "broken_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[streamguard.protocols]\nbroken = no_such_module:SPEC\n"
    )
    script = textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("always")
        from streamguard import check_stream
        print(check_stream([b"data: [DONE]\\n\\n"], protocol="auto").protocol)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"},
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert "the protocol plugin 'broken' (no_such_module:SPEC) was not registered" in run.stderr
    assert "ModuleNotFoundError" in run.stderr
    assert run.stdout.strip() == "openai_chat"


def test_the_example_module_is_importable_without_registering() -> None:
    """Importing the example declares the protocol; only register() makes it known."""
    assert job_progress_protocol.SPEC.name not in SPECS


def _job_report(request_body: bytes, *jobs: str) -> StreamReport:
    """The report of a POST to a job stream, left to detection, whose events name ``jobs``,
    served by an app that read ``request_body`` first (the scripted ASGI driver)."""
    reports: list[StreamReport] = []
    events = [("progress", f'{{"job":"{job}","percent":{i}}}') for i, job in enumerate(jobs)]
    frames = [body(frame) for frame in _stream(*events, ("done", f'{{"job":"{jobs[-1]}"}}'))]
    steps = ["receive", sse_start(), *frames, body(b"", more=False)]
    middleware = StreamGuardMiddleware(
        ScriptedApp(steps), protocol="auto", metrics=False, on_report=reports.append
    )
    incoming = [{"type": "http.request", "body": request_body}]
    run(middleware, http_scope("POST", "/jobs/j-1/events"), Recorder(incoming=incoming))
    [report] = reports
    return report


def test_the_job_a_request_names_is_owed(registered: None) -> None:
    """The spec's own request fact (``job``) reaches its checker: a stream of another job
    than the POST named is ``job_changed`` from its first event; the job it named is clean,
    and a name over the bound is no fact (the first event decides)."""
    asked = _job_report(b'{"job": "j-1"}', "j-2")
    assert [(f.rule, f.event_index) for f in asked.findings] == [("job_changed", i) for i in (0, 1)]
    assert asked.findings[0].message.endswith("another job than the request's")
    assert _job_report(b'{"job": "j-1"}', "j-1", "j-1").findings == ()
    too_long = json.dumps({"job": "j" * (MAX_JOB_CHARS + 1)}).encode()
    assert _job_report(too_long, "j-2", "j-2").findings == ()
    unasked = _job_report(b"{}", "j-2", "j-1")
    assert [(f.rule, f.event_index) for f in unasked.findings] == [
        ("job_changed", i) for i in (1, 2)
    ]
    assert unasked.findings[0].message.endswith("another job than event 0's")


def test_its_request_fact_is_read_while_it_is_registered(registered: None) -> None:
    """Registering adds its reader to every request's; unregistering takes it away."""
    assert RequestFacts({"job": "j-1"}) == {"job": "j-1"}
    assert request_facts_read_by("job_progress") == SPEC.request_facts
    unregister(SPEC.name)
    try:
        assert "job" not in RequestFacts({"job": "j-1"})
    finally:
        register(SPEC)


def test_an_installed_protocol_s_facts_are_read_on_its_first_route(tmp_path: Path) -> None:
    """A seam that names an installed plugin's protocol before anything looked it up still
    reads its facts: ``request_facts_read_by`` loads the plugins; a name no plugin has is
    every protocol's."""
    _install_plugin(tmp_path)
    script = textwrap.dedent(
        """
        from streamguard.protocols import request_facts_read_by
        from streamguard.request import request_facts
        reads = request_facts_read_by("job_progress")
        facts, _ = request_facts(b'{"job": "j-1", "n": 2}', 1024, reads)
        print(dict(facts), request_facts_read_by("nobody_s"))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"},
        cwd=tmp_path,
    )
    assert run.stdout.strip() == "{'job': 'j-1'} None", run.stdout + run.stderr
