"""The compile cache directory is refused when others could write to it (its
entries are native code), and created owner-only when missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_recovery import PolicyRuntimeError
from agent_recovery._component import check_cache_dir, configured_cache_dir


def test_a_world_writable_cache_directory_is_refused(tmp_path: Path) -> None:
    for mode in (0o777, 0o770):
        d = tmp_path / f"m{mode:o}"
        d.mkdir()
        d.chmod(mode)
        with pytest.raises(PolicyRuntimeError) as info:
            check_cache_dir(d)
        assert info.value.code == "invalid-argument"
        assert f"{mode:03o}" in info.value.message and "chmod 700" in info.value.message


def test_a_missing_cache_directory_is_created_owner_only(tmp_path: Path) -> None:
    d = tmp_path / "a" / "wasmtime"
    check_cache_dir(d)
    assert d.stat().st_mode & 0o777 == 0o700
    check_cache_dir(d)  # and then accepted


def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        d = tmp_path / "other"
        d.mkdir(mode=0o700)
        os.chown(d, 65534, 65534)
    else:
        d = Path("/")
    with pytest.raises(PolicyRuntimeError, match="not by this user"):
        check_cache_dir(d)


def test_the_configured_directory_is_read_from_the_wasmtime_config(tmp_path: Path) -> None:
    config = tmp_path / "cache.toml"
    config.write_text('[cache]\nenabled = true\ndirectory = "/srv/cache"\n')
    assert configured_cache_dir(str(config)) == Path("/srv/cache")
    config.write_text("[cache]\nenabled = true\n")
    assert configured_cache_dir(str(config)) is None


_FIRST_DECISION = (
    "import warnings, json\n"
    "warnings.simplefilter('always')\n"
    "with warnings.catch_warnings(record=True) as w:\n"
    "    from agent_recovery import Policy\n"
    "    d = Policy.load().decide_json('{\"source\":\"http\",\"status\":503}', '{\"attempt\":1,\"seed\":7}')\n"
    "print(json.dumps({'action': json.loads(d)['action'], 'warnings': [str(x.message) for x in w]}))\n"
)


def _first_decision(env_extra: dict) -> dict:
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "AGENT_RECOVERY_COMPILE_CACHE"}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", _FIRST_DECISION], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_compile_cache_is_on_by_default_in_a_safe_directory(tmp_path: Path) -> None:
    # A fresh process with no setting writes compiled code to wasmtime's
    # default directory under XDG_CACHE_HOME; a second process finds it there.
    # The cache serves what is not shipped precompiled (custom policies): the
    # reference's packaged artifact is ignored so that this load compiles.
    first = _first_decision({"XDG_CACHE_HOME": str(tmp_path), "AGENT_RECOVERY_PRECOMPILED": "0"})
    assert first == {"action": "retry", "warnings": []}
    cache = tmp_path / "wasmtime"
    entries = [p for p in cache.rglob("*") if p.is_file()]
    assert entries, f"nothing cached under {cache}"
    assert cache.stat().st_mode & 0o777 == 0o700
    assert _first_decision({"XDG_CACHE_HOME": str(tmp_path), "AGENT_RECOVERY_PRECOMPILED": "0"})["action"] == "retry"


def test_an_unsafe_default_directory_means_no_cache_and_a_warning_not_a_failure(tmp_path: Path) -> None:
    cache = tmp_path / "wasmtime"
    cache.mkdir()
    os.chmod(cache, 0o777)
    got = _first_decision({"XDG_CACHE_HOME": str(tmp_path)})
    assert got["action"] == "retry"
    assert len(got["warnings"]) == 1 and "compiling without a cache" in got["warnings"][0]
    assert "writable by its group or by others" in got["warnings"][0]
    assert not any(p.is_file() for p in cache.rglob("*")), "nothing may be written to an unsafe directory"


def test_the_cache_can_be_turned_off(tmp_path: Path) -> None:
    got = _first_decision({"XDG_CACHE_HOME": str(tmp_path), "AGENT_RECOVERY_COMPILE_CACHE": "0"})
    assert got == {"action": "retry", "warnings": []}
    assert not (tmp_path / "wasmtime").exists()
