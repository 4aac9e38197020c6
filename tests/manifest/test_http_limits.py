"""The HTTP executor's bounds against hostile upstreams on loopback: an overall deadline that a
trickling upstream cannot stretch, a size limit that holds for inflated bytes (gzip and deflate
bombs are refused with memory near the limit, measured with tracemalloc), and redirects that are
never followed, to another host or the same one."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from signoff import ExecutionStatus, RetryDisposition
from signoff.executors.http.executor import DEFAULT_DEADLINE
from signoff.executors.http.response import DEFAULT_MAX_BYTES
from signoff.manifest import HttpExecutor, load_manifests
from signoff.manifest.errors import ProblemCode
from tests.loopback import Loopback, Reply, Route, serving
from tests.manifest.support import edited, only_problem, write
from tests.manifest.test_http_executor import context

BOMB_INFLATED = 256 * 1024 * 1024  # 256 MiB of zeros: ~250 KiB compressed
# The most a read of a bombed body may allocate beyond the limit it enforces: the kept body (the
# limit), one inflating step, one network chunk and httpx's own buffers. The old reader inflated a
# whole 64 KiB network chunk at once: ~64 MiB.
SLACK = 3 * 1024 * 1024


def _compressed(wbits: int, inflated: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = bytes(1024 * 1024)
    parts = [packer.compress(block) for _ in range(inflated // len(block))]
    return b"".join([*parts, packer.flush()])


GZIP = zlib.MAX_WBITS | 16
ZLIB = zlib.MAX_WBITS
RAW_DEFLATE = -zlib.MAX_WBITS
BOMBS = {
    "gzip": ("gzip", _compressed(GZIP, BOMB_INFLATED)),
    "deflate": ("deflate", _compressed(ZLIB, BOMB_INFLATED)),
    "raw deflate": ("deflate", _compressed(RAW_DEFLATE, BOMB_INFLATED)),
}


def _packed(wbits: int, data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


def _encoded(body: bytes, coding: str, status: int = 200) -> Route:
    return lambda _: Reply(status, body, headers={"Content-Encoding": coding})


@pytest.fixture
def bombs() -> Iterator[Loopback]:
    routes = {
        name.replace(" ", "-"): _encoded(body, coding) for name, (coding, body) in BOMBS.items()
    }
    document = json.dumps({"state": "done", "pad": "x" * 1000}).encode()
    routes["gz-json"] = _encoded(_packed(GZIP, document), "gzip")
    routes["zlib-json"] = _encoded(_packed(ZLIB, document), "deflate")
    routes["just-over"] = _encoded(_packed(GZIP, b" " * (DEFAULT_MAX_BYTES + 1)), "gzip")
    with serving(routes) as loopback:
        yield loopback


@pytest.mark.parametrize("bomb", list(BOMBS))
async def test_a_compression_bomb_is_refused_with_memory_near_the_limit(
    bombs: Loopback, bomb: str
) -> None:
    executor = HttpExecutor(url=f"{bombs.base}/erp/{bomb.replace(' ', '-')}")
    await executor.send(context())  # warm up: imports, the connection machinery
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        result = await executor.send(context())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (result.code, result.retry) == (
        "HTTP_RESPONSE_TOO_LARGE",
        RetryDisposition.MANUAL_REVIEW,
    )
    grown = peak - before
    assert grown < DEFAULT_MAX_BYTES + SLACK, f"reading the bomb allocated {grown / 2**20:.1f} MiB"


@pytest.mark.parametrize("route", ["gz-json", "zlib-json"])
async def test_a_compressed_json_body_within_the_limit_is_read_whole(
    bombs: Loopback, route: str
) -> None:
    result = await HttpExecutor(url=f"{bombs.base}/erp/{route}").send(context())
    assert result.status is ExecutionStatus.SUCCEEDED
    assert result.output is not None and result.output["state"] == "done"
    assert bombs.seen[-1].headers["Accept-Encoding"] == "gzip, deflate"


async def test_one_inflated_byte_over_the_limit_is_too_large(bombs: Loopback) -> None:
    result = await HttpExecutor(url=f"{bombs.base}/erp/just-over").send(context())
    assert result.code == "HTTP_RESPONSE_TOO_LARGE"


class Trickle:
    """An upstream that answers 200 at once, then sends its 100-byte body one byte per 50 ms
    (5 s in all): no phase ever waits long, so only an overall deadline stops it."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.finished = asyncio.Event()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n")
            for _ in range(100):
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(0.05)  # the upstream's pace, not a wait of the test
            self.finished.set()
        except ConnectionError:
            pass  # the client gave up
        finally:
            writer.close()

    async def url(self) -> str:
        self.server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/erp/slow"


