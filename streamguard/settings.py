"""The configuration from ``STREAMGUARD_*`` environment variables (optional extra).

``StreamGuardSettings()`` reads the same fields as ``StreamGuardConfig`` from the
environment, so a deployment can tune streamguard without a code change::

    STREAMGUARD_ROUTES='{"/v1/chat/completions": "openai_chat"}'
    STREAMGUARD_SAMPLE_RATE=0.25
    STREAMGUARD_TIMERS__IDLE_LIMIT_S=120

Nested fields use ``__``; dicts and lists are JSON. A ``STREAMGUARD_*`` variable that names
no field is an error, as a misspelt keyword is (pydantic-settings itself reads only the
variables of known fields, so ``STREAMGUARD_SAMPLE_RAT`` would be ignored without a word);
the variables of the build, the tests and the benchmarks (``NOT_SETTINGS``) are not
settings and are left alone. It is a ``StreamGuardConfig``, so it
goes straight to the middleware: ``StreamGuardMiddleware(app, config=StreamGuardSettings())``
(the runtime objects, such as ``metrics=`` or ``on_report=``, are passed beside it).
Needs pydantic-settings: ``pip install 'streamguard[settings]'``.
"""

from __future__ import annotations

import difflib
import os
from typing import Any

from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from streamguard.config import StreamGuardConfig

__all__ = ["NOT_SETTINGS", "StreamGuardSettings"]

PREFIX = "STREAMGUARD_"
#: ``STREAMGUARD_*`` variables that are not settings: the build's (``PURE_PYTHON``,
#: ``MYPYC_OPT_LEVEL``), and the test suite's and the benchmarks' (by their prefixes).
NOT_SETTINGS = (
    "STREAMGUARD_PURE_PYTHON",
    "STREAMGUARD_MYPYC_OPT_LEVEL",
    "STREAMGUARD_EXPECT_BUILD",
    "STREAMGUARD_REQUIRE_",
    "STREAMGUARD_BENCH_",
    "STREAMGUARD_TEST_",
)


def _unknown_variables(fields: set[str]) -> list[str]:
    """What is wrong with each ``STREAMGUARD_*`` variable that names no field."""
    known = {PREFIX + name.upper() for name in fields}
    problems = []
    for name in sorted(os.environ):
        upper = name.upper()
        if not upper.startswith(PREFIX) or upper.startswith(NOT_SETTINGS):
            continue
        if upper.partition("__")[0] in known:
            continue  # a nested field's, which the field's own model checks
        close = difflib.get_close_matches(upper, sorted(known), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        problems.append(f"{name} is not a streamguard setting{hint}")
    return problems


class StreamGuardSettings(BaseSettings, StreamGuardConfig):
    """``StreamGuardConfig`` whose unset fields come from ``STREAMGUARD_*`` variables."""

    model_config = SettingsConfigDict(
        env_prefix="STREAMGUARD_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_variables(cls, data: Any) -> Any:
        problems = _unknown_variables(set(cls.model_fields))
        if problems:
            raise ValueError("; ".join(problems))
        return data
