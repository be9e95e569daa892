"""The Redis store on a real three-node Redis Cluster started here
(tests/store/redis_cluster.py, shared with the Rust and Node suites): the
shared store vectors, operations while every slot holding the store's keys
migrates (ASK, then MOVED) with none failing, dead-letter ids after the
cluster lost its data, and an unreachable cluster.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Iterator, List

import pytest
import redis

from agent_recovery.redis_store import RedisStore
from agent_recovery.store import StoreError, open_store

from .conftest import repo_root
from .redis_server import free_port
from .store_ops import Rebased
from .test_store import cases, run_case


def _fixture_module() -> Any:
    spec = importlib.util.spec_from_file_location("redis_cluster", repo_root() / "tests" / "store" / "redis_cluster.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    c = _fixture_module().RedisCluster()
    c.start()
    try:
        yield c
    finally:
        c.stop()


_n = iter(range(10**6))


def url(c: Any, query: str = "") -> str:
    return str(c.url(f"?prefix=py{next(_n)}&fallback=none" + (f"&{query}" if query else "")))


def test_redis_store_on_a_cluster_passes_the_shared_vectors(cluster: Any) -> None:
    failures: List[str] = []
    for case in cases():
        with RedisStore(url(cluster)) as store:
            run_case("redis cluster", Rebased(store), case, failures)  # type: ignore[arg-type]
    assert not failures, "\n".join(failures)


def test_operations_while_every_slot_migrates_none_fails(cluster: Any) -> None:
    store = RedisStore(url(cluster))
    versions: dict = {}

    def round_(r: int) -> None:
        for k in range(10):
            key = f"agent-recovery/breaker/t{k}"
            got = store.compare_and_set(key, versions.get(key), json.dumps({"r": r}), None, 1)
            assert getattr(got, "version", None), (r, key, got)
            versions[key] = got.version  # type: ignore[union-attr]
            assert store.get(key, 1).value == json.dumps({"r": r})  # type: ignore[union-attr]
            store.append(f"journal/t{k}", json.dumps({"r": r}), 1)

    round_(0)
    begun = cluster.begin()
    assert begun["slots"] >= 1, begun
    round_(1)  # MIGRATING, half the keys moved: ASK
    done = cluster.finish()
    assert done["moved"] > 0, done
    round_(2)  # moved: MOVED
    for k in range(10):
        assert [r for _, r in store.read(f"journal/t{k}", 0, 10)] == [json.dumps({"r": r}) for r in range(3)]
    assert len(store.keys("agent-recovery/breaker/", 1)) == 10
    store.close()


def test_dead_letter_ids_never_repeat_after_the_cluster_lost_its_data(cluster: Any) -> None:
    store = RedisStore(url(cluster))
    dl = "agent-recovery/dead-letter"
    before = [store.append(dl, str(i), 1) for i in range(3)]
    for port in cluster.ports:
        redis.Redis(host="127.0.0.1", port=port).flushall()
    after = store.append(dl, "3", 2)
    assert all(b < after for b in before) and after < 2**53, (before, after)
    store.close()


def test_an_unreachable_cluster_is_unavailable_or_degrades(tmp_path: Path) -> None:
    down = f"redis+cluster://127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    with pytest.raises(StoreError) as e:
        RedisStore(f"{down}?fallback=none&timeout_ms=300&connect_timeout_ms=300")
    assert e.value.kind == "unavailable" and "; " in e.value.message, e.value
    events: List[str] = []
    store = open_store(
        f"{down}?timeout_ms=300&connect_timeout_ms=300&spool={tmp_path / 'spool.sqlite'}",
        on_event=lambda t: events.append(json.loads(t)["event"]),
    )
    assert store.compare_and_set("k", None, "1", None, 5).version >= 1
    assert events == ["store_degraded"]
    store.close()
