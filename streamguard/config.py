"""Everything a user sets, as one validated pydantic model.

``StreamGuardMiddleware(app, config=StreamGuardConfig(...))`` and
``StreamGuardMiddleware(app, routes=..., ...)`` are equivalent; either way the values are
checked once, at construction, and a bad one fails with a ``pydantic.ValidationError``
that names the field and shows the value.

Only values live here, things that can be written in a file or an environment variable.
The runtime objects the middleware works with (the metrics registry, ``on_report``, other
sinks, the clock) are its constructor's collaborators, not configuration.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from streamguard.liveness import LivenessLimits
from streamguard.protocols import AUTO, CHECKERS, PlainSSEChecker, load_plugins
from streamguard.sse import DEFAULT_MAX_EVENT_BYTES

__all__ = [
    "UNKNOWN_ROUTE",
    "CaptureConfig",
    "LogConfig",
    "RouteCaptureConfig",
    "RouteConfig",
    "StreamGuardConfig",
    "TimerConfig",
]

#: The ``route`` label of a stream whose route is neither configured nor templated.
UNKNOWN_ROUTE = "__unknown__"


def _known_protocol(protocol: str) -> str:
    if protocol != AUTO and protocol not in CHECKERS:
        load_plugins()
    if protocol != AUTO and protocol not in CHECKERS:
        known = ", ".join(sorted([AUTO, *CHECKERS]))
        raise ValueError(f"unknown protocol {protocol!r}; expected one of: {known}")
    return protocol


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RouteConfig(_Model):
    """One watched route: its protocol and the name used as its ``route`` label."""

    # ``json`` would shadow ``BaseModel.json``, so the field is ``json_data``, set as either.
    model_config = ConfigDict(populate_by_name=True)

    protocol: str = AUTO
    #: The metric label; defaults to the route's key in ``routes``.
    name: str | None = Field(default=None, min_length=1, max_length=100)
    #: Written ``"json": true`` in a route's dict: on a plain SSE route (``protocol`` ``sse``,
    #: required) every event's data is JSON, and data that is not (a Python ``repr`` of a
    #: dict, ``{'a': 1}``) is ``invalid_json``; the ``[DONE]`` sentinel is allowed.
    json_data: bool = Field(default=False, alias="json")
    #: This route's liveness timers: the fields written here replace the global
    #: ``timers``' (``{"idle_limit_s": 600}`` for a reasoning route silent for minutes),
    #: the others keep theirs.
    timers: TimerConfig | None = None
    #: This route's ``sample_rate``, in place of the global one.
    sample_rate: float | None = Field(default=None, ge=0.0, le=1.0)

    #: This route's captures (``streamguard.captures``): ``false`` none; ``true`` or the
    #: fields written here (in place of the global ``capture``'s) to capture its failed
    #: streams, with the global ``capture``'s store, or the default one.
    capture: RouteCaptureConfig | bool | None = None

    _check_protocol = field_validator("protocol")(_known_protocol)

    def capture_config(self, capture: CaptureConfig | None) -> CaptureConfig | None:
        """This route's captures: the global ``capture`` with this route's written fields
        in their place; ``None`` when the route captures nothing."""
        own = self.capture
        if own is None:
            return capture
        if own is False:
            return None
        base = capture if capture is not None else CaptureConfig()
        if own is True:
            return base
        return base.model_copy(update=own.model_dump(include=own.model_fields_set))

    def timer_config(self, timers: TimerConfig) -> TimerConfig:
        """The global ``timers`` with this route's written fields in their place."""
        if self.timers is None:
            return timers
        return timers.model_copy(
            update=self.timers.model_dump(include=self.timers.model_fields_set)
        )

    @model_validator(mode="after")
    def _json_only_on_plain_sse(self) -> RouteConfig:
        # The other protocols define their payloads themselves; on them (or on ``auto``)
        # the option would be silently ignored, which is worse than an error here.
        if self.json_data and self.protocol != PlainSSEChecker.name:
            raise ValueError(
                f"json: true applies to plain SSE routes (protocol 'sse'), not to protocol "
                f"{self.protocol!r}, whose payloads the protocol itself defines"
            )
        return self


def _route_shorthand(value: Any) -> Any:
    """``{"/v1/chat/completions": "openai_chat"}`` is short for ``{"protocol": ...}``."""
    if isinstance(value, dict):
        return {
            key: {"protocol": spec} if isinstance(spec, str) else spec
            for key, spec in value.items()
        }
    return value


