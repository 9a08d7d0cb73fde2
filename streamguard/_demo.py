"""``streamguard demo``: the demo app under uvicorn with streamguard mounted, end to end.

Healthy and broken streams are driven through it by an httpx client over loopback; then the
demo prints what a team would see: each stream's report, streams by outcome, violations by
rule, a few of the structlog events streamguard emitted, and the Prometheus exposition lines
of the broken routes. Needs the ``testing`` extra (uvicorn, httpx).
"""

from __future__ import annotations

import operator
import sys
import textwrap
import threading
from collections import Counter
from collections.abc import MutableMapping
from functools import partial
from typing import Any, TextIO

from prometheus_client import CollectorRegistry, generate_latest
from structlog.testing import capture_logs

from streamguard._demo_app import ROUTES, build_app
from streamguard._table import table
from streamguard.report import Outcome, StreamReport
from streamguard.testing import serve

__all__ = ["drive", "main"]

#: How many structlog events to show: enough to see both kinds, few enough to read.
_LOG_LINES = 6
#: The width the notes under the table are wrapped to.
_NOTE_WIDTH = 92
#: The series an alert on broken streams reads.
_SHOWN_FAMILIES = (
    "streamguard_streams_total",
    "streamguard_malformed_streams_total",
    "streamguard_violations_total",
)


def drive(base_url: str, path: str) -> str:
    """Read one stream to its end, as a client would; return what the client saw."""
    import httpx

    try:
        with httpx.stream("GET", base_url + path, timeout=10) as response:
            size = sum(len(chunk) for chunk in response.iter_raw())
        return f"{response.status_code}, {size} bytes"
    except httpx.HTTPError as exc:
        return f"cut off ({type(exc).__name__})"


def _why(path: str, report: StreamReport) -> str | None:
    """Why a row reads as it does, where the table alone would puzzle a newcomer."""
    if path == "/content-length" and report.outcome is Outcome.CLIENT_DISCONNECT:
        return (
            f"{path} ended client_disconnect although the client got every byte: the "
            "response declared a Content-Length, so the client (httpx here, as any HTTP/1.1 "
            "client) took the body as complete once it had that many bytes and closed the "
            "connection, while the app had still to send its final, empty body message; the "
            "server saw the client leave first. With a Content-Length the client, not the "
            "app, decides where a stream ends (a length shorter than the stream cuts the "
            "answer short): that is what content_length_on_stream warns about."
        )
    if path == "/gzip" and not report.inspected:
        return (
            f"{path} shows 0 events: a compressed body cannot be parsed, so streamguard "
            "counts its bytes and its outcome, reports compressed_stream once, and passes "
            "the rest through unchecked."
        )
    return None


def _rule_summary(report: StreamReport) -> str:
    counts = Counter(report.rules())
    return ", ".join(f"{rule} x{n}" if n > 1 else rule for rule, n in counts.items()) or "-"


def _log_line(entry: MutableMapping[str, Any]) -> str:
    fields = " ".join(
        f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}"
        for key, value in entry.items()
        if key not in ("event", "log_level")
    )
    return f"  [{entry['log_level']:<7}] {entry['event']:<18} {fields}"


def main(out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the demo; 0 when every route reported, 1 otherwise."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    reports: dict[str, StreamReport] = {}
    arrived = threading.Condition()

    def on_report(report: StreamReport) -> None:
        with arrived:
            reports[report.path or "?"] = report
            arrived.notify_all()

    registry = CollectorRegistry()
    seen: dict[str, str] = {}
    app = build_app(on_report=on_report, metrics=registry)
    # The server's own error log would repeat the two failures the table shows.
    with capture_logs() as logs, serve(app, log_level="critical") as base_url:
        print(f"streamguard demo: serving the demo app at {base_url}\n", file=out)
        for path in ROUTES:
            seen[path] = drive(base_url, path)
            with arrived:
                arrived.wait_for(partial(operator.contains, reports, path), timeout=5)

    rows = [["route", "client saw", "outcome", "events", "ms", "findings"]]
    for path in ROUTES:
        report = reports.get(path)
        if report is None:
            rows.append([path, seen[path], "(no report)", "", "", ""])
            continue
        rows.append(
            [
                path,
                seen[path],
                report.outcome.value,
                str(report.events),
                f"{report.duration * 1000:.0f}",
                _rule_summary(report),
            ]
        )
    print(table(rows), file=out)
    notes = [
        textwrap.fill(why, _NOTE_WIDTH, initial_indent="* ", subsequent_indent="  ")
        for path in ROUTES
        if path in reports and (why := _why(path, reports[path])) is not None
    ]
    if notes:
        print("", *notes, sep="\n", file=out)

    outcomes = Counter(report.outcome for report in reports.values())
    print("\nStreams by outcome:", file=out)
    print(
        table([["outcome", "streams"]] + [[o.value, str(outcomes[o])] for o in Outcome]), file=out
    )
    violations = Counter(rule for report in reports.values() for rule in report.rules())
    print("\nViolations by rule:", file=out)
    by_rule = [["rule", "violations", "severity"]]
    severities = {f.rule: f.severity.value for r in reports.values() for f in r.findings}
    by_rule += [[rule, str(n), severities[rule]] for rule, n in violations.most_common()]
    print(table(by_rule), file=out)

    print(f"\nSome of the structlog events ({len(logs)} in all):", file=out)
    shown: dict[tuple[str, str], MutableMapping[str, Any]] = {}
    for entry in reversed(logs):  # the LLM routes come last: show those first
        if entry["log_level"] == "info" or not entry["event"].startswith("stream_"):
            continue
        kind = "violation" if entry["event"] == "stream_violation" else "summary"
        key = (kind, str(entry.get("rule") or entry["event"]))
        if key not in shown and sum(k[0] == kind for k in shown) < _LOG_LINES // 2:
            shown[key] = entry
    for entry in shown.values():
        print(_log_line(entry), file=out)

    print("\nMetrics of the broken routes (Prometheus exposition):", file=out)
    broken_routes = {
        path
        for path, r in reports.items()
        if r.findings or r.outcome in (Outcome.UNCLOSED, Outcome.APP_ERROR)
    }
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith("#") or line.endswith(" 0.0") or "_bucket" in line:
            continue
        if line.startswith(_SHOWN_FAMILIES) and any(
            f'route="{path}"' in line for path in broken_routes
        ):
            print(f"  {line}", file=out)

    missing = [path for path in ROUTES if path not in reports]
    if missing:
        print(f"\nno report arrived for: {', '.join(missing)}", file=err)
        return 1
    return 0