@pytest.fixture
async def trickle() -> AsyncIterator[Trickle]:
    upstream = Trickle()
    yield upstream
    if upstream.server is not None:
        upstream.server.close()
        await upstream.server.wait_closed()


async def test_a_trickling_upstream_is_cut_off_at_the_overall_deadline(trickle: Trickle) -> None:
    executor = HttpExecutor(url=await trickle.url(), timeout=10.0, deadline=0.5)
    result = await executor.send(context())
    assert (result.status, result.code) == (ExecutionStatus.FAILED, "HTTP_TIMEOUT")
    assert result.possibly_applied  # the request arrived: it may have had its effect
    assert not trickle.finished.is_set()


MANIFEST = """\
apiVersion: signoff/v1
kind: Action
metadata: {id: erp.post, title: Post}
spec:
  effect: write
  risk: low
  input: {type: object}
  approval: {when: "false"}
  executor:
    http: {url: "http://127.0.0.1:9/post"}
"""


def _executor(tmp_path: Path, text: str) -> HttpExecutor:
    write(tmp_path, "erp.yaml", text)
    (action,) = load_manifests(tmp_path, environ={}).actions
    executor = action.compiled.definition.executor
    assert isinstance(executor, HttpExecutor)
    return executor


def test_an_http_executor_has_an_overall_deadline_by_default(tmp_path: Path) -> None:
    assert _executor(tmp_path, MANIFEST).deadline == DEFAULT_DEADLINE == 30.0


def test_the_deadline_is_set_in_the_manifest(tmp_path: Path) -> None:
    text = edited(
        'http: {url: "http://127.0.0.1:9/post"}',
        'http: {url: "http://127.0.0.1:9/post", deadline: 2m}',
        MANIFEST,
    )
    assert _executor(tmp_path, text).deadline == 120.0


@pytest.mark.parametrize("deadline", ["0s", "0ms", "2h", "soon"])
def test_a_deadline_that_is_not_between_0_and_1h_is_a_manifest_error(
    tmp_path: Path, deadline: str
) -> None:
    text = edited(
        'http: {url: "http://127.0.0.1:9/post"}',
        f'http: {{url: "http://127.0.0.1:9/post", deadline: {deadline}}}',
        MANIFEST,
    )
    write(tmp_path, "erp.yaml", text)
    problem = only_problem(tmp_path)
    assert problem.path == "spec.executor.http.deadline"
    assert problem.code is ProblemCode.INVALID_VALUE


def _moved(status: int, location: str) -> Route:
    return lambda _: Reply(status, b"{}", headers={"Location": location})


@pytest.fixture
def two_hosts() -> Iterator[tuple[Loopback, Loopback]]:
    with serving({}) as elsewhere:
        target = f"{elsewhere.base}/erp/ok"
        routes = {f"to-{status}": _moved(status, target) for status in (301, 302, 303, 307, 308)}
        routes["same-host"] = _moved(302, "/erp/other")
        with serving(routes) as origin:
            yield origin, elsewhere


@pytest.mark.parametrize("route", ["to-301", "to-302", "to-303", "to-307", "to-308", "same-host"])
async def test_a_redirect_is_never_followed(
    two_hosts: tuple[Loopback, Loopback], route: str
) -> None:
    origin, elsewhere = two_hosts
    result = await HttpExecutor(url=f"{origin.base}/erp/{route}").send(context())
    assert (result.code, result.retry) == ("HTTP_UNEXPECTED_STATUS", RetryDisposition.MANUAL_REVIEW)
    assert elsewhere.seen == []
    assert [seen.target for seen in origin.seen] == [f"/erp/{route}"]
