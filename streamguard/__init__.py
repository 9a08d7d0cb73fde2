"""streamguard: watch LLM-style Server-Sent-Event streams as they leave your app.

Checks framing and each protocol's terminal rules frame by frame, without buffering and
without changing a byte, and reports what it finds.
"""

from streamguard.middleware import StreamGuardMiddleware
from streamguard.monitor import StreamEnd, StreamMonitor, check_stream
from streamguard.report import Finding, Outcome, Severity, StreamReport
from streamguard.rules import RULES, Rule
from streamguard.sse import Event, EventParser

__all__ = [
    "RULES",
    "Event",
    "EventParser",
    "Finding",
    "Outcome",
    "Rule",
    "Severity",
    "StreamEnd",
    "StreamGuardMiddleware",
    "StreamMonitor",
    "StreamReport",
    "check_stream",
]

__version__ = "0.1.0"
