"""A protocol of one's own: a team's in-house SSE format, checked like a built-in one.

The format: a background job reports its progress, then ends with ``done`` (or ``failed``)::

    event: progress
    data: {"job": "j-1", "percent": 40}

    event: done
    data: {"job": "j-1"}

This module is all it takes: the rules of its own (with their docs), a checker on the
engine's lifecycle (a terminal signal and an in-band error, so ``missing_terminal``,
``duplicate_terminal`` and ``event_after_terminal`` come for free), the request fact it
reads (``job``: a client that POSTs ``{"job": "j-1"}`` is owed that job's events), and the
``SPEC`` that declares it. ``register(SPEC)`` makes it work everywhere a built-in protocol
does: route configuration, ``protocol="auto"`` (by the path ``/jobs/<id>/events`` or a
first ``progress`` event), ``streamguard check --protocol job_progress``, ``streamguard
rules``, the pytest helpers, metrics labels. A distribution can instead name the spec in its
``pyproject.toml``, and streamguard registers it when it is imported::

    [project.entry-points."streamguard.protocols"]
    job_progress = "examples.job_progress_protocol:SPEC"

``build_app`` serves a healthy job stream and two broken ones under the middleware, left to
detect the protocol (``python -m examples.job_progress_protocol`` runs it with uvicorn).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route as Endpoint

from streamguard import StreamGuardMiddleware
from streamguard.protocols.engine import (
    ERROR,
    NUMBER,
    OTHER,
    TERMINAL,
    Checker,
    Event,
    EventFindings,
    ProtocolSpec,
    RequestBody,
    RequestFact,
    Route,
    Rule,
    Severity,
    Signal,
    register,
    req,
    rule_doc,
    rules,
    terminated_lifecycle,
)

__all__ = ["MAX_JOB_CHARS", "PROGRESS_WENT_BACK", "SPEC", "JobProgressChecker", "build_app"]

PROGRESS_WENT_BACK = Rule(
    "progress_went_back",
    Severity.WARNING,
    "A job's percent went down; progress bars jump backwards.",
)
JOB_CHANGED = Rule(
    "job_changed",
    Severity.ERROR,
    "An event names another job than the one asked for; the client mixes two jobs.",
)

#: The longest job name a request fact keeps: what a client sends never sizes what is kept.
MAX_JOB_CHARS = 64


def read_job(body: RequestBody, facts: dict[str, Any], attributes: dict[str, Any]) -> None:
    """The request fact ``job``: the job a request body names, a string of at most
    ``MAX_JOB_CHARS`` characters (anything else is unknown, and the first event decides)."""
    job = None if isinstance(body, list) else body.get("job")
    if type(job) is str and len(job) <= MAX_JOB_CHARS:
        facts["job"] = job


class JobProgressChecker(Checker):
    """``progress`` events with a rising percent, one job per stream, then ``done``."""

    __slots__ = ("job", "job_from", "percent")

    name = "job_progress"
    LIFECYCLE = terminated_lifecycle(terminal="the `done` event")
    RAISES = frozenset(
        {
            PROGRESS_WENT_BACK,
            JOB_CHANGED,
            rules.INVALID_JSON,  # the engine's: data that is no JSON object,
            rules.SCHEMA_MISMATCH,  # a payload that is not its route's shape,
            rules.UNKNOWN_EVENT_TYPE,  # an event name the routes do not list
        }
    )
    TYPE_FIELD = None  # an event's SSE name is its type: ``event: progress``

    def __init__(self, request: Any = None, path: str | None = None) -> None:
        super().__init__(request, path)
        # The job the request asked for (its fact ``job``), else the first event's.
        self.job: object = None if request is None else request.get("job")
        self.job_from = "event 0's" if self.job is None else "the request's"
        self.percent = 0.0

    def is_terminal(self, event: Event) -> bool:
        return event.event == "done"

    def same_job(self, payload: dict[str, Any], found: EventFindings) -> None:
        job = payload.get("job")
        if self.job is None:
            self.job = job
        elif job != self.job:
            found.add(JOB_CHANGED, f": another job than {self.job_from}")

    def progress(self, payload: dict[str, Any], found: EventFindings) -> None:
        self.same_job(payload, found)
        if found.misshapen:
            return  # no numeric percent: the shape's finding says so
        percent: float = payload["percent"]
        if percent < self.percent:
            found.add(PROGRESS_WENT_BACK, f": percent {percent:g} after {self.percent:g}")
        self.percent = max(self.percent, percent)


JobProgressChecker.ROUTES = {
    "progress": Route(OTHER, JobProgressChecker.progress, (req("percent", NUMBER),)),
    "done": Route(TERMINAL, JobProgressChecker.same_job),
    "failed": Route(ERROR, JobProgressChecker.same_job),
}


def is_progress_event(event: Event, payload: object) -> bool:
    """The event signal: a ``progress`` event with a ``percent`` is this protocol's."""
    return event.event == "progress" and type(payload) is dict and "percent" in payload


