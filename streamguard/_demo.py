"""``streamguard demo``: the demo app under uvicorn with streamguard mounted, end to end.

Healthy and broken streams are driven through it by an httpx client over loopback, and
each stream's report is printed as a table, then every finding. Needs the ``testing``
extra (uvicorn, httpx).
"""

from __future__ import annotations

import operator
import sys
import threading
from functools import partial
from typing import TextIO

from streamguard._demo_app import ROUTES, build_app
from streamguard._table import table
from streamguard.report import StreamReport
from streamguard.testing import serve

__all__ = ["drive", "main"]


def drive(base_url: str, path: str) -> str:
    """Read one stream to its end, as a client would; return what the client saw."""
    import httpx

    try:
        with httpx.stream("GET", base_url + path, timeout=10) as response:
            size = sum(len(chunk) for chunk in response.iter_raw())
        return f"{response.status_code}, {size} bytes"
    except httpx.HTTPError as exc:
        return f"cut off ({type(exc).__name__})"


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

    seen: dict[str, str] = {}
    # The server's own error log would repeat the two failures the table shows.
    with serve(build_app(on_report=on_report), log_level="critical") as base_url:
        print(f"streamguard demo: serving the demo app at {base_url}\n", file=out)
        for path in ROUTES:
            seen[path] = drive(base_url, path)
            with arrived:
                arrived.wait_for(partial(operator.contains, reports, path), timeout=5)

    rows = [["route", "client saw", "outcome", "events", "bytes", "ms", "findings"]]
    for path in ROUTES:
        report = reports.get(path)
        if report is None:
            rows.append([path, seen[path], "(no report)", "", "", "", ""])
            continue
        rows.append(
            [
                path,
                seen[path],
                report.outcome.value,
                str(report.events),
                str(report.bytes),
                f"{report.duration * 1000:.0f}",
                ", ".join(report.rules()) or "-",
            ]
        )
    print(table(rows), file=out)
    print("\nFindings:", file=out)
    for path in ROUTES:
        report = reports.get(path)
        for finding in report.findings if report else ():
            print(
                f"  {path}: [{finding.severity.value}] {finding.rule}: {finding.message}",
                file=out,
            )
    missing = [path for path in ROUTES if path not in reports]
    if missing:
        print(f"\nno report arrived for: {', '.join(missing)}", file=err)
        return 1
    return 0
