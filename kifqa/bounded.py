"""Reading an HTTP answer up to a byte limit counted in decoded bytes, for every client kifqa runs (the
SPARQL stores, the search APIs, the model servers).

httpx decompresses a body after its stream hands over the raw bytes, one network chunk at a time, and a
64 KiB gzip chunk can hold 64 MiB: a limit on the raw stream lets a small "gzip bomb" through, and even a
limit on httpx's decoded chunks comes too late. :func:`bound_body` therefore decodes the body itself, at
most :data:`STEP` bytes at a time, counts what it decoded and stops at the limit; httpx then sees the body
as unencoded. Only the encodings decoded here are asked for (:data:`ACCEPT_ENCODING`); an answer in
another one is refused.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator

import httpx

#: The ``Accept-Encoding`` of kifqa's clients: the encodings :func:`bound_body` decodes within its limit.
ACCEPT_ENCODING = "gzip, deflate"
#: Most bytes decoded from one step of the input (what decoding holds at once beside the limit).
STEP = 64 * 2**10


class ResponseTooLarge(Exception):
    """An answer longer than its byte limit: reading stopped there (retrying would read it again)."""


class _Inflate:
    """A gzip or deflate decoder whose every output piece is at most :data:`STEP` bytes."""

    def __init__(self, encoding: str) -> None:
        self._deflate = encoding == "deflate"
        # deflate is zlib-wrapped by the standard, raw in some servers (httpx tries both, as here)
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding == "gzip" else zlib.MAX_WBITS)
        self._first = True

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of ``data``, drawn as they are consumed."""
        first, self._first = self._first, False
        while True:
            try:
                piece = self._zlib.decompress(data, STEP)
            except zlib.error as e:
                if first and self._deflate:
                    self._zlib, first = zlib.decompressobj(-zlib.MAX_WBITS), False
                    continue
                raise httpx.DecodingError(f"the answer's compressed body is damaged: {e}") from e
            first = False
            if piece:
                yield piece
            data = self._zlib.unconsumed_tail
            if not data and len(piece) < STEP:  # a full piece may leave output inside zlib: draw again
                return


class _Decoded(httpx.AsyncByteStream):
    """``stream`` decoded through ``decoders`` (in the order they apply), raising
    :class:`ResponseTooLarge` once more than ``limit`` decoded bytes came out."""

    def __init__(self, stream: httpx.AsyncByteStream, decoders: list[_Inflate], limit: int, too_large: str) -> None:
        self._stream, self._decoders, self._limit, self._too_large = stream, decoders, limit, too_large

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._stream:
            for piece in _through(self._decoders, chunk):
                size += len(piece)
                if size > self._limit:
                    raise ResponseTooLarge(self._too_large)
                yield piece

    async def aclose(self) -> None:
        await self._stream.aclose()


def _through(decoders: list[_Inflate], data: bytes) -> Iterator[bytes]:
    """``data`` decoded by each of ``decoders`` in turn, piece by piece."""
    if not decoders:
        if data:
            yield data
        return
    for piece in decoders[0].feed(data):
        yield from _through(decoders[1:], piece)


def bound_body(response: httpx.Response, max_bytes: int, *, setting: str, source: str = "the answer") -> None:
    """Makes reading ``response``'s body decode it here and raise :class:`ResponseTooLarge` once it passes
    ``max_bytes`` decoded bytes (at once if its ``Content-Length`` says it will pass them); call it before
    the body is read (a response hook, or right after a streamed request opens).

    Args:
        response: An answer whose body is not read yet.
        max_bytes: The limit, in decoded bytes.
        setting: The setting that holds the limit, for the message (e.g. ``kb.max_response_bytes``).
        source: What the answer is, for the message (e.g. ``the answer from URL``, its credentials masked).
    """
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ResponseTooLarge(f"{source} is {int(declared):,} bytes, over {setting} ({max_bytes:,}); not read")
    encodings = [e.strip().lower() for e in response.headers.get_list("content-encoding", split_commas=True)]
    encodings = [e for e in encodings if e not in ("", "identity")]
    if unknown := [e for e in encodings if e not in ("gzip", "deflate")]:
        raise httpx.DecodingError(f"{source} is in content encoding {', '.join(unknown)!r}, which kifqa does "
                                  f"not read (it asks for {ACCEPT_ENCODING})")
    if isinstance(response.stream, httpx.AsyncByteStream):
        too_large = f"{source} passed {setting} ({max_bytes:,} bytes); reading stopped there"
        # Applied last, undone first; decoded here, so httpx must not decode again.
        response.stream = _Decoded(response.stream, [_Inflate(e) for e in reversed(encodings)], max_bytes,
                                   too_large)
        if "content-encoding" in response.headers:
            del response.headers["content-encoding"]
