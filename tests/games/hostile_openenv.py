"""An OpenEnv server that misbehaves in one way (issue 46, finding 5), for the client's
fault tests: ``python hostile_openenv.py --port P --mode MODE``.

Modes: ``endless-schema`` (``/schema`` streams without end), ``trickle-schema`` (a byte a
second), ``nested-schema`` (JSON nested 100,000 deep), ``bignum-reward`` (steps answer a
400-digit reward), ``nested-obs`` (steps answer an observation nested 100,000 deep). Every
other answer is a valid one-field OpenEnv environment (``x``: one number; action ``a``).
"""

from __future__ import annotations

import argparse
import asyncio
import json

from websockets.asyncio.server import serve
from websockets.datastructures import Headers
from websockets.http11 import Response

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--mode", required=True)
ARGS = parser.parse_args()

SCHEMA = {
    "action": {
        "type": "object",
        "properties": {"a": {"type": "number", "minimum": -1, "maximum": 1}},
    },
    "observation": {"type": "object", "properties": {"x": {"type": "number"}}},
    "state": {"type": "object", "properties": {}},
}
DEEP = "[" * 100_000 + "]" * 100_000


def observation(reward: str = "0.0", obs: str = '{"x": 0.5}') -> str:
    return (
        '{"type": "observation", "data": {"observation": ' + obs + ', "reward": ' + reward
        + ', "done": false, "metadata": {}}}'
    )  # fmt: skip


async def session(connection) -> None:  # type: ignore[no-untyped-def]
    async for raw in connection:
        kind = json.loads(raw).get("type")
        if kind == "reset":
            await connection.send(observation())
        elif kind == "step":
            if ARGS.mode == "bignum-reward":
                await connection.send(observation(reward="9" * 400))
            elif ARGS.mode == "nested-obs":
                await connection.send(observation(obs='{"x": ' + DEEP + "}"))
            else:
                await connection.send(observation())


async def http(connection, request) -> Response | None:  # type: ignore[no-untyped-def]
    if request.path == "/ws":
        return None
    if request.path == "/schema" and ARGS.mode in ("endless-schema", "trickle-schema"):
        await misbehave(connection.transport)
    body = {"status": "healthy"} if request.path == "/health" else SCHEMA
    data = (
        DEEP.encode()
        if request.path == "/schema" and ARGS.mode == "nested-schema"
        else (json.dumps(body).encode())
    )
    headers = Headers([("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return Response(200, "OK", headers, data)


async def misbehave(transport: asyncio.Transport) -> None:
    """``/schema`` by hand, never finished: endless (as fast as it is read), or a byte a
    second."""
    transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
    transport.write(b'{"action": "')
    while not transport.is_closing():
        if ARGS.mode == "endless-schema":
            if transport.get_write_buffer_size() < 2**20:
                transport.write(b"x" * 65536)
            await asyncio.sleep(0.001)
        else:
            transport.write(b"x")
            await asyncio.sleep(1.0)


async def main() -> None:
    async with serve(session, "127.0.0.1", ARGS.port, process_request=http, max_size=2**24):
        print("listening", flush=True)
        await asyncio.Future()


asyncio.run(main())
