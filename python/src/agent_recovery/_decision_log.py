"""Where the decision log's lines go (docs/decision-logs.md).

The component writes each line (one JSON object per decision) and hands it
over in a `log` effect; this module only appends the bytes and a newline to a
file, or passes the line to a callable or a `logging.Logger`. The twin of
`host/src/runtime/decision_log.rs` and `node/src/decisionlog.js`.

A line the file cannot take is counted (`failed_writes`), never raised out of
the step: the audit log does not stop the run it records.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any, Callable, Optional

from .errors import PolicyError
from .policy import Policy

#: A file is renamed to `PATH.1` before a line would take it past this size (64 MiB).
ROTATE_BYTES = 64 * 1024 * 1024

#: Where the first line a file could not take is reported (once per file sink).
_logger = logging.getLogger("agent_recovery")


def _bad(message: str) -> PolicyError:
    return PolicyError("invalid_argument", message)


class FileSink:
    """Appends lines to a file, rotating it at `ROTATE_BYTES` (thread-safe; a
    blocking write, which `step_async` makes off the event loop). A line that
    cannot be written is counted in `failed_writes` (the first one logged as a
    warning), and the run goes on."""

    def __init__(self, path: "os.PathLike[str] | str") -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._file: Any = None
        self._size = 0
        self.failed_writes = 0

    def __call__(self, line: str) -> None:
        data = line.encode("utf-8") + b"\n"
        with self._lock:
            try:
                self._append(data)
            except OSError as e:
                self._drop()
                self.failed_writes += 1
                if self.failed_writes == 1:
                    _logger.warning(
                        "agent-recovery: the decision log %s cannot be written (%s); the runs go on and "
                        "the lines it misses are counted in failed_writes; check the path and its permissions",
                        self.path,
                        e,
                    )

    def _append(self, data: bytes) -> None:
        if self._file is None:
            self._file = open(self.path, "ab")  # noqa: SIM115 - kept open, closed on rotation
            self._size = os.fstat(self._file.fileno()).st_size
        if self._size > 0 and self._size + len(data) > ROTATE_BYTES:
            self._file.close()
            self._file = None
            os.replace(self.path, self.path + ".1")
            self._file = open(self.path, "ab")  # noqa: SIM115
            self._size = 0
        self._file.write(data)
        self._file.flush()
        self._size += len(data)

    def _drop(self) -> None:
        """Closes the file after a failed write (its unwritten bytes with it): the next line opens it again."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None


class DecisionLog:
    """A runtime's decision log: the sink and the run configuration member."""

    __slots__ = ("write", "config", "_identity")

    def __init__(self, write: Callable[[str], None], config: str, identity: Callable[[], Optional[str]]) -> None:
        self.write = write
        self.config = config
        self._identity = identity

    @property
    def failed_writes(self) -> int:
        """Lines a file could not take (the runs went on without them); 0 for a callable or a Logger."""
        return self.write.failed_writes if isinstance(self.write, FileSink) else 0

    def policy(self) -> str:
        """The `policy` member of a `decision` input (with its leading comma), or ''."""
        ident = self._identity()
        return "" if ident is None else f',"policy":{ident}'


def _identity_of(decider: Any) -> Callable[[], Optional[str]]:
    from .handle import PolicyHandle

    def text(p: Any) -> Optional[str]:
        if not isinstance(p, Policy):
            return None
        return json.dumps(
            {"name": p.name, "version": p.version, "digest": f"sha256:{p.sha256}"},
            separators=(",", ":"),
            ensure_ascii=False,
        )

    if isinstance(decider, PolicyHandle):
        return lambda: text(decider.policy)
    fixed = text(decider)
    return lambda: fixed


def make(
    option: Any,
    decider: Any,
    observation: str = "full",
    max_record_bytes: Optional[int] = None,
) -> Optional[DecisionLog]:
    """The `decision_log=` option: a path, a callable taking each line, or a
    `logging.Logger` (each line logged at INFO); None: off."""
    if option is None:
        return None
    if isinstance(option, logging.Logger):
        logger = option

        def write(line: str) -> None:
            logger.info(line)

    elif isinstance(option, (str, os.PathLike)):
        write = FileSink(option)
    elif callable(option):
        write = option
    else:
        raise _bad(
            "decision_log is a file path, a callable taking each line, or a logging.Logger, "
            f"got {type(option).__name__}"
        )
    if observation not in ("full", "digest"):
        raise _bad(f'decision_log_observation is "full" or "digest", got {observation!r}')
    config: dict[str, Any] = {"observation": observation}
    if max_record_bytes is not None:
        if isinstance(max_record_bytes, bool) or not isinstance(max_record_bytes, int):
            raise _bad(f"decision_log_max_record_bytes must be an integer, got {max_record_bytes!r}")
        config["max_record_bytes"] = max_record_bytes
    return DecisionLog(write, json.dumps(config, separators=(",", ":")), _identity_of(decider))
