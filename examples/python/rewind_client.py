#!/usr/bin/env python3
"""A typed client for `rewind serve` (JSON-RPC 2.0 over stdio). Standard library only (3.11+).

    from rewind_client import RewindClient, RewindError

    with RewindClient("/path/to/project") as rw:          # spawns `rewind -C ... serve`
        assert rw.hello()["protocol"] == 2                 # stop on a version you do not know
        before = rw.track()["hash"]
        # ... the agent edits files ...
        for row in rw.diff_full(before):
            print(row["file"], row["status"], row["additions"], row["deletions"])
        rw.diff_full(before, paths=["src"], max_bytes=1 << 20)  # src/ only, 1 MiB of text
        try:
            rw.patch("not-an-id")
        except RewindError as e:
            print(e.code, e.data_code)                     # -32000 invalid_id

Every method returns a TypedDict (or a list of them) with the CLI's `--json` shape, and takes
`timeout_ms=` (bounds the server's wait for the store's lock: `busy` after it), `cancel=` (a
threading.Event: once set, the request is cancelled at its next safe point) and `timeout=` (the
client's own wait, in seconds). Requests carry increasing ids and responses are matched by id
(the server answers a read such as `turns` while an earlier write still waits for the lock, so
answers can come out of order), so one client can be used from several threads. Closing the
client closes the server's stdin; the server then answers what is running and exits 0.

Self-test against a real binary (used by CI):

    python3 examples/python/rewind_client.py --selftest target/debug/rewind
"""

import io
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Literal, NotRequired, TypedDict, Unpack, cast

# -- the result shapes (protocol 2) -----------------------------------------------------------

Status = Literal["added", "deleted", "modified", "renamed"]
SkipReason = Literal["too_large", "nested_repo", "special_file", "unreadable", "rewind_data", "reserved_name"]
Origin = Literal["unannounced", "announced", "shared"]


class Hello(TypedDict):
    protocol: int
    version: str
    methods: list[str]
    capabilities: list[str]


class Skipped(TypedDict):
    """A path a snapshot left out: an undo cannot bring it back."""

    path: str
    reason: SkipReason
    detail: NotRequired[str]  # the error, for `unreadable`


class Snapshot(TypedDict):
    hash: str
    files: int
    skipped: list[Skipped]


class Patch(TypedDict):
    hash: str
    files: list[str]


class DiffText(TypedDict):
    diff: str


class FileChange(TypedDict):
    file: str
    status: Status
    old_file: NotRequired[str]  # a rename's old path ("renamed" only)
    similarity: NotRequired[int]  # a rename's similarity in percent, as git's "similarity index"
    before: str
    after: str
    additions: int
    deletions: int
    binary: bool
    # present only when true: before/after left empty for size (status and counts still exact),
    # a side over 4 MiB or the row's text past max_bytes
    truncated: NotRequired[bool]
    lossy: NotRequired[bool]  # present only when true: a side is not UTF-8 (U+FFFD replaces it)


class HasChanges(TypedDict):
    hash: str
    changed: bool


class Failure(TypedDict):
    path: str
    error: str


class ConflictHunk(TypedDict):
    """Where an undo's turns and someone else's edits overlap (1-based line ranges)."""

    ours_start: int
    ours_lines: int
    base_start: int
    base_lines: int
    theirs_start: int
    theirs_lines: int


class ConflictDetail(TypedDict):
    """A file an undo left alone: whether a merge would be clean, and where edits overlap."""

    file: str
    mergeable: bool
    hunks: list[ConflictHunk]
    merges_in_part: bool  # merge takes the later turns out, an earlier one's part stays


class Unrecorded(TypedDict):
    """Why an undo or redo could not record what it did, and where that leaves its turns."""

    what: str  # "undo" or "redo"
    state: str  # where its turns stand, and what to run
    code: str  # the error's code (disk_full, say)
    message: str