class TimerConfig(_Model):
    """The liveness timers: the thresholds of the timing rules (`body_not_ended`, `stalled`,
    `buffered_flush`), in seconds unless named otherwise. ``limits()`` is the form the
    detectors read (``streamguard.liveness.LivenessLimits``, the same fields without
    ``enabled``)."""

    enabled: bool = True
    #: Seconds the body may stay open after the terminal signal (``body_not_ended``).
    body_end_grace_s: float = Field(default=5.0, gt=0)
    #: Seconds without a byte before a stream is ``stalled``.
    idle_limit_s: float = Field(default=60.0, gt=0)
    #: A whole stream inside this window is a burst (``buffered_flush``) ...
    burst_window_s: float = Field(default=0.02, gt=0)
    #: ... when the first event took this many windows to arrive ...
    burst_first_event_ratio: float = Field(default=20.0, gt=0)
    #: ... and the stream has at least this many events ...
    burst_min_events: int = Field(default=16, ge=1)
    #: ... carried by at most two body messages or by at least this many events per
    #: message on average (a fast generator sending one event per message is no buffer).
    burst_min_events_per_message: float = Field(default=8.0, gt=0)
    #: Judge bursts by timing alone, as before body messages were counted (for an app
    #: known to replay a buffered answer one event per message).
    burst_timing_only: bool = False

    def limits(self) -> LivenessLimits | None:
        """The thresholds as the detectors read them; ``None`` when the timers are off."""
        if not self.enabled:
            return None
        return LivenessLimits(**self.model_dump(exclude={"enabled"}))


_OUTCOMES = Literal[
    "completed", "error_event", "unclosed", "client_disconnect", "app_error", "cancelled"
]


class RouteCaptureConfig(_Model):
    """What a route may set of the captures: which of its streams qualify, how they are
    kept. The store (``directory``, ``quota_bytes``) and the rate are the process's."""

    #: A stream qualifies with a finding of this severity or above (``None``: no finding
    #: does) ...
    severity: Literal["error", "warning", "info"] | None = "error"
    #: ... or when it ended with one of these outcomes.
    outcomes: tuple[_OUTCOMES, ...] = ("unclosed", "app_error")
    #: ``structure``: the body and the request's facts redacted (``streamguard.redact``:
    #: structure kept, content replaced). ``none`` KEEPS THE CONTENT AS SENT: model output,
    #: tool arguments, ids; only for streams whose content you may store.
    redact: Literal["structure", "none"] = "structure"
    #: Body bytes kept of one stream: the first and the last half of it, the middle
    #: dropped and said so in the capture. Held only while the stream is open.
    max_stream_bytes: int = Field(default=256 * 1024, ge=1024, le=64 * 1024 * 1024)


class CaptureConfig(RouteCaptureConfig):
    """Captures of failed streams, off unless set (``streamguard.captures``): a stream that
    qualifies is written, redacted by default, as a capture ``streamguard check`` and the
    timeline read, with its id on the report, the log line, the span and the exemplars."""

    #: Where capture files go (``<id>.capture.jsonl``), unless the middleware is given a
    #: ``capture_store``.
    directory: str = "streamguard-captures"
    #: The most the directory's captures may take on disk; the oldest go first.
    quota_bytes: int = Field(default=100 * 1024 * 1024, ge=64 * 1024)
    #: Captures written per rule per minute, per process; the rest are counted.
    per_rule_per_minute: int = Field(default=6, ge=0)
    #: Captures waiting to be written; one more is dropped and counted, never waited for.
    max_pending: int = Field(default=16, ge=1, le=1024)


class LogConfig(_Model):
    """What streamguard logs, and how much."""

    enabled: bool = True
    #: Which streams get a ``stream_<outcome>`` summary: only ``notable`` ones (a finding,
    #: an outcome in ``FAILED_OUTCOMES`` or ``NOTABLE_OUTCOMES``, a failure inside
    #: streamguard), or ``all``, a line for every healthy stream too. ``notable`` by
    #: default: the metrics count every stream by outcome already, and a line per healthy
    #: stream is noise at production rates and most of a stream's fixed cost. Violations
    #: are logged either way.
    summaries: Literal["all", "notable"] = "notable"
    #: ``stream_violation`` events per stream; the rest are counted on the summary.
    max_violations_per_stream: int = Field(default=20, ge=0)
    #: ``stream_violation`` events per (route, rule) per minute; the number suppressed
    #: rides on the next one emitted.
    violations_per_minute: int = Field(default=60, ge=0)
    #: Opt-in: put a shortened, escaped excerpt of the offending frame on violations.
    content_excerpts: bool = False
    excerpt_chars: int = Field(default=120, ge=1, le=4096)


