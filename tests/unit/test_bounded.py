"""Answers read up to a limit in decoded bytes: compressed bodies come out whole below the limit, a
compression bomb stops being decoded at it, and an encoding kifqa does not decode is refused."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator

import httpx
import pytest

from kifqa.bounded import STEP, ResponseTooLarge, bound_body

TEXT = b"".join(b'{"x": {"type": "literal", "value": "%d"}},' % i for i in range(40_000))  # ~1.6 MiB


def _deflate(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


class Streamed(httpx.AsyncByteStream):
    """``body`` in 16 KiB chunks, as a network stream hands it over (a body given whole is decoded by
    httpx when the response is made, before any hook sees it)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.body), 2**14):
            yield self.body[start:start + 2**14]


def _read(body: bytes, encoding: str | None, *, limit: int = 4 * 2**20) -> tuple[bytes, list[int]]:
    """``body`` served with ``encoding`` to a client whose hook bounds it; what the caller reads, and the
    sizes of the pieces it was read in."""
    pieces: list[int] = []

    async def fetch() -> bytes:
        headers = {"Content-Encoding": encoding} if encoding else {}
        transport = httpx.MockTransport(lambda request: httpx.Response(200, headers=headers,
                                                                                      stream=Streamed(body)))

        async def hook(response: httpx.Response) -> None:
            bound_body(response, limit, setting="test.limit")

        async with httpx.AsyncClient(transport=transport, event_hooks={"response": [hook]}) as client:
            async with client.stream("GET", "http://127.0.0.1/x") as response:
                parts = [part async for part in response.aiter_bytes()]
        pieces.extend(len(part) for part in parts)
        return b"".join(parts)

    return asyncio.run(fetch()), pieces


@pytest.mark.parametrize(("encoding", "body"), [
    (None, TEXT),
    ("identity", TEXT),
    ("gzip", gzip.compress(TEXT)),
    ("GZip", gzip.compress(TEXT)),
    ("deflate", _deflate(TEXT, zlib.MAX_WBITS)),
    ("deflate", _deflate(TEXT, -zlib.MAX_WBITS)),  # raw deflate, as some servers send it
    ("gzip, gzip", gzip.compress(gzip.compress(TEXT))),
    ("deflate, gzip", gzip.compress(_deflate(TEXT, zlib.MAX_WBITS))),
])
def test_an_answer_within_the_limit_comes_out_whole_in_pieces_of_at_most_a_step(encoding, body) -> None:
    read, pieces = _read(body, encoding)
    assert read == TEXT
    if encoding not in (None, "identity"):
        assert max(pieces) <= STEP


def test_a_compression_bomb_stops_being_decoded_at_the_limit() -> None:
    decoded = 0

    async def fetch() -> None:
        nonlocal decoded
        bomb = gzip.compress(b"0" * 64 * 2**20)  # 64 KiB that decode to 64 MiB
        transport = httpx.MockTransport(lambda request: httpx.Response(200, headers={"Content-Encoding": "gzip"},
                                                                       stream=Streamed(bomb)))
        async with httpx.AsyncClient(transport=transport) as client:
            async with client.stream("GET", "http://127.0.0.1/x") as response:
                bound_body(response, 2**20, setting="test.limit", source="the bomb")
                async for part in response.aiter_bytes():
                    decoded += len(part)

    with pytest.raises(ResponseTooLarge, match=r"the bomb passed test.limit \(1,048,576 bytes\); reading stopped"):
        asyncio.run(fetch())
    assert decoded <= 2**20


def test_an_encoding_kifqa_does_not_decode_is_refused_by_name() -> None:
    with pytest.raises(httpx.DecodingError, match=r"content encoding 'br', which kifqa does not read \(it asks for "
                                                   r"gzip, deflate\)"):
        _read(b"\x0b\x02\x80hello\x03", "br")


def test_a_damaged_compressed_body_is_a_decoding_error() -> None:
    with pytest.raises(httpx.DecodingError, match="compressed body is damaged"):
        _read(b"not gzip at all", "gzip")
