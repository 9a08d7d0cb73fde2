"""The main job, end to end: a real app under uvicorn with streamguard mounted.

Healthy and broken streams are driven through it by an httpx client over loopback, and
each stream's report is printed as a table, then every finding.

Run it with ``make demo`` (or ``python examples/demo.py`` inside the venv).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.plain_sse_app import ROUTES, build_app
from streamguard import StreamReport
from streamguard.testing import serve


def drive(base_url: str, path: str) -> str:
    """Read one stream to its end, as a client would; return what the client saw."""
    try:
        with httpx.stream("GET", base_url + path, timeout=10) as response:
            size = sum(len(chunk) for chunk in response.iter_raw())
        return f"{response.status_code}, {size} bytes"
    except httpx.HTTPError as exc:
        return f"cut off ({type(exc).__name__})"


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def main() -> int:
    reports: dict[str, StreamReport] = {}
    arrived = threading.Condition()

    def on_report(report: StreamReport) -> None:
        with arrived:
            reports[report.path or "?"] = report
            arrived.notify_all()

    seen: dict[str, str] = {}
    # The server's own error log would repeat the two failures the table shows.
    with serve(build_app(on_report=on_report), log_level="critical") as base_url:
        print(f"streamguard demo: serving examples/plain_sse_app.py at {base_url}\n")
        for path in ROUTES:
            seen[path] = drive(base_url, path)
            with arrived:
                arrived.wait_for(lambda path=path: path in reports, timeout=5)

    rows = [["route", "client saw", "outcome", "events", "bytes", "ms", "findings"]]
    for path in ROUTES:
        report = reports.get(path)
        if report is None:
            rows.append([path, seen[path], "(no report)", "", "", "", ""])
            continue
        findings = ", ".join(report.rules()) or "-"
        rows.append(
            [
                path,
                seen[path],
                report.outcome.value,
                str(report.events),
                str(report.bytes),
                f"{report.duration * 1000:.0f}",
                findings,
            ]
        )
    print(table(rows))
    print("\nFindings:")
    for path in ROUTES:
        report = reports.get(path)
        for finding in report.findings if report else ():
            print(f"  {path}: [{finding.severity.value}] {finding.rule}: {finding.message}")
    missing = [path for path in ROUTES if path not in reports]
    if missing:
        print(f"\nno report arrived for: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
