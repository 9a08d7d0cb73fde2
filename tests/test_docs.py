"""The documentation site: generated pages are up to date, hand-written ones match the code.

Three pages are generated and committed:

* ``docs/rules.md`` from ``streamguard rules --format markdown`` (``streamguard/rules.py``
  and the ``streamguard/rule_docs/`` package);
* ``docs/configuration.md`` from the pydantic models in ``streamguard/config.py``, by
  ``configuration_markdown`` below (field descriptions are the ``#:`` comments above each
  field in the source, or ``_EXTRA_DESCRIPTIONS`` here for fields without one);
* ``docs/lifecycles.md`` from each checker's ``LIFECYCLE`` table, by ``lifecycles_markdown``
  below (the protocol modules' theory of operation points there instead of copying it).

Regenerate them with ``.venv/bin/python -m tests.test_docs``. The CLI reference is written
by hand; a test checks it names every subcommand and option the parser has.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from streamguard import config as config_module
from streamguard.cli import (
    EXIT_BROKEN_PIPE,
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    _parser,
    rules_markdown,
)
from streamguard.config import (
    CaptureConfig,
    LogConfig,
    RouteConfig,
    StreamGuardConfig,
    TimerConfig,
)
from streamguard.protocols import AUTO, BUILT_IN, CHECKERS

#: The docs list the protocols streamguard ships, not plugins this machine may have.
BUILT_IN_NAMES = [spec.name for spec in BUILT_IN]

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REGENERATE = ".venv/bin/python -m tests.test_docs"

# -- the configuration reference -----------------------------------------------------------

_MODELS: tuple[type[BaseModel], ...] = (
    StreamGuardConfig,
    RouteConfig,
    TimerConfig,
    LogConfig,
    CaptureConfig,
)
#: Where each model sits under ``StreamGuardConfig``.
_PREFIX = {
    StreamGuardConfig: "",
    RouteConfig: "routes[path].",
    TimerConfig: "timers.",
    LogConfig: "logs.",
    CaptureConfig: "capture.",
}


def _protocols_or(*first: str) -> str:
    """Every registered protocol name, in registry order, as "`a`, `b` or `c`"."""
    names = [f"`{name}`" for name in (*first, *BUILT_IN_NAMES)]
    return ", ".join(names[:-1]) + " or " + names[-1]


#: Descriptions of fields that have no ``#:`` comment in config.py.
_EXTRA_DESCRIPTIONS = {
    ("StreamGuardConfig", "protocol"): (
        "The protocol of watched streams on routes not listed in `routes`: `auto` (detect "
        f"it from the path or the first decisive event), {_protocols_or()} (`sse` is plain "
        "SSE: framing rules only)."
    ),
    ("StreamGuardConfig", "max_event_bytes"): (
        "The largest event, in bytes, the parser holds; past it the stream gets "
        "`event_too_large` and is passed through unchecked."
    ),
    ("StreamGuardConfig", "timers"): "Liveness timers: see `timers.*` below.",
    ("StreamGuardConfig", "logs"): "Logging policy: see `logs.*` below.",
    ("RouteConfig", "protocol"): (
        "The route's protocol (same values as `protocol`); `auto` detects it."
    ),
    ("TimerConfig", "enabled"): (
        "Run the timing detectors (`body_not_ended`, `stalled`, `buffered_flush`)."
    ),
    ("LogConfig", "enabled"): (
        "Log through structlog (logger `streamguard`), or the stdlib logger `streamguard` "
        "while structlog is unconfigured (silent until the app configures logging: see "
        "[Logs](index.md#logs-and-request-ids)): `stream_violation` events and a "
        "`stream_<outcome>` summary per stream (per notable one by default: `summaries`)."
    ),
    ("LogConfig", "excerpt_chars"): "Length of a content excerpt, when excerpts are on.",
}

_CONFIG_INTRO = """\
# Configuration