class StreamGuardConfig(_Model):
    """The middleware's configuration; every field has a production default."""

    #: Watched routes by path or route template, e.g.
    #: ``{"/v1/chat/completions": "openai_chat", "/v1/messages": {"protocol":
    #: "anthropic", "name": "claude"}}``.
    routes: Annotated[dict[str, RouteConfig], BeforeValidator(_route_shorthand)] = Field(
        default_factory=dict
    )
    #: Watch SSE responses of routes not listed in ``routes``, as ``protocol``.
    watch_unlisted: bool = True
    protocol: str = AUTO
    #: Paths never watched: exact paths, or prefixes written with a trailing ``*``.
    exclude_paths: tuple[str, ...] = ()
    max_event_bytes: int = Field(default=DEFAULT_MAX_EVENT_BYTES, ge=1)
    #: Request bodies up to this size are read (as the app reads them) for request-aware
    #: checks; larger ones skip those checks. 0 turns peeking off.
    request_peek_bytes: int = Field(default=1024 * 1024, ge=0)
    timers: TimerConfig = Field(default_factory=TimerConfig)
    logs: LogConfig = Field(default_factory=LogConfig)
    #: Fraction of streams whose frames are checked in full; the others are still framed
    #: and judged on their terminal and outcome (the every-stream tier), and counted as
    #: ``unchecked_streams_total{reason="not_sampled"}`` too, so alert ratios leave them out.
    sample_rate: float = Field(default=1.0, ge=0.0, le=1.0)
    #: Checking time, in milliseconds, a stream may spend beyond a tenth of its age; past
    #: it the stream is only watched (bytes, outcome, timers), its frames no longer
    #: checked, and it is counted in ``checks_skipped_total{reason="checking_budget"}``.
    #: 0 turns the budget off. The default keeps a stream whose checking hogs the event
    #: loop from holding the other streams for more than about 0.6 s, and is about three
    #: times what a legitimate burst takes in pure Python (a 1 MB answer in one message,
    #: 10,000 chat events each with a finding: 145 ms); see ``docs/plugins.md``.
    checking_budget_ms: float = Field(default=500.0, ge=0.0)
    #: Export a zero for every series of each configured route at start, so ``rate()``
    #: ratios exist before traffic. ``False``: a route's series appear with its first
    #: stream, as an unlisted route's do (an idle route adds no lines to ``/metrics``).
    zero_series_at_start: bool = True
    #: Give the metrics of failures (``violations_total``, ``malformed_streams_total``, the
    #: failed outcomes of ``streams_total``) the trace of a stream that counted them, as an
    #: OpenMetrics exemplar: OpenTelemetry's current span at the stream's start, else the
    #: request's W3C ``traceparent``. On by default: a traced stream costs a small handle,
    #: a failing one a dict of two labels; shown only in the OpenMetrics exposition
    #: (docs/metrics.md, "Exemplars").
    exemplars: bool = True
    #: Captures of failed streams (``CaptureConfig``); ``None``, the default: none, except
    #: on routes that set their own ``capture``.
    capture: CaptureConfig | None = None

    _check_protocol = field_validator("protocol")(_known_protocol)

    @field_validator("exclude_paths")
    @classmethod
    def _paths_start_with_slash(cls, paths: tuple[str, ...]) -> tuple[str, ...]:
        for path in paths:
            if not path.startswith("/"):
                raise ValueError(f"excluded path {path!r} must start with '/'")
        return paths

    def is_excluded(self, path: str) -> bool:
        for excluded in self.exclude_paths:
            if excluded.endswith("*"):
                if path.startswith(excluded[:-1]):
                    return True
            elif path == excluded:
                return True
        return False


RouteConfig.model_rebuild()


def captures_configured(config: StreamGuardConfig) -> bool:
    """Whether any stream of ``config`` may be captured."""
    if config.capture is not None:
        return True
    return any(route.capture not in (None, False) for route in config.routes.values())