class RestoreOutcome(TypedDict):
    """What restore, revert, undo and redo did."""

    hash: str  # the snapshot the files were brought back to
    written: list[str]
    deleted: list[str]
    failed: list[Failure]
    conflicts: list[str]
    in_the_way: NotRequired[list[str]]  # conflicts force cannot take: a directory (say) stands there
    unseen: NotRequired[list[str]]  # undo: conflicts at paths the turn's end could not see (ignored or left out then)
    kept: list[str]
    undo: str  # restore(undo) puts everything back as it was before (dry run: the project now)
    dry_run: NotRequired[bool]  # present (true) for a dry run: nothing was changed
    diff: NotRequired[str]  # in a dry run, the patch of each file written or deleted
    merged: NotRequired[list[str]]  # files an undo wrote with a three-way merge
    conflict_details: NotRequired[list[ConflictDetail]]  # an undo's conflicts, explained
    unrecorded: NotRequired[Unrecorded]  # files changed, but the undo's or redo's record failed


class TurnFile(TypedDict):
    file: str
    status: Status
    old_file: NotRequired[str]  # a rename's old path ("renamed" only)
    similarity: NotRequired[int]
    additions: int
    deletions: int
    binary: bool  # either side binary: no lines counted (git's numstat says "-")
    origin: Origin


class TurnStart(TypedDict):
    session: str
    turn: str
    before: str
    skipped: list[Skipped]


class TrackedFile(TypedDict):
    session: str
    turn: str
    path: str


class TurnEnd(TypedDict):
    session: str
    turn: str
    before: str
    after: str
    files: list[TurnFile]
    skipped: list[Skipped]


class Turn(TypedDict):
    session: str
    turn: str
    started_at: str  # RFC 3339
    ended_at: str | None  # None while the turn is open
    before: str
    after: str | None
    files: int
    additions: int
    deletions: int
    changed: list[TurnFile]
    rolled_back: bool
    undo_stopped: bool  # rolled back by an undo killed before it finished
    meta: dict[str, str]  # the runtime's metadata given to turn_begin


class SessionChanges(TypedDict):
    session: str
    files: list[TurnFile]
    total_files: int
    total_additions: int
    total_deletions: int


class AbandonedTurn(TypedDict):
    session: str
    turn: str
    started_at: str  # RFC 3339


class PruneOutcome(TypedDict):
    snapshots_removed: int
    turns_removed: int
    objects_removed: int
    bytes_freed: int
    sessions_removed: list[str]
    sessions_removed_for_size: list[str]  # those of sessions_removed that went for the size quota
    snapshots_removed_for_size: int  # how many of snapshots_removed went for the size quota
    abandoned_turns: list[AbandonedTurn]  # open turns removed with their sessions
    still_over_quota: NotRequired[bool]  # present (true) when the space is held by what is in use
    dry_run: NotRequired[bool]  # present (true) for a dry run: nothing removed, objects/bytes estimated


class WatchStatus(TypedDict):
    active: bool  # snapshots read only the directories that changed
    reason: NotRequired[str]  # why it is not active
    directories: int  # directories watched
    full_walks: int  # snapshots that walked everything
    partial_walks: int  # snapshots that read only the directories with events
    unchanged: int  # snapshots that found no event at all
    last_full_walk: NotRequired[str]  # why the last full walk was needed


class ServerStatus(TypedDict):
    watcher: WatchStatus  # the file-system watcher (off under `serve --no-watch`)
    notices: list[str]  # what rewind found on its own since the last status (a killed restore's leftovers)


# Every method of protocol 2 and the TypedDict of its result (of each row, for a list).
RESULTS: dict[str, type] = {
    "hello": Hello,
    "track": Snapshot,
    "patch": Patch,
    "diff": DiffText,
    "diff_full": FileChange,
    "has_changes": HasChanges,
    "restore": RestoreOutcome,
    "revert": RestoreOutcome,
    "turn_begin": TurnStart,
    "track_file": TrackedFile,
    "turn_end": TurnEnd,
    "turns": Turn,
    "undo": RestoreOutcome,
    "redo": RestoreOutcome,
    "changes": SessionChanges,
    "prune": PruneOutcome,
    "status": ServerStatus,
}
METHODS = tuple(RESULTS)


class CallOptions(TypedDict, total=False):
    """What every method takes besides its params."""

    timeout: float | None  # the client's wait for the answer, in seconds (default: the client's)
    timeout_ms: int  # the server's wait for the store's lock (RewindError `busy` after it)
    cancel: threading.Event  # once set, the server cancels the request at its next safe point


# -- errors ------------------------------------------------------------------------------------


class RewindError(Exception):
    """An `error` response: `code` is the JSON-RPC code (-32000 for a failed operation, -32800
    for a cancelled one, -32602 for bad params, -32601 for an unknown method, -32600/-32700 for a
    malformed request) and `data_code` the CLI's error code (`busy`, `cancelled`, `invalid_id`,
    `not_found`, `wrong_type`, `bad_path`, `turn_state`, `invalid_name`, ...) when there is one."""

    def __init__(self, code: int, message: str, data: object = None):
        self.code = code
        self.message = message
        self.data = data
        data_code = data.get("code") if isinstance(data, dict) else None
        self.data_code: str | None = data_code if isinstance(data_code, str) else None
        label = f"{code}" + (f" {self.data_code}" if self.data_code else "")
        super().__init__(f"rewind: {message} ({label})")


class RewindClosed(RewindError):
    """The server exited (or could not start) before answering."""

    def __init__(self, message: str):
        super().__init__(-32099, message)


class _Waiter:
    __slots__ = ("event", "response", "closed")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.response: dict[str, Any] | None = None
        self.closed: str | None = None  # why no response will come


# -- the client --------------------------------------------------------------------------------


class RewindClient:
    """One `rewind serve` process for one project."""

    def __init__(
        self,
        project: str | os.PathLike[str],
        *,
        rewind: str = "rewind",
        data_dir: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = 600.0,
    ):
        args = [rewind]
        if data_dir is not None:
            args += ["--data-dir", os.fspath(data_dir)]
        args += ["-C", os.fspath(project), "serve"]
        self.timeout = timeout
        self._proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self._ids = itertools.count(1)
        self._pending: dict[int, _Waiter] = {}
        self._lock = threading.Lock()  # guards _pending and _closed
        self._write_lock = threading.Lock()
        self._closed: str | None = None
        self._stderr: list[bytes] = []
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()

    # -- the protocol --------------------------------------------------------------------

    def call(
        self,
        method: str,
        params: dict[str, Any] | list[Any] | None = None,
        timeout: float | None = None,
        *,
        timeout_ms: int | None = None,
        cancel: threading.Event | None = None,
    ) -> object:
        """Send a request and wait for its response: the `result` (untyped: the methods below
        type it), or RewindError.

        `timeout_ms` bounds the server's wait for the store's lock (RewindError `busy` after
        it). Once `cancel` is set, the server cancels the request at its next safe point
        (RewindError -32800 `cancelled`; a call already past it answers normally). When the
        client-side `timeout` runs out, the request is cancelled too, then TimeoutError."""
        if timeout_ms is not None:
            if isinstance(params, list):
                raise TypeError("timeout_ms goes with params as an object, not a list")
            params = dict(params or {}, timeout_ms=timeout_ms)
        request_id = next(self._ids)
        waiter = _Waiter()
        with self._lock:
            if self._closed is not None:
                raise RewindClosed(self._closed)
            self._pending[request_id] = waiter
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            request["params"] = params
        try:
            self._write(request)
        except (OSError, ValueError):
            pass  # the server is gone (or stdin closed): the reader fails every pending request
        limit = self.timeout if timeout is None else timeout
        end = None if limit is None else time.monotonic() + limit
        cancel_sent = False
        while not waiter.event.is_set():
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                with self._lock:
                    self._pending.pop(request_id, None)
                self._cancel(request_id)  # so that the server does not run it later
                raise TimeoutError(f"rewind serve did not answer {method} in time")
            if cancel is not None and cancel.is_set() and not cancel_sent:
                self._cancel(request_id)
                cancel_sent = True
            watching = cancel is not None and not cancel_sent
            waiter.event.wait(0.05 if watching else left)
        if waiter.closed is not None:
            raise RewindClosed(waiter.closed)
        response = waiter.response
        assert response is not None
        error = response.get("error")
        if error is not None:
            if not isinstance(error, dict):
                raise RewindError(-32603, f"malformed error member: {error!r}")
            code, message = error.get("code"), error.get("message")
            raise RewindError(
                code if isinstance(code, int) else -32603,
                message if isinstance(message, str) else json.dumps(error),
                error.get("data"),
            )
        result: object = response.get("result")
        return result

    def _cancel(self, request_id: int) -> None:
        """Send `$/cancelRequest` for `request_id` (ignored by the server once it answered)."""
        try:
            self.notify("$/cancelRequest", {"id": request_id})
        except RewindClosed:
            pass

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification (no id): the server runs it and answers nothing."""
        request: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            request["params"] = params
        try:
            self._write(request)
        except (OSError, ValueError) as e:
            raise RewindClosed(self._closed or f"rewind serve is gone ({e})") from e

    def close(self, timeout: float | None = 60.0) -> int:
        """Close the server's stdin and wait for it to exit; returns its exit code."""
        with self._write_lock:
            if self._proc.stdin and not self._proc.stdin.closed:
                try:
                    self._proc.stdin.close()
                except OSError:
                    pass
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        self._reader.join(timeout)
        self._stderr_reader.join(timeout)
        with self._lock:
            self._closed = self._closed or "the client was closed"
        return code

    @property
    def stderr(self) -> str:
        """What the server wrote on stderr so far."""
        return b"".join(self._stderr).decode("utf-8", "replace")

    def __enter__(self) -> "RewindClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            assert self._proc.stdin is not None
            self._proc.stdin.write(line)
            self._proc.stdin.flush()

    # One parse per response line, one dict lookup per response.
    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            for response in message if isinstance(message, list) else [message]:
                request_id = response.get("id") if isinstance(response, dict) else None
                with self._lock:
                    waiter = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
                if waiter is not None:
                    waiter.response = response
                    waiter.event.set()
        # stdout ended: the server exited (or closed it). Fail whatever is still waiting.
        try:
            self._proc.wait(5)
            self._stderr_reader.join(5)
            reason = f"rewind serve exited with {self._proc.returncode}"
        except subprocess.TimeoutExpired:
            reason = "rewind serve closed its stdout"
        if self.stderr.strip():
            reason += f": {self.stderr.strip()}"
        with self._lock:
            self._closed = reason
            pending, self._pending = self._pending, {}
        for waiter in pending.values():
            waiter.closed = reason
            waiter.event.set()

    def _read_stderr(self) -> None:
        stderr = cast(io.BufferedReader, self._proc.stderr)
        for chunk in iter(lambda: stderr.read1(65536), b""):
            self._stderr.append(chunk)

    # -- the methods, typed ----------------------------------------------------------------

    def hello(self, **options: Unpack[CallOptions]) -> Hello:
        """The protocol version, the server's version, its methods and capabilities: call first."""
        return cast(Hello, self.call("hello", **options))

    def track(self, **options: Unpack[CallOptions]) -> Snapshot:
        """Snapshot the project."""
        return cast(Snapshot, self.call("track", **options))

    def patch(self, hash: str, **options: Unpack[CallOptions]) -> Patch:
        """The paths changed since snapshot `hash`."""
        return cast(Patch, self.call("patch", {"hash": hash}, **options))

    def diff(
        self, from_: str, to: str | None = None, *, no_renames: bool = False, **options: Unpack[CallOptions]
    ) -> str:
        """`git diff -M`'s unified diff text from `from_` to `to` (default: the project now);
        `no_renames`: a moved file as a deletion and an addition (`git diff --no-renames`)."""
        params = _drop_none({"from": from_, "to": to}) | _renames(no_renames)
        return cast(DiffText, self.call("diff", params, **options))["diff"]

    def diff_full(
        self,
        from_: str,
        to: str | None = None,
        *,
        paths: list[str] | None = None,
        max_bytes: int | None = None,
        no_renames: bool = False,
        **options: Unpack[CallOptions],
    ) -> list[FileChange]:
        """Per-file rows with both sides' text and `git diff -M --numstat`'s counts, from `from_`
        to `to` (default: the project now): only changes at or below `paths` (files or
        directories, project-relative), with at most `max_bytes` of before + after text in all
        (default 16 MiB; the rows after it come `truncated`, still listed and counted). A moved
        file is one "renamed" row with `old_file`; `no_renames`: a deletion and an addition."""
        params = _drop_none({"from": from_, "to": to, "paths": paths, "max_bytes": max_bytes})
        params |= _renames(no_renames)
        return cast(list[FileChange], self.call("diff_full", params, **options))

    def has_changes(self, hash: str, **options: Unpack[CallOptions]) -> bool:
        return cast(HasChanges, self.call("has_changes", {"hash": hash}, **options))["changed"]

    def restore(
        self, hash: str, force: bool = False, dry_run: bool = False, **options: Unpack[CallOptions]
    ) -> RestoreOutcome:
        """`dry_run`: change nothing, return what the restore would do (with `diff`)."""
        params: dict[str, object] = {"hash": hash, "force": force}
        if dry_run:
            params["dry_run"] = True
        return cast(RestoreOutcome, self.call("restore", params, **options))

    def revert(
        self, hash: str, paths: list[str], dry_run: bool = False, **options: Unpack[CallOptions]
    ) -> RestoreOutcome:
        params: dict[str, object] = {"hash": hash, "paths": list(paths)}
        if dry_run:
            params["dry_run"] = True
        return cast(RestoreOutcome, self.call("revert", params, **options))

    def turn_begin(
        self, session: str, turn: str, meta: dict[str, str] | None = None, **options: Unpack[CallOptions]
    ) -> TurnStart:
        """Begin a turn; `meta` (a message id, tool call ids...) is stored with it."""
        params: dict[str, object] = {"session": session, "turn": turn}
        if meta:
            params["meta"] = dict(meta)
        return cast(TurnStart, self.call("turn_begin", params, **options))

    def track_file(self, session: str, turn: str, path: str, **options: Unpack[CallOptions]) -> TrackedFile:
        """Announce a path the turn's agent is about to edit."""
        params = {"session": session, "turn": turn, "path": path}
        return cast(TrackedFile, self.call("track_file", params, **options))

    def turn_end(
        self, session: str, turn: str, *, no_renames: bool = False, **options: Unpack[CallOptions]
    ) -> TurnEnd:
        """End a turn; its files pair moves into "renamed" rows unless `no_renames`."""
        params = {"session": session, "turn": turn} | _renames(no_renames)
        return cast(TurnEnd, self.call("turn_end", params, **options))

    def turns(
        self, session: str | None = None, *, no_renames: bool = False, **options: Unpack[CallOptions]
    ) -> list[Turn]:
        params = _drop_none({"session": session}) | _renames(no_renames)
        return cast(list[Turn], self.call("turns", params, **options))

    def undo(
        self,
        session: str,
        turn: str | None = None,
        file: str | None = None,
        force: bool = False,
        last: bool = False,
        dry_run: bool = False,
        only: bool = False,
        merge: bool = False,
        **options: Unpack[CallOptions],
    ) -> RestoreOutcome:
        """Undo `turn` and the later turns (with `file`: only that path), or with `last` the most
        recent turn not undone yet (without `turn` and `file`), or with `only` `turn` alone (later
        turns kept, by three-way merges). Conflicts are left alone and listed, unless `force`;
        with `merge`, files someone else changed since are merged."""
        params = _drop_none({"session": session, "turn": turn, "file": file})
        params["force"] = force
        for key, flag in (("last", last), ("dry_run", dry_run), ("only", only), ("merge", merge)):
            if flag:
                params[key] = True
        return cast(RestoreOutcome, self.call("undo", params, **options))

    def redo(
        self, session: str, turn: str | None = None, force: bool = False, **options: Unpack[CallOptions]
    ) -> RestoreOutcome:
        """Bring back what the session's last undo (not redone yet) changed; same shape as undo."""
        params = _drop_none({"session": session, "turn": turn})
        params["force"] = force
        return cast(RestoreOutcome, self.call("redo", params, **options))

    def changes(
        self, session: str, *, no_renames: bool = False, **options: Unpack[CallOptions]
    ) -> SessionChanges:
        """Per-file totals of a session (moves as "renamed" rows unless `no_renames`)."""
        params = {"session": session} | _renames(no_renames)
        return cast(SessionChanges, self.call("changes", params, **options))

    def prune(self, dry_run: bool = False, **options: Unpack[CallOptions]) -> PruneOutcome:
        """`dry_run`: remove nothing, say what a prune would remove now."""
        return cast(PruneOutcome, self.call("prune", {"dry_run": True} if dry_run else None, **options))

    def status(self, **options: Unpack[CallOptions]) -> ServerStatus:
        """Whether the server's file-system watcher runs, and why not."""
        return cast(ServerStatus, self.call("status", None, **options))


