"""A body message handed to the server with no coroutine around it (``streamguard._forward``).

``hand_over`` runs the server's ``send`` as far as it goes without waiting; ``SENT`` is the
awaitable of a message already taken, ``Handing`` that of one whose coroutine waits. The
native kernel's are held to the Python definitions (``streamguard._handover``) on generated
scripts of a server's ``send``; the definitions' behaviour, and the middleware's through
them, is held on both builds.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamguard import Outcome, StreamGuardMiddleware, StreamMonitor, StreamReport, _handover
from streamguard._forward import Forward, Link
from streamguard.liveness import LivenessLimits
from streamguard.sse import NATIVE_KERNEL

from .asgi_driver import Recorder, ScriptedApp, body, run, sse_start
from .helpers import FakeClock

HandOver = Callable[[Any, Any, Any], Awaitable[Any]]
#: Each ``hand_over`` this build has: the definition, and the kernel's where it was built.
HAND_OVERS: list[tuple[str, HandOver]] = [("definition", _handover._hand_over)]
if NATIVE_KERNEL:
    from streamguard import _kernel

    HAND_OVERS.append(("native", _kernel.hand_over))


class Thrown(Exception):
    """What the runner throws into a waiting hand-over (as a task's cancellation is)."""


@types.coroutine
def _suspend(value: Any) -> Generator[Any, Any, Any]:
    return (yield value)


@dataclass
class Landing:
    told: list[bool] = field(default_factory=list)

    def landed(self, lost: bool) -> None:
        self.told.append(lost)


#: A server's send, as a script: each step ``("wait", value)`` suspends yielding ``value``;
#: the last step ends it: ``("return", value)``, ``("oserror", None)``, ``("error", None)``.
Script = list[tuple[str, Any]]


def scripted_send(script: Script, trace: list[Any]) -> Callable[[Any], Any]:
    async def send(message: Any) -> Any:
        trace.append(("called", message))
        try:
            for kind, value in script:
                if kind == "wait":
                    trace.append(("resumed with", await _suspend(value)))
                elif kind == "return":
                    return value
                elif kind == "oserror":
                    raise OSError("client gone")
                else:
                    raise ValueError("server bug")
        except Thrown as thrown:
            trace.append(("thrown in", str(thrown)))
            raise
        finally:
            trace.append(("finally",))
        return None

    return send


def drive(hand_over: HandOver, script: Script, runner: list[str]) -> list[Any]:
    """Hand a message over through ``hand_over`` and await what it gives the way a task
    would, answering each value it yields per ``runner`` (``send`` a value back, ``throw``
    into it, or ``close`` it); the trace of what each side saw, in order."""
    trace: list[Any] = []
    landing = Landing()

    async def app() -> Any:
        answer = hand_over(scripted_send(script, trace), "message", landing)
        trace.append(("answer", "SENT" if answer is _handover.SENT else type(answer).__name__))
        return await answer

    coroutine = app()
    reply: Any = None
    steps = iter(runner)
    while True:
        try:
            action = next(steps, "send")
            if action == "throw":
                yielded = coroutine.throw(Thrown("stop"))
            elif action == "close":
                coroutine.close()
                trace.append(("closed", landing.told))
                return trace
            else:
                yielded = coroutine.send(reply)
            trace.append(("yielded", yielded, list(landing.told)))
            reply = f"reply to {yielded}"
        except StopIteration as stop:
            trace.append(("returned", stop.value, landing.told))
            return trace
        except BaseException as exc:
            trace.append(("raised", type(exc).__name__, landing.told))
            return trace


steps = st.lists(st.tuples(st.just("wait"), st.integers(0, 3)), max_size=3)
ends = st.sampled_from([("return", None), ("return", 7), ("oserror", None), ("error", None)])
scripts = st.tuples(steps, ends).map(lambda parts: [*parts[0], parts[1]])
runners = st.lists(st.sampled_from(["send", "send", "throw", "close"]), max_size=4)


@pytest.mark.skipif(not NATIVE_KERNEL, reason="the pure build has no native kernel")
@settings(max_examples=1_500, deadline=None)
@given(script=scripts, runner=runners)
@example(script=[("return", None)], runner=[])
@example(script=[("wait", 1), ("wait", 2), ("return", None)], runner=["send", "send"])
@example(script=[("wait", 1), ("oserror", None)], runner=[])
@example(script=[("oserror", None)], runner=[])
@example(script=[("wait", 1), ("return", None)], runner=["send", "throw"])
@example(script=[("wait", 1), ("return", None)], runner=["send", "close"])
def test_the_kernel_hands_over_as_the_definition(script: Script, runner: list[str]) -> None:
    """What the server's coroutine and the task see, and what the landing is told, in
    order: the same through the kernel's ``hand_over`` as through the definition."""
    assert drive(_kernel.hand_over, script, runner) == drive(_handover._hand_over, script, runner)


@pytest.mark.parametrize(("name", "hand_over"), HAND_OVERS)
def test_a_send_that_never_waits_is_sent_at_once(name: str, hand_over: HandOver) -> None:
    """The coroutine runs to its end in the call; the answer is ``SENT``; the landing is
    not told (the caller knows)."""
    trace = drive(hand_over, [("return", None)], [])
    assert trace == [
        ("called", "message"),
        ("finally",),
        ("answer", "SENT"),
        ("returned", None, []),
    ]
    seen: list[Any] = []
    landing = Landing()
    assert hand_over(scripted_send([("return", 5)], seen), "m", landing) is _handover.SENT
    assert seen == [("called", "m"), ("finally",)]  # ran before anything awaited it
    assert landing.told == []


@pytest.mark.parametrize(("name", "hand_over"), HAND_OVERS)
def test_a_waiting_send_is_driven_to_its_end_and_landed(name: str, hand_over: HandOver) -> None:
    """The task gets each value the coroutine yields, the coroutine each reply; the
    landing hears ``landed(False)`` once, at the end, and not before."""
    trace = drive(hand_over, [("wait", 1), ("wait", 2), ("return", 9)], [])
    assert trace == [
        ("called", "message"),
        ("answer", "Handing"),
        ("yielded", 1, []),
        ("resumed with", "reply to 1"),
        ("yielded", 2, []),
        ("resumed with", "reply to 2"),
        ("finally",),
        ("returned", None, [False]),  # (the value is dropped: ASGI's send returns None)
    ]


@pytest.mark.parametrize(("name", "hand_over"), HAND_OVERS)
def test_oserror_tells_the_landing_the_message_was_lost(name: str, hand_over: HandOver) -> None:
    """``OSError`` (ASGI 2.4: the client has gone), raised at once or after a wait, is
    told as lost before it is raised; any other exception is raised and not told."""
    at_once = drive(hand_over, [("oserror", None)], [])
    assert at_once == [("called", "message"), ("finally",), ("raised", "OSError", [True])]
    at_once = drive(hand_over, [("error", None)], [])
    assert at_once == [("called", "message"), ("finally",), ("raised", "ValueError", [])]
    waited = drive(hand_over, [("wait", 1), ("oserror", None)], [])
    assert waited[-1] == ("raised", "OSError", [True])
    waited = drive(hand_over, [("wait", 1), ("error", None)], [])
    assert waited[-1] == ("raised", "ValueError", [])


@pytest.mark.parametrize(("name", "hand_over"), HAND_OVERS)
def test_a_throw_or_close_reaches_the_waiting_coroutine(name: str, hand_over: HandOver) -> None:
    """A task's cancellation thrown in goes to the server's coroutine, as an ``await`` of it
    would pass it on; closing closes it. Neither is a delivery."""
    thrown = drive(hand_over, [("wait", 1), ("return", None)], ["send", "throw"])
    assert thrown[-3:] == [("thrown in", "stop"), ("finally",), ("raised", "Thrown", [])]
    closed = drive(hand_over, [("wait", 1), ("return", None)], ["send", "close"])
    assert closed[-2:] == [("finally",), ("closed", [])]


@pytest.mark.parametrize(("name", "hand_over"), HAND_OVERS)
def test_an_awaitable_that_is_no_coroutine_is_left_unstarted(
    name: str, hand_over: HandOver
) -> None:
    future: asyncio.Future[None] = asyncio.Future(loop=asyncio.new_event_loop())
    landing = Landing()
    assert hand_over(lambda message: future, "m", landing) is future
    assert landing.told == []
    future.get_loop().close()


def test_sent_is_a_finished_coroutine_anyone_may_await() -> None:
    """``SENT`` gives None to every awaiter, passes ``asyncio.create_task``'s check for a
    coroutine, and raises what is thrown into it."""
    sent = _handover.SENT

    async def main() -> list[Any]:
        task = asyncio.create_task(sent)  # type: ignore[arg-type]
        return [await sent, await sent, await task]

    assert asyncio.run(main()) == [None, None, None]
    assert asyncio.iscoroutine(sent)
    with pytest.raises(Thrown):
        sent.throw(Thrown("x"))  # type: ignore[attr-defined]
    with pytest.raises(StopIteration):
        sent.send(None)  # type: ignore[attr-defined]
    assert sent.close() is None  # type: ignore[attr-defined]


# -- through the middleware -------------------------------------------------------------


def _chunk(delta: bytes, finish: bytes = b"null") -> bytes:
    return (
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[{"index":0,"delta":' + delta + b',"finish_reason":' + finish + b"}]}\n\n"
    )


#: A healthy OpenAI chat stream, a frame a message.
HEALTHY = [
    sse_start(),
    body(_chunk(b'{"role":"assistant","content":""}')),
    body(_chunk(b'{"content":"hi"}')),
    body(_chunk(b"{}", b'"stop"')),
    body(b"data: [DONE]\n\n"),
    body(b"", more=False),
]


class WaitingRecorder(Recorder):
    """A server whose ``send`` waits a turn of the loop before it takes each message (a
    client reading slowly; trio's sockets on every write)."""

    async def send(self, message: Any) -> None:
        await asyncio.sleep(0)
        await super().send(message)


def guarded(app: Any, **options: Any) -> tuple[StreamGuardMiddleware, list[StreamReport]]:
    reports: list[StreamReport] = []
    options.setdefault("metrics", False)
    options.setdefault("logs", {"enabled": False})
    return StreamGuardMiddleware(app, on_report=reports.append, **options), reports


def _facts(report: StreamReport) -> tuple[Any, ...]:
    return (report.outcome, report.rules(), report.events, report.bytes, report.body_messages)


def test_a_waiting_server_gets_the_same_messages_and_gives_the_same_report() -> None:
    """Every message reaches a server whose send waits, the same objects in the same
    order, and the report is the one a server that takes them at once gives."""
    taken, reports_taken = run_with(Recorder(incoming=[{"type": "http.request", "body": b""}]))
    waited, reports_waited = run_with(
        WaitingRecorder(incoming=[{"type": "http.request", "body": b""}])
    )
    assert taken.sent == waited.sent == HEALTHY
    assert [_facts(r) for r in reports_waited] == [_facts(r) for r in reports_taken]
    assert (reports_waited[0].outcome, reports_waited[0].rules()) == (Outcome.COMPLETED, [])


def run_with(recorder: Recorder) -> tuple[Recorder, list[StreamReport]]:
    middleware, reports = guarded(ScriptedApp(HEALTHY), protocol="openai_chat")
    _, raised = run(middleware, recorder=recorder)
    assert raised is None
    return recorder, reports


def test_an_oserror_after_a_wait_is_a_client_disconnect_and_the_same_object() -> None:
    """The server's send waits, then raises ``OSError``: the app gets that very exception
    when it awaits, and the stream ended with the client gone."""
    recorder = WaitingRecorder(incoming=[{"type": "http.request", "body": b""}], fail_after=2)
    middleware, reports = guarded(ScriptedApp(HEALTHY), protocol="openai_chat")
    _, raised = run(middleware, recorder=recorder)
    assert raised is recorder.failure
    assert reports[0].outcome is Outcome.CLIENT_DISCONNECT


def test_an_app_may_run_its_send_as_a_task() -> None:
    """What ``send`` returns for a body message is a coroutine to ``asyncio.create_task``,
    whether the server took the message at once or waits."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        for message in HEALTHY:
            await asyncio.create_task(send(message))

    for recorder in (Recorder(), WaitingRecorder()):
        recorder.incoming = [{"type": "http.request", "body": b""}]
        middleware, reports = guarded(app, protocol="openai_chat")
        _, raised = run(middleware, recorder=recorder)
        assert raised is None
        assert recorder.sent == HEALTHY
        assert reports[0].outcome is Outcome.COMPLETED


def test_a_send_that_returns_a_future_is_awaited_and_landed() -> None:
    """A server's send that returns an awaitable that is not a coroutine (a future) is
    awaited as it is; the terminal it carried counts once it is done."""

    class FutureRecorder(Recorder):
        def send(self, message: Any) -> Any:  # type: ignore[override]
            future = asyncio.get_running_loop().create_future()
            self.sent.append(message)
            future.get_loop().call_soon(future.set_result, None)
            return future

    recorder = FutureRecorder(incoming=[{"type": "http.request", "body": b""}])
    middleware, reports = guarded(ScriptedApp(HEALTHY), protocol="openai_chat")
    _, raised = run(middleware, recorder=recorder)
    assert raised is None
    assert recorder.sent == HEALTHY
    assert (reports[0].outcome, reports[0].rules()) == (Outcome.COMPLETED, [])


def requests_garbage(requests: int = 5) -> tuple[list[Outcome], int]:
    """The outcomes of ``requests + 1`` watched requests, and the objects the garbage
    collector found after the last ``requests`` of them (the first makes what is made
    once)."""
    import gc

    middleware, reports = guarded(ScriptedApp(HEALTHY), protocol="openai_chat")
    run(middleware)
    gc.collect()
    gc.disable()
    try:
        for _ in range(requests):
            run(middleware)
        cycles = gc.collect()
    finally:
        gc.enable()
    return [report.outcome for report in reports], cycles


def test_a_request_leaves_no_garbage_cycle() -> None:
    """A watched stream's objects (the exchange, its ``Forward``, the monitor and all it
    holds) are freed when the request ends, by reference counting: none is left for the
    garbage collector (the exchange holds the ``Link``, not the ``Forward``, which holds
    the exchange). Counted in a fresh interpreter: what earlier tests left in cycles (a
    registry's metrics, once a test's server is gone) may be freed during these requests,
    and would be counted as theirs."""
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "from tests.test_handover import requests_garbage; "
        "outcomes, cycles = requests_garbage(); "
        "print(sum(o.value == 'completed' for o in outcomes), cycles)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    completed, cycles = map(int, done.stdout.split())
    assert completed == 6
    assert cycles == 0


def test_the_server_gets_a_body_message_when_send_is_called() -> None:
    """The documented difference: a body message goes to the server when the app calls
    ``send``, before the app awaits what it returned (as an eager task's first step)."""
    seen: list[int] = []
    recorder = Recorder(incoming=[{"type": "http.request", "body": b""}])

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(sse_start())
        pending = send(body(b"data: a\n\n"))
        seen.append(len(recorder.sent))  # the head and the body message
        await pending
        await send(body(b"", more=False))

    middleware, _reports = guarded(app, protocol="sse")
    run(middleware, recorder=recorder)
    assert seen == [2]


def test_the_grace_starts_when_a_waiting_server_takes_the_terminal(done_protocol: str) -> None:
    """A terminal whose send waits (a slow reader) is not delivered until the server's
    coroutine ends: the grace for ending the body starts then, as the monitor's own test
    shows for ``delivered`` (``test_liveness``), here through ``Forward`` and ``Handing``."""
    clock = FakeClock()
    limits = LivenessLimits(body_end_grace_s=5.0, idle_limit_s=60.0)
    monitor = StreamMonitor(done_protocol, clock=clock, liveness=limits, confirms_delivery=True)
    taken = asyncio.Event()

    async def server_send(message: Any) -> None:
        await taken.wait()

    class Exchange:
        def send(self, message: Any) -> Any:
            raise AssertionError("a body message the monitor takes is Forward's")

        def emit(self, found: Any) -> None:
            raise AssertionError(found)

        def fail(self, where: str, error: BaseException) -> None:
            raise error

    link = Link()
    link.watch(monitor)
    forward = Forward(Exchange(), server_send, link)

    async def main() -> list[str]:
        clock.now = 0.1
        waiting = forward(body(b"data: a\n\ndata: END\n\n"))
        assert type(waiting) is _handover.HANDING
        task = asyncio.ensure_future(waiting)
        await asyncio.sleep(0)
        rules = [finding.rule for finding in monitor.poll(30.0)]  # still with the server
        clock.now = 30.0
        taken.set()
        await task
        rules += [finding.rule for finding in monitor.poll(34.9)]
        rules += ["|"] + [finding.rule for finding in monitor.poll(35.1)]
        return rules

    assert asyncio.run(main()) == ["|", "body_not_ended"]
