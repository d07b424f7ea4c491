"""A small HTTP/1.1 server for the live page that strangers on the network cannot stop.

One asyncio loop in a background thread serves every connection, so a thousand idle
sockets cost a thousand small objects, not a thousand threads. Each connection has a
deadline for each request to arrive whole (an idle socket, or a request fed a byte at a
time, is closed when it passes) and for each reply to be taken; the open connections are
bounded, and a new one past the bound closes the one that waited longest for its
request, so a person loading the page always gets in. Only requests for this machine's
names are answered, and writes only from the server's own origin
(:mod:`game_bridge.local_names`). Connections are kept alive between requests, so a page
polling every second costs one request, not one connection and one thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus

from game_bridge.local_names import LocalNames

MAX_CONNECTIONS = 256
"""Open connections at most; one more closes the one that waited longest for a request."""
REQUEST_DEADLINE_S = 10.0
"""Seconds a connection may take to send a request's head (from its opening, or from the
end of the last reply): an idle or drip-fed connection is closed after it."""
BODY_DEADLINE_S = 120.0
"""Seconds a request's body (a demo file) may take to arrive, and a reply to be taken."""
MAX_HEAD_BYTES = 16 * 1024


@dataclass(frozen=True)
class Request:
    """One request: the method, the path without its query, headers (names in lower case)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""


@dataclass(frozen=True)
class Reply:
    """One reply: a status, its body and the body's type; with an ``etag``, a browser may
    keep it and ask again with ``If-None-Match`` (answered ``304``, no body), else it is
    never stored."""

    status: int
    body: bytes = b""
    kind: str = "text/plain; charset=utf-8"
    etag: str | None = None


Respond = Callable[[Request], Reply]
"""What a server does with a request its guard let through."""
BodyLimit = Callable[[str, str], int]
"""The largest body a request may carry (method, path); 0 refuses a body."""


@dataclass(eq=False)
class _Connection:
    writer: asyncio.StreamWriter
    waiting_since: float = field(default_factory=time.monotonic)
    busy: bool = False  # reading a body or writing a reply: not waiting for a request


class _BadRequest(Exception):
    def __init__(self, status: HTTPStatus, why: str) -> None:
        super().__init__(why)
        self.status = status


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    """Method, path, version and headers of a request's head."""
    try:
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ")
    except ValueError:
        raise _BadRequest(HTTPStatus.BAD_REQUEST, "not an HTTP request") from None
    if not version.startswith("HTTP/1.") or not method.isalpha():
        raise _BadRequest(HTTPStatus.BAD_REQUEST, "not an HTTP/1 request")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise _BadRequest(HTTPStatus.BAD_REQUEST, "a malformed header")
        headers[name.lower()] = value.strip()
    return method, target.split("?", 1)[0], version, headers