Everything streamguard's middleware does is set by one validated pydantic model,
`streamguard.config.StreamGuardConfig`. Pass it whole or pass its fields as keywords; the two
are equivalent and cannot be mixed:

```python
from fastapi import FastAPI
from streamguard import StreamGuardMiddleware
from streamguard.config import RouteConfig, StreamGuardConfig

app = FastAPI()
app.add_middleware(
    StreamGuardMiddleware,
    routes={
        "/v1/chat/completions": "openai_chat",
        "/v1/messages": {"protocol": "anthropic", "name": "claude"},
        # a reasoning route may think for minutes: its own idle limit, the others keep 30 s
        "/v1/reason": {"protocol": "openai_chat", "timers": {"idle_limit_s": 600}},
    },
    exclude_paths=("/internal/*",),
    timers={"idle_limit_s": 30},
)

# as one object, whose fields are typed as the models they hold
config = StreamGuardConfig(routes={"/v1/chat/completions": RouteConfig(protocol="openai_chat")})
app.add_middleware(StreamGuardMiddleware, config=config)
```

Values are checked once, at construction: an unknown field, a protocol that is not one of
{protocols},
an excluded path without a leading `/` or a value out of range raises
`pydantic.ValidationError`, naming the field. The models are frozen. Nested models
(`routes`, `timers`, `logs`) accept plain dicts, and a route its protocol's name, at run
time; a type checker reads `StreamGuardConfig`'s fields as declared and wants the models
there (`RouteConfig(protocol="openai_chat")`, `TimerConfig(idle_limit_s=30)`), while the
middleware's keywords are typed to take the dicts and names too.

**From the environment.** With the `settings` extra (`pip install 'streamguard[settings]'`),
`streamguard.settings.StreamGuardSettings()` is a `StreamGuardConfig` whose fields come from
`STREAMGUARD_*` variables: `STREAMGUARD_SAMPLE_RATE=0.25`,
`STREAMGUARD_ROUTES='{"/v1/chat/completions": "openai_chat"}'` (JSON for dicts and lists),
`STREAMGUARD_TIMERS__IDLE_LIMIT_S=120` (`__` for nested fields). A misspelt variable is an
error, as a misspelt keyword is. Pass it as `config=StreamGuardSettings()`.

Besides the configuration, `StreamGuardMiddleware(app, config=None, *, <each field above
as a keyword>, metrics=None, on_report=None, sinks=(), clock=time.monotonic)` takes the
objects it works with, which are not configuration: `metrics`, a `StreamGuardMetrics`, a
prometheus-client `CollectorRegistry` (default: the global one) or `False` for none;
`on_report`, a callable that receives each watched stream's `StreamReport` when it ends
(it runs on the event loop: see `streamguard.handoff.ReportQueue` for slow work); `sinks`,
more `streamguard.sinks.Sink` implementations; and `clock`, for tests. Every keyword is
typed, so a misspelt one is an error in your type checker as well as at run time.

