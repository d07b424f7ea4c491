"""Strangers on the network against the servers lander opens: the live page (``play
--web``) and ``serve`` answer only requests for this machine's names, take writes only
from their own page, and a thousand idle sockets or a request fed a byte at a time
cannot stop a person from loading them. Every client here really connects, from this
process to the server lander started in another (a stranger's address is 127.0.0.2)."""

from __future__ import annotations

import http.client
import json
import resource
import selectors
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path

import pytest

from cli.serving.http_server import REQUEST_DEADLINE_S
from game_bridge.local_names import LocalNames
from tests.conftest import lander_server, wait_until
from tests.test_files_from_elsewhere import lander_bot, write_bot

STRANGER = "127.0.0.2"
VPN_NAME = "box.tail0000.ts.net"


def running(home: Path, *args: str) -> AbstractContextManager[tuple[int, subprocess.Popen[str]]]:
    """The server ``lander ARGS`` starts, with a VPN's name among those it answers."""
    return lander_server(home, *args, env={"LANDER_ALLOW_HOSTS": VPN_NAME})


@pytest.fixture
def page(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """The live page of a bot file, saving demos to a file that already holds one."""
    bot = write_bot(tmp_path / "b.json", lander_bot())
    demos = tmp_path / "demos.json"
    demos.write_text("the demos a person recorded yesterday")
    with running(tmp_path, "play", "--web", str(bot), "--record-demo", str(demos)) as (port, _):
        yield port, demos


def request(
    port: int, path: str = "/", host: str | None = None, method: str = "GET",
    body: bytes | None = None, headers: dict[str, str] | None = None, source: str = "127.0.0.1",
) -> tuple[int, bytes]:  # fmt: skip
    """One request over a new connection; the status and body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
    try:
        sent = {"Host": host or f"127.0.0.1:{port}", **(headers or {})}
        conn.request(method, path, body=body, headers=sent)
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def test_the_page_answers_only_requests_for_this_machines_names(
    page: tuple[int, Path],
) -> None:
    port, _ = page
    for name in ("127.0.0.1", "localhost", socket.gethostname(), VPN_NAME, "127.0.0.2"):
        assert request(port, "/bot", host=f"{name}:{port}")[0] == 200, name
    # A site's name pointed at this machine by its DNS (rebinding): refused, whatever asks.
    for path in ("/", "/bot"):
        status, body = request(port, path, host=f"attacker.example:{port}", source=STRANGER)
        assert status == 421 and b"this machine only" in body and b"LANDER_ALLOW_HOSTS" in body
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # a page polling
    conn.request("GET", "/bot")
    first = conn.getresponse()
    etag, body = first.getheader("ETag"), first.read()
    assert first.status == 200 and etag and first.getheader("Cache-Control") == "no-cache"
    conn.request("GET", "/bot", headers={"If-None-Match": etag})
    again = conn.getresponse()
    assert again.status == 304 and again.read() == b"", "the same bot is not sent again"
    conn.close()
    assert json.loads(body)["format"] == "lander-bot"
    with socket.create_connection(("127.0.0.1", port)) as raw:  # no Host at all
        raw.sendall(b"GET /bot HTTP/1.0\r\n\r\n")
        assert raw.recv(100).startswith(b"HTTP/1.1 421")


def test_a_write_from_another_origin_is_refused_and_the_file_untouched(
    page: tuple[int, Path],
) -> None:
    port, demos = page
    before = demos.read_bytes()
    demo = json.dumps([[[[0.0] * 7, [0.0] * 7], [[0.5, 0.5]]]]).encode()
    for headers in (
        {"Origin": "http://attacker.example"},
        {"Origin": f"http://localhost:{port + 1}"},  # another port is another origin
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
    ):
        status, body = request(port, "/demo", method="POST", body=demo, headers=headers)
        assert status == 403 and b"own page" in body, headers
        assert demos.read_bytes() == before
    same = {"Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"}
    assert request(port, "/demo", method="POST", body=demo, headers=same)[0] == 200
    assert json.loads(demos.read_text()) == json.loads(demo)


def _more_files(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


def _drip(port: int, stop: threading.Event, ended: dict[int, float]) -> None:
    """A request sent a byte every 0.2 s; notes when the server closed it."""
    with socket.create_connection(("127.0.0.1", port), source_address=(STRANGER, 0)) as conn:
        conn.settimeout(0.2)
        for byte in b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000:
            if stop.is_set():
                return
            try:
                conn.sendall(bytes([byte]))
                if conn.recv(1) == b"":
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        ended[port] = time.monotonic()


def test_a_thousand_idle_sockets_and_a_drip_fed_request_do_not_stop_a_page_load(
    tmp_path: Path,
) -> None:
    """Both servers at once (the page and ``serve``), each under its own siege."""
    _more_files(5000)
    bot = write_bot(tmp_path / "b.json", lander_bot())
    with (
        running(tmp_path, "play", "--web", str(bot)) as (page, _),
        running(tmp_path, "serve", "lander") as (serve, _),
        ExitStack() as stack,
    ):
        stop, drip_ended = threading.Event(), {}
        stack.callback(stop.set)
        started = time.monotonic()
        for port in (page, serve):
            threading.Thread(target=_drip, args=(port, stop, drip_ended), daemon=True).start()
        idle = []
        for port in (page, serve):
            for _ in range(1000):
                conn = socket.create_connection(("127.0.0.1", port), source_address=(STRANGER, 0))
                stack.callback(conn.close)
                idle.append(conn)
            began = time.monotonic()
            loads = [request(port, "/"), request(port, "/bot")] if port == page else [
                request(port, "/health")
            ]  # fmt: skip
            took = time.monotonic() - began
            assert all(status == 200 and body for status, body in loads), loads
            assert took < 2.0, f"a page load behind 1,000 idle sockets took {took:.2f} s"
        # Each idle socket is closed by its server: past the bound at once, the rest at the
        # deadline; the drip-fed requests at the deadline too.
        closed = _closed_within(idle, REQUEST_DEADLINE_S + 10)
        assert closed == len(idle), f"{len(idle) - closed} idle sockets still open"
        wait_until(lambda: len(drip_ended) == 2, REQUEST_DEADLINE_S + 10, "the drips closed")
        assert max(drip_ended.values()) - started < REQUEST_DEADLINE_S + 8
        assert request(page, "/bot")[0] == 200 and request(serve, "/health")[0] == 200


def _closed_within(sockets: list[socket.socket], seconds: float) -> int:
    """How many of ``sockets`` the other end closed within ``seconds``."""
    selector = selectors.DefaultSelector()
    for conn in sockets:
        conn.setblocking(False)
        selector.register(conn, selectors.EVENT_READ)
    closed, deadline = 0, time.monotonic() + seconds
    try:
        while closed < len(sockets) and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=0.5):
                conn = key.fileobj
                assert isinstance(conn, socket.socket)
                try:
                    data = conn.recv(4096)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(conn)
                    closed += 1
    finally:
        selector.close()
    return closed


def test_serve_answers_only_requests_for_this_machines_names(tmp_path: Path) -> None:
    with running(tmp_path, "serve", "lander") as (port, server):
        assert request(port, "/health")[0] == 200
        assert request(port, "/schema", host=f"{VPN_NAME}:{port}")[0] == 200
        status, body = request(port, "/schema", host=f"attacker.example:{port}", source=STRANGER)
        assert status == 421 and b"this machine only" in body
        for name, expected in (("attacker.example", b"421"), ("127.0.0.1", b"101")):
            with socket.create_connection(("127.0.0.1", port)) as raw:
                raw.sendall(
                    f"GET /ws HTTP/1.1\r\nHost: {name}:{port}\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n".encode()
                )
                assert raw.recv(100).split(b" ")[1] == expected, name  # no session elsewhere
        server.terminate()
        output = " ".join(server.communicate(timeout=30)[0].split())
    assert "this machine only; --host 0.0.0.0 serves the LAN" in output, output
    assert f"refused a request from {STRANGER}" in output, output


def test_the_names_of_this_machine_and_the_origin_of_a_write() -> None:
    names = LocalNames("127.0.0.1", environ={"LANDER_ALLOW_HOSTS": "Proxy.Example., vpn.box"})
    for host in ("localhost:6010", "127.0.0.1", "[::1]:6010", "127.0.0.9:80",
                 f"{socket.gethostname()}:1", "proxy.example", "VPN.BOX:8000"):  # fmt: skip
        assert names.allows(host), host
    for host in (None, "", "attacker.example:6010", "0.0.0.0:6010", "[::]:80", "8.8.8.8",
                 "localhost.attacker.example", "proxy.example.attacker"):  # fmt: skip
        assert not names.allows(host), host
    assert LocalNames("0.0.0.0", environ={"LANDER_ALLOW_HOSTS": "*"}).allows("any.example")
    same = names.same_origin
    assert same("127.0.0.1:6010", {"origin": "http://127.0.0.1:6010"})
    assert same("127.0.0.1:6010", {})  # curl: no Origin, no Sec-Fetch-Site
    assert same("127.0.0.1:6010", {"sec-fetch-site": "same-origin"})
    assert not same("127.0.0.1:6010", {"origin": "http://127.0.0.1:6011"})
    assert not same("127.0.0.1:6010", {"origin": "https://127.0.0.1:6010"})
    assert not same("127.0.0.1:6010", {"sec-fetch-site": "same-site"})
    assert not same(None, {"origin": "http://127.0.0.1:6010"})