def _drop_none(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def _renames(no_renames: bool) -> dict[str, Any]:
    """The `no_renames` param, sent only when set."""
    return {"no_renames": True} if no_renames else {}


# -- self-test --------------------------------------------------------------------------------


def selftest(rewind: str) -> int:
    """The client against a real binary: every method, each result checked against its TypedDict
    (a member the server sends that the TypedDict lacks, or a required one it does not send, is a
    failure). Prints 'python: N passed, M failed'; needs no tool but the binary."""
    import fcntl
    import tempfile
    from pathlib import Path

    passed = failed = 0

    def check(name: str, ok: bool, detail: object = "") -> None:
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {name}: {detail}", file=sys.stderr)

    def check_shape(name: str, value: object, shape: Any) -> None:
        """`value` has exactly the members the TypedDict `shape` allows, and the required ones."""
        keys = set(value) if isinstance(value, dict) else set()
        required, allowed = set(shape.__required_keys__), set(shape.__required_keys__ | shape.__optional_keys__)
        ok = isinstance(value, dict) and required <= keys <= allowed
        check(name, ok, f"{value!r}: unknown {sorted(keys - allowed)}, missing {sorted(required - keys)}")

    def check_error(name: str, call: Callable[[], object], code: int, data_code: str | None) -> None:
        try:
            result = call()
            check(name, False, f"no error: {result!r}")
        except RewindError as e:
            check(name, (e.code, e.data_code) == (code, data_code), e)

    with tempfile.TemporaryDirectory(prefix="rewind-py-") as tmp:
        root = Path(tmp)
        project, data = root / "project", root / "data"
        project.mkdir()
        (root / "home").mkdir()
        # Keep the user's git config (global excludes) and data directory out of it.
        env = dict(os.environ, HOME=str(root / "home"), XDG_CONFIG_HOME=str(root / "home"))
        for name in list(env):
            if name.startswith("GIT_") or name.startswith("REWIND_"):
                del env[name]
        (project / "a.txt").write_text("one\ntwo\n")
        (project / "b.txt").write_text("stays\n")
        os.mkfifo(project / "pipe")  # a special file: left out

        binary = os.path.abspath(rewind) if os.sep in rewind else rewind  # else: on PATH
        try:
            rw = RewindClient(project, rewind=binary, data_dir=data, env=env, timeout=60)
        except OSError as e:
            print(f"FAIL start {binary}: {e}", file=sys.stderr)
            print(f"python: {passed} passed, 1 failed")
            return 1
        steps: list[Callable[[], None]] = []

        def step(fn: Callable[[], None]) -> Callable[[], None]:
            steps.append(fn)
            return fn

        state: dict[str, str] = {}

        @step
        def hello_and_track() -> None:
            hello = rw.hello()
            check_shape("hello shape", hello, Hello)
            check("hello", hello["protocol"] == 2 and tuple(hello["methods"]) == METHODS, hello)
            snap = rw.track()
            check_shape("track shape", snap, Snapshot)
            for row in snap["skipped"]:
                check_shape("skipped shape", row, Skipped)
            check("track hash", isinstance(snap["hash"], str) and len(snap["hash"]) == 40, snap)
            check("track files", snap["files"] == 2, snap)
            check("track skipped", snap["skipped"] == [{"path": "pipe", "reason": "special_file"}], snap)
            state["before"] = snap["hash"]

        @step
        def patch_and_diffs() -> None:
            (project / "a.txt").write_text("one\nTWO\n")
            (project / "new.txt").write_text("new\n")
            before = state["before"]
            patch = rw.patch(before[:10])
            check_shape("patch shape", patch, Patch)
            check("patch", patch == {"hash": before, "files": ["a.txt", "new.txt"]}, patch)
            rows = rw.diff_full(before)
            for row in rows:
                check_shape("diff_full shape", row, FileChange)
            expected: list[FileChange] = [
                {"file": "a.txt", "status": "modified", "before": "one\ntwo\n", "after": "one\nTWO\n",
                 "additions": 1, "deletions": 1, "binary": False},
                {"file": "new.txt", "status": "added", "before": "", "after": "new\n",
                 "additions": 1, "deletions": 0, "binary": False},
            ]  # fmt: skip
            check("diff_full", rows == expected, rows)
            # Only some paths; a bound on the text: a.txt's 16 bytes fit, new.txt's then do not.
            only = rw.diff_full(before, paths=["new.txt"])
            check("diff_full paths", only == expected[1:], only)
            bounded = rw.diff_full(before, max_bytes=16)
            for row in bounded:
                check_shape("diff_full shape", row, FileChange)
            cut: FileChange = {"file": "new.txt", "status": "added", "before": "", "after": "",
                               "additions": 1, "deletions": 0, "binary": False, "truncated": True}  # fmt: skip
            check("diff_full max_bytes", bounded == [expected[0], cut], bounded)
            text = rw.diff(before)
            check("diff text", "diff --git a/a.txt b/a.txt\n" in text and "\n-two\n+TWO\n" in text, text)
            has = rw.call("has_changes", {"hash": before[:8]})
            check_shape("has_changes shape", has, HasChanges)
            check("has_changes", rw.has_changes(before) is True)

        @step
        def turn() -> None:
            begun = rw.turn_begin("py", "1", meta={"message_id": "msg_1"})
            check_shape("turn_begin shape", begun, TurnStart)
            check("turn_begin", begun["session"] == "py" and begun["turn"] == "1" and len(begun["before"]) == 40, begun)
            tracked = rw.track_file("py", "1", "b.txt")
            check_shape("track_file shape", tracked, TrackedFile)
            check("track_file", tracked == {"session": "py", "turn": "1", "path": "b.txt"}, tracked)
            (project / "b.txt").write_text("changed by the agent\n")
            ended = rw.turn_end("py", "1")
            check_shape("turn_end shape", ended, TurnEnd)
            check("turn_end ids", ended["before"] == begun["before"] and len(ended["after"]) == 40, ended)
            files = ended["files"]
            for row in files:
                check_shape("turn file shape", row, TurnFile)
            expected: list[TurnFile] = [
                {"file": "b.txt", "status": "modified", "additions": 1, "deletions": 1, "binary": False, "origin": "announced"}
            ]
            check("turn_end", files == expected, files)
            turns = rw.turns("py")
            for record in turns:
                check_shape("turns shape", record, Turn)
            check("turns", len(turns) == 1 and turns[0]["ended_at"] is not None and not turns[0]["rolled_back"], turns)
            check("turns changed", turns[0]["changed"] == expected, turns)
            check("turns meta", turns[0]["meta"] == {"message_id": "msg_1"}, turns)
            totals = rw.changes("py")
            check_shape("changes shape", totals, SessionChanges)
            check("changes", (totals["files"], totals["total_files"]) == (expected, 1), totals)

        @step
        def undo_and_redo() -> None:
            outcome = rw.undo("py", last=True)
            check_shape("undo shape", outcome, RestoreOutcome)
            check("undo outcome", outcome["written"] == ["b.txt"] and outcome["conflicts"] == [], outcome)
            check("undo hash", len(outcome["hash"]) == 40, outcome)
            check("undo bytes", (project / "b.txt").read_text() == "stays\n")
            check("undo rolled back", rw.turns("py")[0]["rolled_back"] is True)
            redone = rw.redo("py")
            check_shape("redo shape", redone, RestoreOutcome)
            check("redo outcome", redone["written"] == ["b.txt"] and redone["conflicts"] == [], redone)
            check("redo bytes", (project / "b.txt").read_text() == "changed by the agent\n")
            check("redo clears rolled back", rw.turns("py")[0]["rolled_back"] is False)
            again = rw.undo("py", "1")
            check("undo by turn", again["written"] == ["b.txt"], again)
            check("undo by turn bytes", (project / "b.txt").read_text() == "stays\n")

        @step
        def errors() -> None:
            check_error("invalid_id", lambda: rw.patch("zz"), -32000, "invalid_id")
            check_error("not_found", lambda: rw.changes("nobody"), -32000, "not_found")
            check_error("turn_state", lambda: rw.turn_end("py", "1"), -32000, "turn_state")
            check_error("unknown method", lambda: rw.call("nope"), -32601, None)
            check_error("missing param", lambda: rw.call("patch", {}), -32602, None)
            check_error("extra param", lambda: rw.call("patch", {"hash": state["before"], "x": 1}), -32602, None)
            check_error("positional params", lambda: rw.call("patch", [state["before"]]), -32602, None)
            check_error("last with turn", lambda: rw.undo("py", "1", last=True), -32602, None)
            rw.notify("nope")  # no response; the next call still gets its own
            check("after a notification", len(rw.turns()) == 1)

        @step
        def threads() -> None:
            results: list[object] = []

            def worker() -> None:
                try:
                    results.append(rw.patch(state["before"])["files"])
                except Exception as e:
                    results.append(e)

            workers = [threading.Thread(target=worker) for _ in range(4)]
            for t in workers:
                t.start()
            for t in workers:
                t.join()
            check("calls from threads", results == [["a.txt", "new.txt"]] * 4, results)

        @step
        def revert_and_restore() -> None:
            preview = rw.revert(state["before"], ["a.txt"], dry_run=True)
            check_shape("revert dry-run shape", preview, RestoreOutcome)
            check("revert dry run", preview.get("dry_run") is True and preview["written"] == ["a.txt"], preview)
            check("revert dry run changed nothing", (project / "a.txt").read_bytes() != b"one\ntwo\n")
            reverted = rw.revert(state["before"], ["a.txt"])
            check_shape("revert shape", reverted, RestoreOutcome)
            check("revert", (reverted["written"], reverted["deleted"], reverted["failed"]) == (["a.txt"], [], []), reverted)
            check("revert bytes", (project / "a.txt").read_bytes() == b"one\ntwo\n")
            outcome = rw.restore(state["before"])
            check_shape("restore shape", outcome, RestoreOutcome)
            check("restore", outcome["failed"] == [] and outcome["deleted"] == ["new.txt"], outcome)
            check("restore removed", not (project / "new.txt").exists())
            rw.restore(outcome["undo"])  # its undo id puts back what the restore took
            check("restore undo", (project / "new.txt").read_text() == "new\n")

        @step
        def lock_wait_and_cancel() -> None:
            stores = [p for p in data.iterdir() if p.name.endswith(".git")]
            with open(stores[0] / "rewind.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # as another rewind process would
                try:
                    rw.turn_begin("py", "2", timeout_ms=100)
                    check("busy raises", False, "no exception")
                except RewindError as e:
                    check("busy", (e.code, e.data_code) == (-32000, "busy"), e)
                    check("busy names the holder", f"process {os.getpid()} " in e.message, e)
                cancel = threading.Event()
                outcome: list[object] = []

                def waiting_write() -> None:
                    try:
                        outcome.append(rw.turn_begin("py", "2", cancel=cancel))
                    except RewindError as e:
                        outcome.append(e)

                writer = threading.Thread(target=waiting_write)
                writer.start()
                # Answered while the write waits for the lock.
                check("turns while a write waits", len(rw.turns("py")) == 1)
                cancel.set()
                writer.join(30)
                cancelled = outcome[0] if outcome else None
                ok = isinstance(cancelled, RewindError) and (cancelled.code, cancelled.data_code) == (-32800, "cancelled")
                check("cancelled", ok, cancelled)
            check("no trace of the cancelled turn", len(rw.turns("py")) == 1)

        @step
        def prune() -> None:
            preview = rw.prune(dry_run=True)
            check_shape("prune dry-run shape", preview, PruneOutcome)
            check("prune dry run", preview.get("dry_run") is True and preview["sessions_removed"] == [], preview)
            outcome = rw.prune()
            check_shape("prune shape", outcome, PruneOutcome)
            check("prune", outcome["sessions_removed"] == [], outcome)  # nothing has expired

        @step
        def status() -> None:
            status = rw.status()
            check_shape("status shape", status, ServerStatus)
            check("no notices", status["notices"] == [], status)
            watcher = status["watcher"]
            check_shape("status.watcher shape", watcher, WatchStatus)
            check("the watcher runs", watcher["active"] and watcher["full_walks"] >= 1, watcher)

        for fn in steps:
            try:
                fn()
            except (TimeoutError, RewindClosed) as e:  # hung or gone: the other steps would be too
                check(fn.__name__, False, f"{type(e).__name__}: {e}")
                break
            except Exception as e:  # a step that blew up counts once, the others still run
                check(fn.__name__, False, f"{type(e).__name__}: {e}")
        code = rw.close()
        check("exit 0 on close", code == 0, f"exit {code}: {rw.stderr}")
        try:
            rw.turns()
            check("closed client raises", False, "no exception")
        except RewindClosed:
            check("closed client raises", True)

        # A project that cannot be opened: the server exits 1 with one line, the call says so.
        with RewindClient(root / "missing", rewind=binary, data_dir=data, env=env, timeout=60) as gone:
            try:
                gone.hello()
                check("missing project raises", False, "no exception")
            except RewindClosed as e:
                check("missing project", "exited with 1: rewind: " in e.message, e)

    print(f"python: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--selftest":
        sys.exit(selftest(sys.argv[2]))
    print(f"usage: {sys.argv[0]} --selftest REWIND_BIN", file=sys.stderr)
    sys.exit(2)