def is_jobs_path(path: str) -> bool:
    """The path signal: ``/jobs/<id>/events``, under any prefix."""
    parts = path.split("/")
    return len(parts) >= 4 and parts[-3] == "jobs" and parts[-1] == "events"


SPEC: ProtocolSpec = ProtocolSpec(
    name=JobProgressChecker.name,  # the spec's name is the checker's
    checker=JobProgressChecker,
    summary="the example in-house job progress stream, ending in `done`",
    paths=(Signal(55, is_jobs_path),),  # the path names it (auto-detection)
    events=(Signal(95, is_progress_event),),  # one event proves it
    event_names=frozenset({"progress", "done", "failed"}),
    request_facts=(RequestFact(("job",), read_job),),  # what the checker reads of a request
    rules=(PROGRESS_WENT_BACK, JOB_CHANGED),  # rules the catalog does not hold
    rule_docs=(  # their long form, for `streamguard rules` and the docs
        rule_doc(
            "progress_went_back",
            meaning="A `progress` event's `percent` is lower than an earlier one's.",
            clients="The web client's progress bar jumps backwards.",
            example="""
                event: progress
                data: {"job": "j-1", "percent": 20}
                """,
            fix="Send each job's progress from one place, in order.",
        ),
        rule_doc(
            "job_changed",
            meaning="""An event's `job` differs from the one the request named (`{"job": ...}`
                in its body), or from the first event's when the request named none.""",
            clients="The client shows one job's progress on another's card.",
            example="""
                event: progress
                data: {"job": "j-2", "percent": 50}
                """,
            fix="Open one stream per job.",
        ),
    ),
)

#: Each demo job: the events it sends.
JOBS: dict[str, list[tuple[str, dict[str, int]]]] = {
    "healthy": [("progress", {"percent": p}) for p in (0, 50, 100)] + [("done", {})],
    "backwards": [("progress", {"percent": p}) for p in (0, 60, 30)] + [("done", {})],
    "unfinished": [("progress", {"percent": p}) for p in (0, 10)],
}


async def _job_events(request: Request) -> Response:
    job = request.path_params["job"]
    events = JOBS.get(job)
    if events is None:
        return Response(status_code=404)

    async def body() -> AsyncIterator[bytes]:
        for name, data in events:
            yield f"event: {name}\ndata: {json.dumps({'job': job, **data})}\n\n".encode()
            await asyncio.sleep(0)

    return StreamingResponse(body(), media_type="text/event-stream")


def build_app(**options: Any) -> StreamGuardMiddleware:
    """The jobs app under streamguard, with the protocol registered and left to detection;
    ``options`` go to the middleware (``on_report``, ``metrics``...)."""
    register(SPEC)
    app = Starlette(routes=[Endpoint("/jobs/{job}/events", _job_events)])
    return StreamGuardMiddleware(app, protocol="auto", **options)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(build_app(), host="127.0.0.1", port=8000)
