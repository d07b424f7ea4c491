"""Ray's token authentication for lander's clusters: one shared secret on every machine.

A Ray cluster runs code for whoever reaches its ports (CVE-2023-48022); with
``RAY_AUTH_MODE=token`` every request must carry the token. lander keeps the token where
Ray looks for it (``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``): outside every
checkout, so it never reaches git; each machine of the cluster holds a copy. lander
starts its nodes with it (``lander cluster``), joins as a driver with it (``--cluster``),
and refuses a cluster that asks for none, or that refuses this machine's token, in one
line each: asked of the head's GCS directly, in milliseconds, where Ray would retry for
minutes. Nothing here imports Ray; the probe uses gRPC, which Ray installs.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from game_bridge.errors import LanderError

MODE_VARIABLE = "RAY_AUTH_MODE"
PATH_VARIABLE = "RAY_AUTH_TOKEN_PATH"
TOKEN_VARIABLE = "RAY_AUTH_TOKEN"
_PROBE = "/ray.rpc.NodeInfoGcsService/GetClusterId"
"""A GCS call any client makes first; an empty request is a valid one."""


class RayTokenError(LanderError):
    """No token on this machine, or a cluster that takes none or refuses this one's."""


def token_path() -> Path:
    """Where this machine's token is (Ray's own rule, without the variable that holds it)."""
    chosen = os.environ.get(PATH_VARIABLE)
    return Path(chosen).expanduser() if chosen else Path.home() / ".ray" / "auth_token"


def ensure_token() -> bool:
    """Create this machine's token once (readable by its owner only); True when created now."""
    path = token_path()
    if os.environ.get(TOKEN_VARIABLE) or (path.is_file() and path.read_text().strip()):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secrets.token_hex(32))
    return True


def read_token() -> str:
    """This machine's token.

    :raises RayTokenError: there is none (the message says how to bring it).
    """
    given = os.environ.get(TOKEN_VARIABLE, "").strip()
    if given:
        return given
    path = token_path()
    try:
        token = path.read_text().strip()
    except OSError:
        token = ""
    if not token:
        raise RayTokenError(
            f"no Ray token on this machine ({path}): copy it from the head's machine "
            f"(scp HEAD:~/.ray/auth_token {path}), or make one with `./lander setup --cluster` "
            "on the machine that starts the head (docs/cluster.md)"
        )
    return token


def token_environment() -> dict[str, str]:
    """What a Ray process (a node, a driver) needs in its environment to use the token."""
    read_token()
    return {MODE_VARIABLE: "token"}


def _answer(address: str, metadata: tuple[tuple[str, str], ...]) -> str:
    """The GCS's status code for the probe call (``OK``, ``UNAUTHENTICATED``, ...)."""
    import grpc

    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(_PROBE)
        try:
            call(b"", timeout=10, metadata=metadata)
        except grpc.RpcError as exc:
            code = exc.code()
            return str(code.name) if code is not None else "UNKNOWN"
    return "OK"


def check_cluster_token(address: str) -> None:
    """Check that the cluster whose head is at ``address`` (``HOST:PORT``) takes only
    callers with a token, and takes this machine's.

    :raises RayTokenError: it runs without token authentication, or refuses this token.
    """
    token = read_token()
    anyone = _answer(address, ())
    if anyone == "OK":
        raise RayTokenError(
            f"the Ray cluster at {address} runs without token authentication: anyone who "
            "reaches its port can run code on its machines; stop it (ray stop) and start it "
            "again with `./lander cluster` (docs/cluster.md)"
        )
    if anyone != "UNAUTHENTICATED":
        raise RayTokenError(f"the Ray head at {address} does not answer ({anyone.lower()})")
    if _answer(address, (("authorization", f"Bearer {token}"),)) == "UNAUTHENTICATED":
        raise RayTokenError(
            f"the Ray cluster at {address} refuses this machine's Ray token ({token_path()}): "
            "copy the head's token here (docs/cluster.md)"
        )


def use_token_here() -> None:
    """Make this process's Ray calls carry the token (before ``ray.init``).

    :raises RayTokenError: there is no token on this machine.
    """
    os.environ.update(token_environment())
    if "ray._raylet" in sys.modules:  # Ray read its settings when imported: read them again
        from ray._raylet import Config  # type: ignore[attr-defined]  # as Ray does itself

        Config.initialize("")
