"""Configuration: defaults, shorthands and errors that name the field and the value."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from streamguard import StreamGuardMiddleware
from streamguard.config import RouteConfig, StreamGuardConfig

from .asgi_driver import ScriptedApp


def test_defaults_are_production_defaults() -> None:
    """With no arguments every stream is watched with auto-detection and sane limits."""
    config = StreamGuardConfig()
    assert (config.protocol, config.watch_unlisted, config.sample_rate) == ("auto", True, 1.0)
    assert (config.max_event_bytes, config.request_peek_bytes) == (1 << 20, 1 << 20)
    assert (config.timers.body_end_grace_s, config.timers.idle_limit_s) == (5.0, 60.0)
    assert config.logs.content_excerpts is False


def test_route_shorthand_and_full_form() -> None:
    """A protocol string is short for a RouteConfig; the full form sets the label name."""
    config = StreamGuardConfig(
        routes={
            "/v1/chat/completions": "openai_chat",
            "/v1/messages": {"protocol": "anthropic", "name": "claude"},
        }
    )
    assert config.routes == {
        "/v1/chat/completions": RouteConfig(protocol="openai_chat"),
        "/v1/messages": RouteConfig(protocol="anthropic", name="claude"),
    }


def _middleware(**options: object) -> StreamGuardMiddleware:
    return StreamGuardMiddleware(ScriptedApp([]), **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "field", "shown"),
    [
        ({"routes": {"/x": "openai"}}, "routes./x.protocol", "unknown protocol 'openai'"),
        ({"protocol": "grpc"}, "protocol", "unknown protocol 'grpc'"),
        ({"max_event_bytes": 0}, "max_event_bytes", "input_value=0"),
        ({"sample_rate": 1.5}, "sample_rate", "input_value=1.5"),
        ({"exclude_paths": ["health"]}, "exclude_paths", "'health' must start with '/'"),
        ({"timers": {"idle_limit_s": -1}}, "timers.idle_limit_s", "input_value=-1"),
        ({"metrics": "yes"}, "metrics", "not str"),
        ({"watch_unlisted_routes": True}, "watch_unlisted_routes", "Extra inputs"),
    ],
)
def test_bad_values_name_the_field_and_the_value(
    options: dict[str, object], field: str, shown: str
) -> None:
    """A bad value fails at construction, naming the field and showing the value."""
    # metrics is a runtime object, given to the middleware beside the configuration.
    build = _middleware if "metrics" in options else StreamGuardConfig
    with pytest.raises(ValidationError) as caught:
        build(**options)  # type: ignore[arg-type]
    message = str(caught.value)
    assert field in message
    assert shown in message


def test_middleware_takes_config_or_keywords_but_not_both() -> None:
    """Keyword options build a config; mixing them with ``config=`` is a TypeError."""
    registry = CollectorRegistry()
    middleware = StreamGuardMiddleware(ScriptedApp([]), protocol="anthropic", metrics=registry)
    assert middleware.config.protocol == "anthropic"
    with pytest.raises(TypeError, match=r"either config= or keyword options.*\['protocol'\]"):
        StreamGuardMiddleware(ScriptedApp([]), StreamGuardConfig(), protocol="anthropic")


@pytest.mark.parametrize(
    ("path", "excluded"),
    [("/health", True), ("/healthz", False), ("/internal/x", True), ("/internal", False)],
)
def test_excluded_paths_exact_or_prefix(path: str, excluded: bool) -> None:
    """An excluded path matches exactly, or as a prefix when written with a trailing ``*``."""
    config = StreamGuardConfig(exclude_paths=("/health", "/internal/*"))
    assert config.is_excluded(path) is excluded


def test_config_is_immutable() -> None:
    """A config cannot be changed after validation (the middleware relies on it)."""
    config = StreamGuardConfig()
    with pytest.raises(ValidationError, match="frozen"):
        config.sample_rate = 0.5  # type: ignore[misc]


def test_timer_fields_match_the_liveness_limits() -> None:
    """Every timer setting reaches the liveness detectors under the same name."""
    from dataclasses import fields

    from streamguard.config import TimerConfig
    from streamguard.liveness import LivenessLimits

    assert set(TimerConfig.model_fields) - {"enabled"} == {f.name for f in fields(LivenessLimits)}
    assert LivenessLimits() == LivenessLimits(**TimerConfig().model_dump(exclude={"enabled"}))


def test_keyword_options_are_exactly_the_config_fields() -> None:
    """Every configuration field is an explicit keyword of the middleware, and nothing else
    is, besides the runtime collaborators."""
    import inspect

    parameters = inspect.signature(StreamGuardMiddleware).parameters
    keywords = {name for name, p in parameters.items() if p.kind is p.KEYWORD_ONLY}
    collaborators = {"metrics", "on_report", "sinks", "clock", "capture_store"}
    assert keywords - collaborators == set(StreamGuardConfig.model_fields)
    assert all(parameters[name].default is None for name in StreamGuardConfig.model_fields)


@pytest.mark.parametrize("name", ["metrics", "on_report", "clock", "sinks"])
def test_runtime_objects_are_not_configuration(name: str) -> None:
    """A registry, a callback or a clock is the middleware's argument, not a config field."""
    assert name not in StreamGuardConfig.model_fields
    with pytest.raises(ValidationError, match="Extra inputs"):
        StreamGuardConfig(**{name: None})


def test_config_and_runtime_objects_go_together() -> None:
    """``config=`` combines with ``metrics=`` and ``on_report=``: they are not options."""
    registry = CollectorRegistry()
    middleware = StreamGuardMiddleware(
        ScriptedApp([]), StreamGuardConfig(protocol="sse"), metrics=registry, on_report=print
    )
    assert (middleware.config.protocol, middleware.on_report) == ("sse", print)
    assert middleware.metrics is not None


def test_timers_give_the_detectors_their_limits() -> None:
    """``TimerConfig.limits()`` is what the detectors read; ``None`` with the timers off."""
    from streamguard.config import TimerConfig
    from streamguard.liveness import LivenessLimits

    assert TimerConfig(idle_limit_s=3).limits() == LivenessLimits(idle_limit_s=3)
    assert TimerConfig(enabled=False).limits() is None
