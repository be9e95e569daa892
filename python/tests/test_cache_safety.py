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
