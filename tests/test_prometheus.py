"""The shipped Prometheus rules and Grafana dashboard, and metrics under several workers.

promtool checks and unit-tests the rules; a real Prometheus on loopback scrapes the example
app while healthy and broken streams run, and every dashboard query and alert expression is
evaluated through its HTTP API; two uvicorn workers share one multiprocess ``/metrics``.
These need the ``prometheus`` and ``promtool`` binaries (Debian's ``prometheus`` package,
installed by ``.ci/run``) and are skipped, with that reason, only where they are missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, make_asgi_app
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from examples.plain_sse_app import ROUTES, build_app
from streamguard import StreamGuardMiddleware
from streamguard.httpx import StreamGuardTransport
from streamguard.testing import serve

ROOT = Path(__file__).resolve().parent.parent
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
ALERT_TESTS = ROOT / "deploy" / "prometheus" / "alerts.test.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "streamguard.json"
RUNBOOKS = ROOT / "docs" / "alerts.md"

PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
_MISSING = "{} is not installed (Debian package 'prometheus'; .ci/run installs it)"
#: Tests of the real tools are slow (`make check`, which CI runs with both installed):
#: a Prometheus server scraping a live app under load, promtool's own processes.
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason=_MISSING.format("promtool"))
needs_prometheus = pytest.mark.skipif(PROMETHEUS is None, reason=_MISSING.format("prometheus"))

#: What Grafana would put for the template variables with "All" selected, and its intervals.
TEMPLATE_VALUES = {
    "$__rate_interval": "1m",
    "$__interval": "1s",
    "$__range": "1m",
    "$job": ".*",
    "$route": ".*",
    "$protocol": ".*",
}
#: A comparison with a number (`> 0.05`), removed to evaluate an alert's underlying ratio.
THRESHOLD = re.compile(r"\s*(?:[<>]=?|==|!=)\s*(?:bool\s+)?[0-9.]+(?:e[+-]?[0-9]+)?")
JOB = "streamguard-example"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Call ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    pytest.fail(f"{what}: nothing after {timeout} s (last: {last!r})")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a server this module started, and its children, by its own process group."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def dashboard() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return result


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every dashboard target, template variables substituted."""
    queries = []
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in TEMPLATE_VALUES.items():
                expr = expr.replace("${" + variable[1:] + "}", value).replace(variable, value)
            queries.append((panel["title"], expr))
    return queries


# -- promtool ----------------------------------------------------------------------------


