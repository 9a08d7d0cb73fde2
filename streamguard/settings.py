"""The configuration from ``STREAMGUARD_*`` environment variables (optional extra).

``StreamGuardSettings()`` reads the same fields as ``StreamGuardConfig`` from the
environment, so a deployment can tune streamguard without a code change::

    STREAMGUARD_ROUTES='{"/v1/chat/completions": "openai_chat"}'
    STREAMGUARD_SAMPLE_RATE=0.25
    STREAMGUARD_TIMERS__IDLE_LIMIT_S=120

Nested fields use ``__``; dicts and lists are JSON. It is a ``StreamGuardConfig``, so it
goes straight to the middleware: ``StreamGuardMiddleware(app, config=StreamGuardSettings())``
(the runtime objects, such as ``metrics=`` or ``on_report=``, are passed beside it).
Needs pydantic-settings: ``pip install 'streamguard[settings]'``.
"""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

from streamguard.config import StreamGuardConfig

__all__ = ["StreamGuardSettings"]


class StreamGuardSettings(BaseSettings, StreamGuardConfig):
    """``StreamGuardConfig`` whose unset fields come from ``STREAMGUARD_*`` variables."""

    model_config = SettingsConfigDict(
        env_prefix="STREAMGUARD_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )
