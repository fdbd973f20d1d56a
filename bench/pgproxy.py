"""A counting TCP relay in front of PostgreSQL: how many round trips does a system make?

Every byte is passed through unchanged; the client-to-server stream is parsed as the PostgreSQL
frontend protocol to count the messages after which a client waits for the server: `Q` (simple
query) and `S` (Sync, which ends an extended-protocol query). That is the same count whatever
driver a system uses (psycopg, asyncpg), so it compares peers fairly. Clients must connect with
`sslmode=disable` so the stream stays readable.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from dataclasses import dataclass, field

WAITING_MESSAGES = frozenset(b"QS")
UNTYPED_REQUEST_LENGTH = 8


@dataclass
class Counts:
    round_trips: int = 0
    messages: int = 0
    bytes_up: int = 0
    connections: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return {
                "round_trips": self.round_trips,
                "messages": self.messages,
                "bytes_up": self.bytes_up,
                "connections": self.connections,
            }


class FrontendParser:
    """Splits the client's byte stream into messages without buffering whole messages."""

    def __init__(self, counts: Counts) -> None:
        self.counts = counts
        self.started = False  # the startup packet has no type byte
        self.header = b""
        self.skip = 0  # bytes of the current message body still to pass

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        trips = messages = 0
        while view:
            if self.skip:
                step = min(self.skip, len(view))
                self.skip -= step
                view = view[step:]
                continue
            need = (5 if self.started else 4) - len(self.header)
            self.header += bytes(view[:need])
            view = view[need:]
            if len(self.header) < (5 if self.started else 4):
                break
            if self.started:
                kind, length = self.header[0], struct.unpack("!i", self.header[1:5])[0]
                messages += 1
                trips += kind in WAITING_MESSAGES
                self.skip = length - 4
            else:
                length = struct.unpack("!i", self.header)[0]
                self.skip = length - 4
                # An 8-byte untyped packet is an SSL or GSS encryption request: the real
                # startup packet (with the user name, so longer) still comes untyped after it.
                self.started = length != UNTYPED_REQUEST_LENGTH
            self.header = b""
        with self.counts.lock:
            self.counts.round_trips += trips
            self.counts.messages += messages
            self.counts.bytes_up += len(data)


class CountingProxy:
    """Runs the relay on its own thread and event loop; `port` is where clients connect."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.counts = Counts()
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pgproxy", daemon=True)
        self._server: asyncio.Server
        self._relays: set[asyncio.Future[list[object]]] = set()

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def reset(self) -> None:
        with self.counts.lock:
            self.counts.round_trips = self.counts.messages = self.counts.bytes_up = 0

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _close(self) -> None:
        self._server.close()
        for task in self._relays:
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self.counts.lock:
            self.counts.connections += 1
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        parser = FrontendParser(self.counts)
        relay = asyncio.gather(
            _pipe(reader, up_writer, parser), _pipe(up_reader, writer, None), return_exceptions=True
        )
        self._relays.add(relay)
        try:
            await relay
        except asyncio.CancelledError:
            up_writer.close()
            writer.close()
        finally:
            self._relays.discard(relay)


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, parser: FrontendParser | None
) -> None:
    try:
        while data := await reader.read(65536):
            if parser is not None:
                parser.feed(data)
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()
