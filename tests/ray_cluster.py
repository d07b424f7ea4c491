"""A real Ray cluster of several nodes on this machine, for tests and benchmarks.

Started as a user starts one, with ``lander cluster`` (a head) and ``lander cluster --join``
(Ray's ``ray start`` with token authentication), every node with
``--node-ip-address=127.0.0.1``, ports of its own and a private ``--temp-dir``, so it never
meets another cluster on the machine. Its token is a file in that folder: while the cluster
runs, ``RAY_AUTH_TOKEN_PATH`` names it in this process's environment (and so in every
``lander`` a test starts); :meth:`LocalRayCluster.stop` puts the variable back.
Stopping it kills only its own processes (never ``ray stop``, which would end every
Ray cluster of the user). Ray 2.60 replaces a loopback node address by the
machine's own (``ray._private.services.resolve_ip_for_localhost``), so Ray's
internal traffic uses that address; lander's own sockets stay on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import LANDER, find_free_port_block

_ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}


@dataclass
class RayNode:
    """One node: its raylet's port and process, and its Ray node id."""

    node_manager_port: int
    raylet_pid: int
    node_id: str = ""
    alive: bool = True


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        found[int(entry.name)] = (parent, cmdline)
    return found


def _descendants(roots: set[int], table: dict[int, tuple[int, str]]) -> set[int]:
    family = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, (parent, _) in table.items():
            if parent in family and pid not in family:
                family.add(pid)
                grew = True
    return family


@dataclass
class LocalRayCluster:
    """Start with :meth:`start`, add nodes with :meth:`add_node`, end with :meth:`stop`."""

    cpus_per_node: int = 2
    temp_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="lray-")))
    address: str = ""
    nodes: list[RayNode] = field(default_factory=list)
    _port: int = 0
    _token_before: str | None = None

    @property
    def token_path(self) -> Path:
        """The cluster's Ray token (``lander cluster`` makes it when the head starts)."""
        return self.temp_dir / "auth_token"

    def environment(self) -> dict[str, str]:
        """What a process needs to reach this cluster with its token."""
        return {**_ENV, "RAY_AUTH_TOKEN_PATH": str(self.token_path), "RAY_AUTH_MODE": "token"}

    def _lander_cluster(self, *args: str) -> None:
        ports = find_free_port_block(8)
        command = [
            LANDER, "cluster", "--node-ip-address", "127.0.0.1", *args, "--",
            f"--temp-dir={self.temp_dir}", f"--num-cpus={self.cpus_per_node}",
            "--object-store-memory=100000000",
            f"--node-manager-port={ports}", f"--object-manager-port={ports + 1}",
            f"--dashboard-agent-listen-port={ports + 2}", f"--dashboard-agent-grpc-port={ports + 3}",
            f"--runtime-env-agent-port={ports + 4}", f"--metrics-export-port={ports + 5}",
        ]  # fmt: skip
        if not args:  # the head
            command += [f"--ray-client-server-port={self._port + 1}", "--include-dashboard=false"]
        result = subprocess.run(
            [str(part) for part in command], env=self.environment(), capture_output=True,
            text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(
                f"lander cluster failed: {result.stdout[-1500:]}{result.stderr[-1500:]}"
            )
        raylet = self._raylet_of(ports)
        self.nodes.append(RayNode(ports, raylet))

    def _raylet_of(self, node_manager_port: int) -> int:
        for pid, (_, cmdline) in _processes().items():
            if "raylet/raylet" in cmdline and f"--node_manager_port={node_manager_port} " in (
                cmdline + " "
            ):
                return pid
        raise RuntimeError(f"no raylet with node manager port {node_manager_port}")

    def start(self) -> LocalRayCluster:
        """The head node (with CPUs, so games and trials run on it too)."""
        self._port = find_free_port_block(2)
        self._lander_cluster("--port", str(self._port))
        self.address = f"127.0.0.1:{self._port}"
        self._token_before = os.environ.get("RAY_AUTH_TOKEN_PATH")
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(self.token_path)
        self._learn_node_ids()
        return self

    def add_node(self) -> RayNode:
        """One more node joined to the head."""
        self._lander_cluster("--join", self.address)
        self._learn_node_ids()
        return self.nodes[-1]

    def _learn_node_ids(self) -> None:
        """Each node's Ray id, matched by its raylet's port (asked of the cluster)."""
        script = (
            "import json, logging, ray\n"
            f"ray.init(address={self.address!r}, logging_level=logging.ERROR, log_to_driver=False)\n"
            "print(json.dumps({n['NodeManagerPort']: n['NodeID'] for n in ray.nodes() if n['Alive']}))\n"
        )
        deadline = time.monotonic() + 60
        while True:
            result = subprocess.run(
                [sys.executable, "-c", script], env=self.environment(), capture_output=True, text=True,
                timeout=60, check=False,
            )  # fmt: skip
            ids = (
                json.loads(result.stdout.strip().splitlines()[-1]) if result.returncode == 0 else {}
            )
            unknown = [node for node in self.nodes if node.alive and not node.node_id]
            if all(str(node.node_manager_port) in ids for node in unknown):
                for node in unknown:
                    node.node_id = ids[str(node.node_manager_port)]
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"nodes did not register: {result.stdout} {result.stderr}")
            time.sleep(0.5)

    def node_of_process(self, pid: int) -> str | None:
        """The id of the node whose raylet started ``pid``'s worker (``RAY_RAYLET_PID``)."""
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return None
        for item in environ:
            if item.startswith(b"RAY_RAYLET_PID="):
                raylet = int(item.split(b"=", 1)[1])
                return next((n.node_id for n in self.nodes if n.raylet_pid == raylet), None)
        return None

    def kill_node(self, node: RayNode) -> None:
        """End one node as a crash would: its raylet and everything it started, SIGKILL."""
        node.alive = False
        family = _descendants({node.raylet_pid}, _processes())
        for pid in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """Kill every process of this cluster (found by its temp dir) and their children."""
        table = _processes()
        ours = {pid for pid, (_, cmdline) in table.items() if str(self.temp_dir) in cmdline}
        ours |= {node.raylet_pid for node in self.nodes}
        family = _descendants(ours, table) - {os.getpid()}
        for pid in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while any(Path(f"/proc/{pid}").exists() for pid in family) and time.monotonic() < deadline:
            time.sleep(0.1)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        if os.environ.get("RAY_AUTH_TOKEN_PATH") == str(self.token_path):
            if self._token_before is None:
                del os.environ["RAY_AUTH_TOKEN_PATH"]
            else:
                os.environ["RAY_AUTH_TOKEN_PATH"] = self._token_before