@pytest.mark.slow
@needs_promtool
def test_promtool_check_rules_accepts_the_rules() -> None:
    """`promtool check rules` accepts deploy/prometheus/alerts.yaml."""
    result = subprocess.run(
        [PROMTOOL or "promtool", "check", "rules", str(ALERTS)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.slow
@needs_promtool
def test_promtool_rule_unit_tests_pass() -> None:
    """The alerts fire, stay silent at low traffic and ignore client disconnects (promtool)."""
    result = subprocess.run(
        [PROMTOOL or "promtool", "test", "rules", ALERT_TESTS.name],
        cwd=ALERT_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


# -- the dashboard, statically -------------------------------------------------------------


def test_dashboard_has_the_promised_panels_and_variables() -> None:
    """The dashboard has a Prometheus datasource variable, route/protocol variables and panels."""
    model = dashboard()
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("route", "protocol"):
        assert variables[name]["includeAll"] is True
        assert variables[name]["allValue"] == ".*"
    exprs = dict(panel_queries())
    assert "streamguard_streams_total" in exprs["Streams by outcome"]
    assert "streamguard_malformed_streams_total" in exprs["Malformed ratio"]
    assert "streamguard_violations_total" in exprs["Violations by rule"]
    assert "streamguard_streams_in_progress" in exprs["Streams started and in progress"]
    assert "histogram_quantile" in exprs["Stream duration percentiles"]
    assert "histogram_quantile" in exprs["Time to first event percentiles"]
    for panel in model["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    assert all("$" not in expr for _, expr in panel_queries())


def test_dashboard_ratios_divide_by_checked_streams() -> None:
    """The ratio panels leave unchecked streams out, and a panel shows them by reason."""
    exprs = dict(panel_queries())
    for title in ("Malformed ratio", "Unclosed ratio"):
        assert "streamguard_unchecked_streams_total" in exprs[title], title
    assert "sum by (reason)" in exprs["Unchecked streams by reason"]


def test_dashboard_has_an_upstream_row_on_its_own_series() -> None:
    """The Upstream row reads only streamguard_upstream_* series; the others never do."""
    titles = [panel["title"] for panel in dashboard()["panels"]]
    row = titles.index("Upstream: what providers sent (streamguard.httpx transports)")
    exprs = panel_queries()
    upstream = [(title, expr) for title, expr in exprs if title.startswith("Upstream ")]
    assert {title for title, _ in upstream} == set(titles[row + 1 :])
    for title, expr in exprs:
        metrics = set(re.findall(r"\b(streamguard_\w+)\{", expr))
        assert metrics, title
        assert all(m.startswith("streamguard_upstream_") for m in metrics) == (
            title.startswith("Upstream ")
        ), title
    ratio = dict(upstream)["Upstream unclosed ratio"]
    assert 'outcome=~"unclosed|connection_lost"' in ratio
    assert "streamguard_upstream_unchecked_streams_total" in ratio


#: The panels of failures, whose counters carry exemplars (docs/metrics.md, "Exemplars").
EXEMPLAR_PANELS = {
    "Streams by outcome",
    "Malformed ratio",
    "Unclosed ratio",
    "Violations by rule",
    "Upstream streams by outcome",
    "Upstream unclosed ratio",
    "Upstream malformed ratio",
    "Upstream violations by rule",
}
#: The counters given exemplars (``streamguard.metrics``), without their namespace.
EXEMPLAR_COUNTERS = re.compile(
    r"\bstreamguard_(?:upstream_)?(?:violations|malformed_streams|streams)_total\{"
)


def test_dashboard_shows_exemplars_on_the_failure_panels() -> None:
    """The outcome, ratio and violation panels ask for exemplars on every target (Grafana's
    ``exemplar`` query option), each target reads a counter that carries them, and no other
    panel asks."""
    asking = set()
    for panel in dashboard()["panels"]:
        targets = panel.get("targets", [])
        flags = {target.get("exemplar", False) for target in targets}
        if True in flags:
            asking.add(panel["title"])
            assert flags == {True}, panel["title"]
            for target in targets:
                assert EXEMPLAR_COUNTERS.search(target["expr"]), panel["title"]
            assert "Exemplars" in panel["description"], panel["title"]
    assert asking == EXEMPLAR_PANELS


# -- a real Prometheus scraping the example app ----------------------------------------------


def drive_example_streams(
    base_url: str, stop_event: threading.Event, transport: httpx.BaseTransport | None = None
) -> None:
    """Request every example route over and over until ``stop_event`` is set."""
    with httpx.Client(base_url=base_url, timeout=5, transport=transport) as client:
        while not stop_event.is_set():
            for path in ROUTES:
                # /crash and /never-finished cut their responses short on purpose.
                with contextlib.suppress(httpx.HTTPError):
                    client.get(path)
            stop_event.wait(0.05)


class PrometheusAPI:
    def __init__(self, base_url: str) -> None:
        self.client = httpx.Client(base_url=base_url, timeout=10)

    def get(self, path: str, **params: str) -> Any:
        response = self.client.get(path, params=params)
        response.raise_for_status()
        body = response.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.get("/api/v1/query", query=expr)
        result: list[dict[str, Any]] = data["result"]
        return result

    def query_until_data(self, expr: str, timeout: float = 15) -> list[dict[str, Any]]:
        return list(wait_for(lambda: self.query(expr), timeout, f"query {expr!r}"))

    def rules(self) -> list[dict[str, Any]]:
        return [rule for group in self.get("/api/v1/rules")["groups"] for rule in group["rules"]]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusAPI]:
    """Prometheus with alerts.yaml loaded, scraping the example app every second under load."""
    if PROMETHEUS is None:
        pytest.skip(_MISSING.format("prometheus"))
    registry = CollectorRegistry()
    example = build_app().app  # the bare example app, wrapped again below with a registry
    example.mount("/metrics", make_asgi_app(registry=registry))  # type: ignore[attr-defined]
    # Logs off: the drivers keep streaming between tests, when pytest is not capturing, and
    # a log line would land in the middle of its progress line. Only the metrics are read.
    quiet = {"enabled": False}
    app = StreamGuardMiddleware(
        example, metrics=registry, routes=dict.fromkeys(ROUTES, "sse"), logs=quiet
    )
    workdir = tmp_path_factory.mktemp("prometheus")
    stop_event = threading.Event()
    with serve(app) as app_url, contextlib.ExitStack() as cleanup:
        driver = threading.Thread(
            target=drive_example_streams, args=(app_url, stop_event), daemon=True
        )
        driver.start()
        cleanup.callback(driver.join, timeout=10)
        # The same routes read as an upstream, through the transport, into the same registry:
        # the streamguard_upstream_* series of the dashboard's Upstream row and upstream rules.
        upstream = StreamGuardTransport(
            metrics=registry, routes=dict.fromkeys(ROUTES, "sse"), logs=quiet
        )
        upstream_driver = threading.Thread(
            target=drive_example_streams, args=(app_url, stop_event, upstream), daemon=True
        )
        upstream_driver.start()
        cleanup.callback(upstream_driver.join, timeout=10)
        cleanup.callback(stop_event.set)
        port = free_port()
        config = {  # JSON is YAML
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(ALERTS)],
            "scrape_configs": [
                {
                    "job_name": JOB,
                    "metrics_path": "/metrics",  # the mount answers 307 to /metrics/, followed
                    "static_configs": [{"targets": [app_url.removeprefix("http://")]}],
                }
            ],
        }
        (workdir / "prometheus.yml").write_text(json.dumps(config))
        log = cleanup.enter_context((workdir / "prometheus.log").open("wb"))
        server = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        cleanup.callback(stop, server)
        api = PrometheusAPI(f"http://127.0.0.1:{port}")
        cleanup.callback(api.client.close)

        def ready() -> bool:
            if server.poll() is not None:
                pytest.fail(f"prometheus exited: {(workdir / 'prometheus.log').read_text()}")
            try:
                return api.client.get("/-/ready").status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, 30, "prometheus /-/ready")
        # Two scrapes make a rate; the recorded ratio shows the rules ran on them too.
        api.query_until_data(
            'job_route_protocol:streamguard_streams_unclosed:ratio_rate10m{route="/healthy"}',
            timeout=30,
        )
        yield api


@pytest.mark.slow
@needs_prometheus
def test_every_dashboard_query_returns_data(prometheus: PrometheusAPI) -> None:
    """Every dashboard panel query, with "All" selected, returns series from the example app."""
    queries = panel_queries()
    assert len(queries) >= 10
    for title, expr in queries:
        result = prometheus.query_until_data(expr)
        assert result, f"{title}: {expr}"


@pytest.mark.slow
@needs_prometheus
def test_dashboard_variables_list_the_example_routes(prometheus: PrometheusAPI) -> None:
    """The dashboard's job, route and protocol variable queries list the scraped values."""
    pattern = re.compile(r"label_values\((?P<selector>.*),\s*(?P<label>\w+)\)$")
    found = {}
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = pattern.match(variable["definition"])
        assert match, variable["definition"]
        selector = match["selector"]
        for name, value in TEMPLATE_VALUES.items():
            selector = selector.replace(name, value)
        found[match["label"]] = set(
            prometheus.get(f"/api/v1/label/{match['label']}/values", **{"match[]": selector})
        )
    assert found == {"job": {JOB}, "route": set(ROUTES), "protocol": {"sse"}}


@pytest.mark.slow
@needs_prometheus
def test_rules_load_in_prometheus_with_runbooks(prometheus: PrometheusAPI) -> None:
    """Prometheus loads every rule healthy; each alert has a severity and a runbook section."""
    rules = prometheus.rules()
    assert {rule["type"] for rule in rules} == {"recording", "alerting"}
    runbooks = RUNBOOKS.read_text()
    for rule in rules:
        assert rule["health"] in {"ok", "unknown"}, rule  # unknown: not evaluated yet
        if rule["type"] != "alerting":
            continue
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        annotations = rule["annotations"]
        assert annotations["summary"].endswith("."), rule["name"]
        assert annotations["description"]
        anchor = rule["name"].lower()
        assert annotations["runbook_url"] == f"docs/alerts.md#{anchor}"
        assert f"\n## {rule['name']}\n" in runbooks, f"no runbook section for {rule['name']}"


@pytest.mark.slow
@needs_prometheus
def test_every_alert_expression_returns_data(prometheus: PrometheusAPI) -> None:
    """Each recording rule and each alert expression without its thresholds returns series."""
    rules = prometheus.rules()
    alerts = [rule for rule in rules if rule["type"] == "alerting"]
    assert len(alerts) >= 3
    for rule in rules:
        expr = rule["query"]
        if rule["type"] == "alerting":
            expr, removed = THRESHOLD.subn("", expr)
            assert removed, f"{rule['name']}: no threshold found in {rule['query']!r}"
        assert prometheus.query_until_data(expr), f"{rule['name']}: {expr}"


@pytest.mark.slow
@needs_prometheus
def test_ratios_single_out_the_broken_routes(prometheus: PrometheusAPI) -> None:
    """The recorded unclosed and malformed ratios are 1 on the broken routes and 0 on /healthy."""

    def ratios(name: str, *routes: str) -> dict[str, float]:
        # ">= 0" drops NaN: a route none of whose streams ended yet has no ratio (0/0).
        query = f"job_route_protocol:streamguard_{name} >= 0"

        def numbers() -> dict[str, float] | None:
            found = {s["metric"]["route"]: float(s["value"][1]) for s in prometheus.query(query)}
            return found if set(routes) <= set(found) else None

        result: dict[str, float] = wait_for(numbers, 30, f"{name} of {routes}")
        return result

    unclosed = ratios("streams_unclosed:ratio_rate10m", "/never-finished", "/healthy", "/cut-frame")
    upstream = ratios("upstream_streams_unclosed:ratio_rate10m", "/crash", "/healthy")
    malformed = ratios(
        "streams_malformed:ratio_rate10m", "/cut-frame", "/invalid-utf8", "/healthy", "/keepalive"
    )
    assert unclosed["/never-finished"] == 1
    assert unclosed["/healthy"] == 0
    assert unclosed["/cut-frame"] == 0
    assert malformed["/cut-frame"] == 1
    assert malformed["/invalid-utf8"] == 1
    assert malformed["/healthy"] == 0
    assert malformed["/keepalive"] == 0
    # Read through the transport, a crash mid-body is the connection lost: never finished.
    assert upstream["/crash"] == 1
    assert upstream["/healthy"] == 0


# -- multiprocess: two uvicorn workers, one /metrics ------------------------------------------


def metric_sum(exposition: str, sample_name: str, **labels: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == sample_name
        and all(sample.labels.get(key) == value for key, value in labels.items())
    )


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[str]:
    """examples/multiprocess_app.py under `uvicorn --workers 2` with a fresh multiproc dir."""
    multiproc_dir = tmp_path / "multiproc"
    multiproc_dir.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(multiproc_dir)}
    env.pop("prometheus_multiproc_dir", None)
    port = free_port()
    log = (tmp_path / "uvicorn.log").open("wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "examples.multiprocess_app:app",
            "--workers=2",
            "--host=127.0.0.1",
            f"--port={port}",
            "--log-level=warning",
            "--no-access-log",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            if server.poll() is not None:
                pytest.fail(f"uvicorn exited: {(tmp_path / 'uvicorn.log').read_text()}")
            try:
                return httpx.get(f"{base_url}/metrics", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, 30, "uvicorn --workers 2 serving /metrics")
        yield base_url
    finally:
        stop(server)
        log.close()


@pytest.mark.slow  # two uvicorn worker processes
def test_two_uvicorn_workers_add_up_in_one_scrape(two_workers: str) -> None:
    """Streams served by two uvicorn workers add up in one scrape of the multiprocess /metrics."""

    def one_stream(_: int) -> str:
        # A new connection per request, so the kernel can hand it to either worker.
        response = httpx.get(f"{two_workers}/healthy", headers={"connection": "close"}, timeout=10)
        assert response.status_code == 200
        assert response.text.count("data: token") == 5
        return response.headers["x-streamguard-worker"]

    workers: set[str] = set()
    streams = 0
    with ThreadPoolExecutor(max_workers=8) as pool:
        while len(workers) < 2 and streams < 400:
            workers.update(pool.map(one_stream, range(16)))
            streams += 16
    assert len(workers) == 2, "every stream went to the same worker"

    exposition = httpx.get(f"{two_workers}/metrics", follow_redirects=True, timeout=10).text
    assert metric_sum(exposition, "streamguard_streams_started_total") == streams

    def settled() -> bool:  # the end of a stream is counted just after its last byte is sent
        text = httpx.get(f"{two_workers}/metrics/", timeout=10).text
        completed = metric_sum(text, "streamguard_streams_total", outcome="completed")
        return completed == streams and metric_sum(text, "streamguard_streams_in_progress") == 0

    wait_for(settled, 10, "every stream completed and none in progress (livesum)")


@pytest.mark.slow  # two uvicorn worker processes
def test_two_workers_count_traced_failures_without_exemplars(two_workers: str) -> None:
    """Multiprocess mode keeps no exemplars: a broken stream sent with a ``traceparent`` is
    counted as any, and the OpenMetrics scrape of the summed values parses and holds none."""
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    traceparent = f"00-{trace_id}-00f067aa0ba902b7-01"
    for _ in range(4):  # a new connection each, so both workers may serve one
        response = httpx.get(
            f"{two_workers}/invalid-utf8",
            headers={"traceparent": traceparent, "connection": "close"},
            timeout=10,
        )
        assert response.status_code == 200
    openmetrics = {"accept": "application/openmetrics-text; version=1.0.0"}

    def counted() -> str | None:
        text = httpx.get(f"{two_workers}/metrics", headers=openmetrics, timeout=10).text
        violations = [
            sample
            for family in openmetrics_families(text)
            for sample in family.samples
            if sample.name == "streamguard_violations_total"
            and sample.labels.get("route") == "/invalid-utf8"
            and sample.value > 0
        ]
        if sum(sample.value for sample in violations) < 4:
            return None
        assert all(sample.exemplar is None for sample in violations)
        return text

    text = wait_for(counted, 10, "the four traced violations in the multiprocess scrape")
    assert trace_id not in text