def _head(reply: Reply, keep_alive: bool) -> bytes:
    phrase = HTTPStatus(reply.status).phrase
    lines = [f"HTTP/1.1 {reply.status} {phrase}"]
    if reply.status != HTTPStatus.NOT_MODIFIED:  # a 304 has no body, so no length
        lines += [f"Content-Type: {reply.kind}", f"Content-Length: {len(reply.body)}"]
    if reply.etag is None:
        lines.append("Cache-Control: no-store")
    else:  # kept, but asked again every time
        lines += ["Cache-Control: no-cache", f"ETag: {reply.etag}"]
    lines += [
        "X-Content-Type-Options: nosniff",
        f"Connection: {'keep-alive' if keep_alive else 'close'}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class GuardedHttpServer:
    """Serve ``respond`` on ``host:port`` from a background thread until :meth:`shutdown`.

    :param body_limit: the largest body each request may carry (the rest are refused 413).
    :raises OSError: the address cannot be bound (raised here, not in the thread).
    """

    def __init__(
        self,
        host: str,
        port: int,
        respond: Respond,
        body_limit: BodyLimit,
    ) -> None:
        self.respond = respond
        self.body_limit = body_limit
        self.names = LocalNames(host)
        self._open: set[_Connection] = set()
        self._socket = socket.create_server((host, port), backlog=512)
        self.server_address = self._socket.getsockname()[:2]
        self._loop = asyncio.new_event_loop()
        self._stopped = threading.Event()
        started = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(started,), daemon=True)
        self._thread.start()
        started.wait()

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, sock=self._socket, limit=MAX_HEAD_BYTES)
        )
        started.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            for connection in list(self._open):
                connection.writer.transport.abort()
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serving and close every connection."""
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._stopped.wait(10)

    def _make_room(self) -> None:
        """At the bound, close the connection that waited longest for its request (an
        idle or drip-fed one before one that is busy)."""
        while len(self._open) >= MAX_CONNECTIONS:
            oldest = min(self._open, key=lambda c: (c.busy, c.waiting_since))
            self._open.discard(oldest)
            oldest.writer.transport.abort()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._make_room()
        connection = _Connection(writer)
        self._open.add(connection)
        # A drain waits until a reply is all sent, so the close below never cuts one short.
        writer.transport.set_write_buffer_limits(high=0)
        try:
            while await self._one_request(reader, connection):
                connection.busy, connection.waiting_since = False, time.monotonic()
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            pass  # the client left, or its time was up
        finally:
            self._open.discard(connection)
            writer.transport.abort()

    async def _one_request(self, reader: asyncio.StreamReader, connection: _Connection) -> bool:
        """Read, answer and write one request; False when the connection is to close."""
        try:
            # asyncio.timeout, not wait_for: no task made per request (a hundred a second).
            async with asyncio.timeout(REQUEST_DEADLINE_S):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            await self._send(connection, Reply(431, b"request head too large"), False)
            return False
        connection.busy = True
        try:
            method, path, version, headers = _parse_head(head[:-4])
        except _BadRequest as exc:
            await self._send(connection, Reply(exc.status, str(exc).encode()), False)
            return False
        keep_alive = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
        reply = self._guard(method, headers)
        if reply is None:
            body, reply = await self._body(reader, method, path, headers)
            if reply is None:
                request = Request(method, path, headers, body)
                # A write (a demo checked and saved) may take a while: off the loop, so the
                # page's other requests are answered meanwhile.
                reply = (
                    self.respond(request)
                    if method in ("GET", "HEAD")
                    else await asyncio.get_running_loop().run_in_executor(
                        None, self.respond, request
                    )
                )
        keep_alive = keep_alive and reply.status < 400
        await self._send(connection, reply, keep_alive, head_only=method == "HEAD")
        return keep_alive

    def _guard(self, method: str, headers: dict[str, str]) -> Reply | None:
        """The refusal of a request for another machine's name, or of a write from another
        origin (None: let it through)."""
        host = headers.get("host")
        if not self.names.allows(host):
            return Reply(421, self.names.refusal(host).encode())
        if method not in ("GET", "HEAD") and not self.names.same_origin(host, headers):
            return Reply(403, b"refused: a write is taken only from this server's own page")
        return None

    async def _body(
        self, reader: asyncio.StreamReader, method: str, path: str, headers: dict[str, str]
    ) -> tuple[bytes, Reply | None]:
        if "transfer-encoding" in headers:
            return b"", Reply(411, b"send the body with a Content-Length")
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            return b"", Reply(400, b"Content-Length is not a number")
        if length == 0:
            return b"", None
        if not 0 < length <= self.body_limit(method, path):
            return b"", Reply(413, b"no body is taken here, or one this large")
        async with asyncio.timeout(BODY_DEADLINE_S):
            body = await reader.readexactly(length)
        return body, None

    async def _send(
        self, connection: _Connection, reply: Reply, keep_alive: bool, head_only: bool = False
    ) -> None:
        connection.busy = True
        writer = connection.writer
        writer.write(_head(reply, keep_alive))
        if not head_only and reply.status != HTTPStatus.NOT_MODIFIED:
            writer.write(reply.body)
        if writer.transport.get_write_buffer_size():  # the client has not taken it all yet
            with contextlib.suppress(ConnectionError):
                async with asyncio.timeout(BODY_DEADLINE_S):
                    await writer.drain()
