"""Network partitions on loopback: a TCP relay per (client group, server) that can be cut and
healed, for the chaos suite's partition scenarios.

```
 scheduler 0 ──► Link(:41001) ──► etcd member 0      cut(): every byte either way is held
             ──► Link(:41002) ──► etcd member 1             (read, not forwarded); new
             ──► Link(:41003) ──► etcd member 2             connections are accepted and held
             ──► Link(:41004) ──► Redis                heal(): what was held goes on, in order
```

What a cut looks like to the client is what a partition that drops packets looks like: requests
go unanswered until the client's own timeout fires, and a connection attempt does not fail
fast. Held bytes are delivered after the heal, in order, the way TCP retransmits them once the
path is back, so a request the client gave up on can still reach the server late: a fenced
write must be refused then, not applied. Two differences from dropped packets, neither of which
a client here can tell: a new connection completes its handshake with the relay (the relay
connects to the server only after the heal), and nothing ever times out inside the relay (a
real connection's retransmissions give up after minutes; cuts here last seconds).

`down()` stands for the server itself going away (stopped, restarted, its host rebooted) rather
than the path to it: every relayed connection is closed and every new one is closed at once, so
a client sees its connections reset and its connection attempts fail fast, until `heal()`.

A cut is symmetric and per link: the relays of one client process stand for its links, so
cutting them isolates that process from one server (or all) while the others still reach it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
CHUNK = 65536


class Network:
    """An event loop in a thread of its own that runs every `Link` made by `link()`."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="netfault")
        self._thread.start()
        self._links: list[Link] = []

    def link(self, host: str, port: int) -> Link:
        """A relay on a free loopback port to `host:port`, open (not cut)."""
        link = Link(self, host, port)
        self.call(link.listen())
        self._links.append(link)
        return link

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the network's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    def close(self) -> None:
        self.call(self._shut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _shut(self) -> None:
        """Close every link and end every relay before the loop stops. A transport's close only
        schedules its socket's release on the loop; a loop stopped first leaves the transport
        "closing" for the garbage collector, which then warns of it in some later test."""
        for link in self._links:
            await link.close()
        relays = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for relay in relays:
            relay.cancel()
        await asyncio.gather(*relays, return_exceptions=True)
        await asyncio.sleep(0)  # one turn of the loop: the releases the relays' ends scheduled


class Link:
    """One relay: clients connect to `port`; each connection is relayed to the server."""

    def __init__(self, network: Network, host: str, port: int) -> None:
        self._network = network
        self.target = (host, port)
        self.port = 0
        self._open: asyncio.Event | None = None
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._down = False

    @property
    def cut_now(self) -> bool:
        return self._open is not None and not self._open.is_set()

    def url(self, scheme: str) -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    def cut(self) -> None:
        """From now on nothing passes either way, until `heal()`."""
        self._network.call(self._set(False))

    def down(self) -> None:
        """The server is gone until `heal()`: its connections close, new ones are closed."""
        self._network.call(self._go_down())

    def heal(self) -> None:
        self._network.call(self._set(True))

    async def _go_down(self) -> None:
        self._down = True
        for writer in list(self._writers):
            writer.close()

    async def _set(self, open_: bool) -> None:
        assert self._open is not None
        self._down = False
        if open_:
            self._open.set()
        else:
            self._open.clear()

    async def listen(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        writers = list(self._writers)
        for writer in writers:
            writer.close()
        if self._open is not None:
            self._open.set()  # release pumps waiting on a cut, so they see their closed ends
        for writer in writers:
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _relay(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        assert self._open is not None
        if self._down:
            client_out.close()  # refused: the server is not there
            return
        self._writers.add(client_out)
        try:
            await self._open.wait()  # a connection made during a cut reaches the server after it
            try:
                server_in, server_out = await asyncio.open_connection(*self.target)
            except OSError:
                return  # the server is down: the client sees its connection closed
            self._writers.add(server_out)
            pumps = {
                asyncio.ensure_future(self._pump(client_in, server_out)),
                asyncio.ensure_future(self._pump(server_in, client_out)),
            }
            try:
                # Clients and servers here close a connection whole, never half: when one side
                # is done (or reset), so is the connection.
                _, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
                for pump in pending:
                    pump.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
            finally:
                self._writers.discard(server_out)
                server_out.close()
        finally:
            self._writers.discard(client_out)
            client_out.close()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        assert self._open is not None
        with contextlib.suppress(ConnectionError, OSError):
            while data := await source.read(CHUNK):
                await self._open.wait()  # held while cut: read, not forwarded
                sink.write(data)
                await sink.drain()
            await self._open.wait()
            if sink.can_write_eof():
                sink.write_eof()
