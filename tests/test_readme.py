"""The README's quickstart runs as written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamguard.testing import serve

README = Path(__file__).resolve().parent.parent / "README.md"


def quickstart() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    return next(block for block in blocks if "app.add_middleware" in block)


def test_quickstart_serves_a_watched_stream_and_its_metrics() -> None:
    """The quickstart app watches an OpenAI stream and exposes it on /metrics."""
    namespace: dict[str, Any] = {}
    exec(compile(quickstart(), str(README), "exec"), namespace)
    app = namespace["app"]

    from fastapi.responses import StreamingResponse

    async def frames() -> Any:
        yield b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        yield b'"choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},'
        yield b'"finish_reason":null}]}\n\n'
        yield b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        yield b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'

    @app.post("/v1/chat/completions")
    async def chat() -> StreamingResponse:
        return StreamingResponse(frames(), media_type="text/event-stream")

    with serve(app) as url:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json={}) as response:
            assert response.read().endswith(b"data: [DONE]\n\n")
        metrics = httpx.get(f"{url}/metrics/").text
    line = (
        'streamguard_streams_total{outcome="completed",protocol="openai_chat",'
        'route="/v1/chat/completions"}'
    )
    assert any(row.startswith(line) and not row.endswith(" 0.0") for row in metrics.splitlines())


@pytest.mark.slow
def test_quickstart_type_checks_strictly(tmp_path: Path) -> None:
    """The quickstart passes ``mypy --strict`` against Starlette's typed ``add_middleware``,
    and a misspelt option fails it (the middleware's options are explicit keywords)."""
    from mypy import api

    (tmp_path / "quickstart.py").write_text(quickstart())
    misspelt = quickstart().replace("routes=", "rutes=", 1)
    assert misspelt != quickstart()
    (tmp_path / "misspelt.py").write_text(misspelt)
    # mypy_path puts this checkout first, ahead of any installed streamguard.
    (tmp_path / "mypy.ini").write_text(f"[mypy]\nmypy_path = {README.parent}\n")
    stdout, stderr, _ = api.run(
        [
            "--strict",
            f"--config-file={tmp_path / 'mypy.ini'}",
            f"--cache-dir={tmp_path / 'cache'}",
            str(tmp_path / "quickstart.py"),
            str(tmp_path / "misspelt.py"),
        ]
    )
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    assert not [line for line in errors if "quickstart.py" in line], stdout + stderr
    assert any("misspelt.py" in line and '"rutes"' in line for line in errors), stdout + stderr