**Which responses are watched.** A response is watched when its status is 2xx, its media type
is `text/event-stream`, the request is not `HEAD`, its path is not in `exclude_paths`, and
its route is listed in `routes` or `watch_unlisted` is true. A route in `routes` matches by
exact path first, then by the route template Starlette or FastAPI routing matched
(`/v1/threads/{thread_id}/runs`). Its `route` label is its `name`, else its key; an
unlisted route is labelled with its template, or `__unknown__` when there is none, never
with a raw path.
"""

_CONFIG_OUTRO = """\
<!-- Generated from streamguard/config.py by `.venv/bin/python -m tests.test_docs`;
tests/test_docs.py fails when it is out of date. -->
"""


def _field_comments(cls: type[BaseModel]) -> dict[str, str]:
    """The ``#:`` comment lines right above each field of ``cls`` in config.py, those of
    the classes it derives from in config.py too (a field written again wins)."""
    source = Path(config_module.__file__).read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    nodes = [classes[c.__name__] for c in reversed(cls.__mro__) if c.__name__ in classes]
    comments: dict[str, str] = {}
    for statement in (statement for node in nodes for statement in node.body):
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            above: list[str] = []
            row = statement.lineno - 2
            while row >= 0 and lines[row].strip().startswith("#:"):
                above.insert(0, lines[row].strip()[2:].strip())
                row -= 1
            if above:
                comments[statement.target.id] = " ".join(above)
    return comments


def _rst_to_md(text: str) -> str:
    return text.replace("``", "`")


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type) and not getattr(annotation, "__args__", None):
        return annotation.__name__
    text = str(annotation)
    for prefix in ("streamguard.config.", "typing."):
        text = text.replace(prefix, "")
    return text


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return f"`{type(value).__name__}()`"
    else:
        value = field.default
    if isinstance(value, float) and value.is_integer():
        return f"`{value}`"
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


_BOUNDS = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤", "min_length": "length ≥",
           "max_length": "length ≤"}  # fmt: skip


def _constraints(field: FieldInfo) -> str:
    found = []
    for item in field.metadata:
        for attribute, symbol in _BOUNDS.items():
            value = getattr(item, attribute, None)
            if value is not None:
                found.append(f"{symbol} {value}")
    return ", ".join(found)


def configuration_markdown() -> str:
    """The configuration reference page, generated from the pydantic models."""
    out = [_CONFIG_INTRO.replace("{protocols}", _protocols_or(AUTO))]
    for model in _MODELS:
        comments = _field_comments(model)
        title = {
            StreamGuardConfig: "`StreamGuardConfig`",
            RouteConfig: "`RouteConfig`: each value of `routes`",
            TimerConfig: "`TimerConfig`: `timers`",
            LogConfig: "`LogConfig`: `logs`",
            CaptureConfig: "`CaptureConfig`: `capture`",
        }[model]
        out += [f"## {title}", "", _rst_to_md(_prose(model.__doc__ or "")), ""]
        out += ["| field | type | default | allowed | description |", "|---|---|---|---|---|"]
        for name, field in model.model_fields.items():
            description = comments.get(name) or _EXTRA_DESCRIPTIONS.get((model.__name__, name))
            if not description:
                raise LookupError(f"no description for {model.__name__}.{name}")
            cells = [
                f"`{_PREFIX[model]}{name}`",
                _type_name(field.annotation).replace("|", "\\|"),
                _default(field),
                _constraints(field) or "",
                _rst_to_md(description).replace("|", "\\|"),
            ]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    out.append(_CONFIG_OUTRO)
    return "\n".join(out)


def _prose(text: str) -> str:
    return " ".join(text.split())


_LIFECYCLES_INTRO = """\
# Protocol lifecycles

<!-- Generated from the checkers' LIFECYCLE tables by `python -m tests.test_docs`; do not edit. -->

