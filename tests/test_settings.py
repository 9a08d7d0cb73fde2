"""Configuration from STREAMGUARD_* environment variables."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from streamguard import StreamGuardMiddleware
from streamguard.config import RouteConfig, StreamGuardConfig
from streamguard.settings import StreamGuardSettings

from .asgi_driver import ScriptedApp


def test_fields_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Top-level, JSON and nested fields are read from STREAMGUARD_* variables."""
    monkeypatch.setenv("STREAMGUARD_ROUTES", '{"/v1/chat/completions": "openai_chat"}')
    monkeypatch.setenv("STREAMGUARD_SAMPLE_RATE", "0.25")
    monkeypatch.setenv("STREAMGUARD_TIMERS__IDLE_LIMIT_S", "120")
    monkeypatch.setenv("STREAMGUARD_EXCLUDE_PATHS", '["/health"]')
    settings = StreamGuardSettings()
    assert isinstance(settings, StreamGuardConfig)
    assert settings.routes == {"/v1/chat/completions": RouteConfig(protocol="openai_chat")}
    assert (settings.sample_rate, settings.timers.idle_limit_s) == (0.25, 120.0)
    assert settings.exclude_paths == ("/health",)
    assert settings.timers.body_end_grace_s == 5.0  # the rest keep their defaults


def test_unset_environment_gives_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no STREAMGUARD_* variable the settings equal the default configuration."""
    for name in list(__import__("os").environ):
        if name.startswith("STREAMGUARD_"):
            monkeypatch.delenv(name)
    assert StreamGuardSettings().model_dump() == StreamGuardConfig().model_dump()


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("STREAMGUARD_SAMPLE_RATE", "3", "sample_rate"),
        ("STREAMGUARD_PROTOCOL", "grpc", "unknown protocol 'grpc'"),
        ("STREAMGUARD_TIMERS__IDLE_LIMIT", "3", "timers.idle_limit"),
        (
            "STREAMGUARD_SAMPLE_RAT",
            "0.25",
            "STREAMGUARD_SAMPLE_RAT is not a streamguard setting; did you mean "
            "STREAMGUARD_SAMPLE_RATE?",
        ),
        ("STREAMGUARD_VERBOSE", "1", "STREAMGUARD_VERBOSE is not a streamguard setting"),
    ],
)
def test_bad_or_misspelt_variables_are_errors(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, shown: str
) -> None:
    """A bad value or a misspelt variable, nested or not, fails, naming it."""
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=shown.replace("(", r"\(")):
        StreamGuardSettings()


def test_settings_configure_the_middleware(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings object is passed to the middleware as its configuration."""
    monkeypatch.setenv("STREAMGUARD_PROTOCOL", "anthropic")
    middleware = StreamGuardMiddleware(
        ScriptedApp([]), config=StreamGuardSettings(), metrics=CollectorRegistry()
    )
    assert middleware.config.protocol == "anthropic"


def test_the_builds_and_the_tests_variables_are_not_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``STREAMGUARD_PURE_PYTHON`` and the test and benchmark variables are left alone."""
    for name in ("STREAMGUARD_PURE_PYTHON", "STREAMGUARD_REQUIRE_NODE", "STREAMGUARD_BENCH_X"):
        monkeypatch.setenv(name, "1")
    assert StreamGuardSettings().sample_rate == 1.0
