"""A real three-node Redis Cluster on 127.0.0.1 for the tests of the three
languages, and the slot migration they run under load.

Started the way the Redis Cluster tutorial does it (redis.io, "Scale with
Redis Cluster"): three `redis-server --cluster-enabled yes` on free ports,
then `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes`.
A slot moves as `redis-cli --cluster reshard` moves it (redis.io, CLUSTER
SETSLOT): IMPORTING on the target, MIGRATING on the source, MIGRATE key by
key, then SETSLOT NODE on both.

As a module: `with RedisCluster() as c: c.url(...)`. As a program (for the
Rust and Node tests): `python3 tests/store/redis_cluster.py` prints one JSON
line `{"ports": [..]}` when the cluster is ready, then reads commands from
stdin, one per line, answering each with one JSON line:
  `begin <slot>,<slot>..`  start moving these slots to the next node
                           (IMPORTING/MIGRATING), moving half of their keys
  `begin-all`              the same for every slot that holds a key
  `finish`                 move the remaining keys and assign the slots
  `slots <key>,<key>..`    the slot of each Redis key
It stops the servers when stdin closes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Tuple


def _free_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port > 55535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


def _cli(port: int, *args: str) -> str:
    out = subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout


class RedisCluster:
    """Three primaries, no replicas; every slot covered."""

    def __init__(self, persist: bool = False) -> None:
        #: persist: an append-only file fsynced at every write (as
        #: python/tests/redis_server.py), so `kill` then `restart` brings back
        #: what the nodes acknowledged, and nodes.conf their slots.
        self.persist = persist
        self.dir = tempfile.mkdtemp(prefix="ar-cluster-")
        self.ports: List[int] = []
        self.procs: List[subprocess.Popen[bytes]] = []
        self._moving: List[Tuple[int, int, int]] = []  # (slot, source port, target port)
        self._ids: Dict[int, str] = {}

    def __enter__(self) -> "RedisCluster":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
            raise RuntimeError(
                "redis-server or redis-cli is not installed; apt-get install -y redis-server (scripts/test-all.sh does)"
            )
        for _ in range(3):
            port = _free_port()
            os.makedirs(os.path.join(self.dir, str(port)))
            self.ports.append(port)
            self.procs.append(self._node(port))
        for port in self.ports:
            self._wait(port, lambda out: out.strip() == "PONG", "PING")
        subprocess.run(
            ["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in self.ports],
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )
        self._ready()

    def _node(self, port: int) -> "subprocess.Popen[bytes]":
        d = os.path.join(self.dir, str(port))
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.persist else ["--appendonly", "no"]
        return subprocess.Popen(
            [
                "redis-server", "--port", str(port), "--bind", "127.0.0.1",
                "--cluster-enabled", "yes", "--cluster-config-file", os.path.join(d, "nodes.conf"),
                "--dir", d, "--save", "", *aof,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def _ready(self) -> None:
        # Readiness: every node says the cluster is ok and knows all three.
        for port in self.ports:
            self._wait(port, lambda out: "cluster_state:ok" in out and "cluster_known_nodes:3" in out,
                       "CLUSTER", "INFO")

    def kill(self) -> None:
        """SIGKILL every node (their files stay)."""
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()

    def restart(self) -> None:
        """Start every node again on its port, from its files (nodes.conf and,
        with `persist`, the append-only file), and wait until the cluster is ok."""
        self.procs = [self._node(port) for port in self.ports]
        for port in self.ports:
            self._wait(port, lambda out: out.strip() == "PONG", "PING")
        self._ready()

    def _wait(self, port: int, ok: "object", *cmd: str) -> None:
        import time

        deadline = time.monotonic() + 20
        while True:
            try:
                if ok(_cli(port, *cmd)):  # type: ignore[operator]
                    return
            except subprocess.CalledProcessError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {port} not ready: {' '.join(cmd)}")
            time.sleep(0.05)

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, query: str = "") -> str:
        """`redis+cluster://127.0.0.1:p1,127.0.0.1:p2` (two of the three seeds) plus `query`."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:2]) + query

    def node_id(self, port: int) -> str:
        if port not in self._ids:
            self._ids[port] = _cli(port, "CLUSTER", "MYID").strip()
        return self._ids[port]

    def owners(self) -> Dict[int, int]:
        """slot -> the port of the primary that owns it (CLUSTER SLOTS)."""
        out: Dict[int, int] = {}
        for start, end, node, *_ in json.loads(_cli(self.ports[0], "--json", "CLUSTER", "SLOTS")):
            for slot in range(start, end + 1):
                out[slot] = int(node[1])
        return out

    def slot(self, key: str) -> int:
        return int(_cli(self.ports[0], "CLUSTER", "KEYSLOT", key).strip())

    def keys_by_slot(self) -> Dict[int, List[str]]:
        """Every key of the cluster by slot (SCAN on each node, then KEYSLOT)."""
        out: Dict[int, List[str]] = {}
        for port in self.ports:
            keys = [k for k in _cli(port, "--scan").splitlines() if k]
            lines = _batch(port, [["CLUSTER", "KEYSLOT", k] for k in keys])
            for k, line in zip(keys, lines):
                out.setdefault(int(line.split()[-1]), []).append(k)
        return out

    def begin(self, slots: Optional[List[int]] = None) -> Dict[str, int]:
        """Starts moving each slot (default: every slot that holds a key) to
        the first node: IMPORTING, MIGRATING, then MIGRATE half of its keys,
        so the slot's keys are split over two nodes. Returns how many moved."""
        by_slot = self.keys_by_slot()
        owners = self.owners()
        chosen = sorted(by_slot) if slots is None else slots
        plan = []
        # Every moved slot goes to one node (the first), so only that node takes
        # slots and bumps its config epoch: no two nodes race to claim.
        dst = self.ports[0]
        for slot in chosen:
            src = owners[slot]
            if src != dst:
                plan.append((slot, src, dst))
        for port in self.ports:
            cmds = [["CLUSTER", "SETSLOT", str(sl), "IMPORTING", self.node_id(src)]
                    for sl, src, dst in plan if dst == port]
            _batch(port, cmds)
        for port in self.ports:
            cmds = [["CLUSTER", "SETSLOT", str(sl), "MIGRATING", self.node_id(dst)]
                    for sl, src, dst in plan if src == port]
            _batch(port, cmds)
        moved = 0
        for port in self.ports:
            cmds = []
            for sl, src, dst in plan:
                keys = by_slot.get(sl, [])
                half = keys[: len(keys) // 2]
                if src == port and half:
                    cmds.append(["MIGRATE", "127.0.0.1", str(dst), "", "0", "5000", "KEYS", *half])
                    moved += len(half)
            _batch(port, cmds)
        self._moving.extend(plan)
        return {"slots": len(plan), "moved": moved}

    def finish(self) -> Dict[str, int]:
        """Moves the remaining keys and gives each slot to its new node."""
        moved = 0
        for port in self.ports:
            mine = [(sl, dst) for sl, src, dst in self._moving if src == port]
            counts = _batch(port, [["CLUSTER", "COUNTKEYSINSLOT", str(sl)] for sl, _ in mine])
            for (sl, dst), n in zip(mine, counts):
                if int(n) > 0:
                    keys = [k for k in _cli(port, "CLUSTER", "GETKEYSINSLOT", str(sl), n).splitlines() if k]
                    _cli(port, "MIGRATE", "127.0.0.1", str(dst), "", "0", "5000", "KEYS", *keys)
                    moved += len(keys)
        for port in self.ports:
            _batch(port, [["CLUSTER", "SETSLOT", str(sl), "NODE", self.node_id(dst)]
                          for sl, src, dst in self._moving])
        self._moving = []
        return {"moved": moved}


def _batch(port: int, cmds: List[List[str]]) -> List[str]:
    """Runs commands through one redis-cli; one output line per command
    (commands whose replies are single values)."""
    if not cmds:
        return []
    text = "".join(" ".join(json.dumps(a) for a in c) + "\n" for c in cmds)
    out = subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(port)],
        input=text, check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    lines = out.splitlines()
    bad = [line for line in lines if line.startswith("ERR") or "(error)" in line]
    if bad or len(lines) != len(cmds):
        raise RuntimeError(f"redis-cli on port {port}: {len(cmds)} commands gave {lines[:5]}")
    return lines


def main() -> int:
    cluster = RedisCluster()
    try:
        cluster.start()
        print(json.dumps({"ports": cluster.ports}), flush=True)
        for line in sys.stdin:
            cmd, _, arg = line.strip().partition(" ")
            answer: Optional[object]
            if cmd == "begin-all":
                answer = cluster.begin()
            elif cmd == "begin":
                answer = cluster.begin([int(s) for s in arg.split(",") if s])
            elif cmd == "finish":
                answer = cluster.finish()
            elif cmd == "slots":
                answer = [cluster.slot(k) for k in arg.split(",") if k]
            else:
                answer = {"error": f"unknown command {cmd!r}; use begin, finish or slots"}
            print(json.dumps(answer), flush=True)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
