"""Reading an HTTP response body within a size limit that holds for the inflated bytes.

httpx's own decoding (``Response.aiter_bytes``) inflates a whole network chunk before a caller can
count it: one 64 KiB chunk of a gzip bomb is ~64 MiB. Here the raw bytes come from
``Response.aiter_raw`` (httpx's documented stream without content decoding) and are inflated with
``zlib`` in steps of at most ``STEP`` bytes of output, each counted against the limit as it comes
out, so memory stays within the limit plus one step whatever the compression ratio. The raw
(compressed) bytes count against the limit too.

Content codings decoded: ``gzip`` (``x-gzip``) and ``deflate`` (zlib-wrapped, or raw as some
servers send it), in the order the ``Content-Encoding`` header lists them, and ``identity``.
Requests say so (``Accept-Encoding: gzip, deflate``); a body in another coding is kept as it
arrived, as httpx would, and is just not JSON.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Final

import httpx

ACCEPT_ENCODING: Final = "gzip, deflate"
STEP: Final = 64 * 1024
"""The most output one inflating step may produce."""


class BodyUndecodable(Exception):
    """The body is not valid in the coding its ``Content-Encoding`` names."""


class TooLarge(Exception):
    pass


class _Inflater:
    """One content coding, inflated in bounded steps."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._raw_fallback = coding == "deflate"
        wbits = zlib.MAX_WBITS | 16 if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._inflate = zlib.decompressobj(wbits)
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The output of ``data``, at most ``STEP`` bytes at a time."""
        if not self._started and self._raw_fallback and data:
            self._started = True
            try:
                first = self._inflate.decompress(data, STEP)
            except zlib.error:  # "deflate" sent as a raw stream, without the zlib header
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            else:
                yield first
                data = self._inflate.unconsumed_tail
        self._started = True
        while data:
            try:
                piece = self._inflate.decompress(data, STEP)
            except zlib.error as exc:
                raise BodyUndecodable(self.coding) from exc
            data = self._inflate.unconsumed_tail
            yield piece

    def finish(self) -> Iterator[bytes]:
        try:
            rest = self._inflate.flush(STEP)
        except zlib.error as exc:
            raise BodyUndecodable(self.coding) from exc
        if rest:
            yield rest


def _inflaters(response: httpx.Response) -> list[_Inflater]:
    codings = [
        part.strip().lower() for part in response.headers.get("Content-Encoding", "").split(",")
    ]
    known = [c for c in codings if c in ("gzip", "x-gzip", "deflate")]
    if len(known) != len([c for c in codings if c and c != "identity"]):
        return []  # a coding we do not decode: the body stays as it arrived
    # The header lists codings in the order they were applied: undo them last first.
    return [_Inflater(coding) for coding in reversed(known)]


def _through(stages: list[_Inflater], data: bytes, final: bool) -> Iterator[bytes]:
    """``data`` through every stage, each piece of output bounded by ``STEP``."""
    if not stages:
        if data:
            yield data
        return
    first, rest = stages[0], stages[1:]
    for piece in first.finish() if final else first.feed(data):
        yield from _through(rest, piece, False)
    if final and rest:
        yield from _through(rest, b"", True)


async def read_limited(response: httpx.Response, limit: int) -> bytes | None:
    """The body, inflated, or ``None`` as soon as it is known to be over ``limit`` bytes."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    stages = _inflaters(response)
    chunks: list[bytes] = []
    size = raw = 0

    def take(pieces: Iterator[bytes]) -> None:
        nonlocal size
        for piece in pieces:
            size += len(piece)
            if size > limit:
                raise TooLarge
            chunks.append(piece)

    try:
        async for data in response.aiter_raw():
            raw += len(data)
            if raw > limit:
                return None
            take(_through(stages, data, False))
        take(_through(stages, b"", True))
    except TooLarge:
        return None
    return b"".join(chunks)