Each protocol's lifecycle is a table in its module (`LIFECYCLE`, see
[the protocol engine](architecture.md#the-protocol-engine)). This page prints every table
as `Lifecycle.describe()` does, generated from the code, so it cannot drift from what the
checkers do.

How to read a table: each phase is a line, `name [tags]: what it means`; `initial` is where
a stream starts, `terminal seen` and `error seen` phases record the terminal signal and the
in-band error, and in a `sealed` phase events are no longer parsed. Under it, one row per
kind of event: `-> phase` is a clean transition, `stays` changes nothing, and a rule name
is the lifecycle rule the event breaks, then the phase it leaves the stream in ("payload
not checked": its payload rules are skipped). `end` is the body's end, and `any other`
every kind the phase does not list. Every protocol tells apart `terminal` (its terminal
signal), `error` (an in-band error) and `other`; the kinds of its own are listed above its
table.
"""


def lifecycles_markdown() -> str:
    """The lifecycle page, generated from every checker's table."""
    out = [_LIFECYCLES_INTRO]
    for protocol, checker in CHECKERS.items():
        lifecycle = checker.LIFECYCLE
        out += [f"## `{protocol}`", ""]
        if lifecycle.kinds:
            out += [f"- `{kind}`: {what}" for kind, what in lifecycle.kinds.items()] + [""]
        out += ["```", lifecycle.describe(), "```", ""]
    return "\n".join(out)


GENERATED: dict[str, Callable[[], str]] = {
    "rules.md": rules_markdown,
    "configuration.md": configuration_markdown,
    "lifecycles.md": lifecycles_markdown,
}


@pytest.mark.parametrize("page", sorted(GENERATED))
def test_generated_page_is_up_to_date(page: str) -> None:
    committed = (DOCS / page).read_text()
    assert committed == GENERATED[page](), (
        f"docs/{page} is out of date with the code; regenerate it with `{REGENERATE}` "
        "(rules.md is also `streamguard rules --format markdown > docs/rules.md`)"
    )


def test_every_config_field_is_documented() -> None:
    """Also covered by generation; this names the field when a description is missing."""
    text = configuration_markdown()
    for model in _MODELS:
        for name in model.model_fields:
            assert f"`{_PREFIX[model]}{name}`" in text


# -- the CLI reference ----------------------------------------------------------------------


def _subparsers() -> dict[str, Any]:
    parser = _parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return dict(action.choices)  # type: ignore[arg-type]


def test_cli_reference_names_every_subcommand_option_and_choice() -> None:
    page = (DOCS / "cli.md").read_text()
    for name, sub in _subparsers().items():
        assert f"## `streamguard {name}`" in page, name
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in page or f"{option} " in page, (name, option)
            for choice in action.choices or ():
                assert f"`{choice}`" in page, (name, action.dest, choice)
            if action.default not in (None, [], "==SUPPRESS==") and action.option_strings:
                default = action.default
                assert f"`{default}`" in page or f"{default}" in page, (name, action.dest)


def test_cli_reference_exit_codes() -> None:
    page = (DOCS / "cli.md").read_text()
    for code in (EXIT_OK, EXIT_FINDINGS, EXIT_USAGE):
        assert f"| `{code}` |" in page


def test_cli_reference_explains_the_broken_pipe_exit_code() -> None:
    page = (DOCS / "cli.md").read_text()
    assert f"| `{EXIT_BROKEN_PIPE}` |" in page


# -- tests named by the pages ----------------------------------------------------------------


def test_every_test_a_page_names_exists() -> None:
    """`tests/test_x.py::test_name` in any page (the reliability page) is a real test."""
    for page in DOCS.glob("*.md"):
        for path, name in re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", page.read_text()):
            source = ROOT / path
            assert source.is_file(), f"docs/{page.name} names {path}, which does not exist"
            assert re.search(rf"def {name}\b", source.read_text()), (
                f"docs/{page.name} names {path}::{name}, which does not exist"
            )


# -- the site -------------------------------------------------------------------------------


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in sorted(DOCS.glob("*.md")):
        assert f": {page.name}" in nav, f"docs/{page.name} is not in mkdocs.yml's nav"


def test_rule_anchors_from_other_pages_exist() -> None:
    """Links like rules.md#missing-terminal in any page point at a generated anchor."""
    rules_page = (DOCS / "rules.md").read_text()
    for page in DOCS.glob("*.md"):
        for fragment in re.findall(r"rules\.md#([a-z0-9-]+)", page.read_text()):
            assert f'<a id="{fragment}"></a>' in rules_page, (page.name, fragment)


@pytest.mark.slow  # the whole site, by mkdocs in a process of its own: make check
@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
                    reason="mkdocs is not installed (the docs extra)")  # fmt: skip
def test_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs is not None
    result = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def main() -> None:
    for page, generate in GENERATED.items():
        (DOCS / page).write_text(generate())
        print(f"wrote docs/{page}")


if __name__ == "__main__":
    main()
