#!/usr/bin/env python3
"""A small client for `rewind serve` (JSON-RPC 2.0 over stdio). Standard library only (3.11+).

    from rewind_client import RewindClient, RewindError

    with RewindClient("/path/to/project") as rw:          # spawns `rewind -C ... serve`
        before = rw.track()["hash"]
        # ... the agent edits files ...
        for row in rw.diff_full(before):
            print(row["file"], row["status"], row["additions"], row["deletions"])
        try:
            rw.patch("not-an-id")
        except RewindError as e:
            print(e.code, e.data_code)                     # -32000 invalid_id

Requests carry increasing ids and responses are matched by id (the server answers a read such as
`turns` while an earlier write still waits for the store's lock, so answers can come out of
order), so one client can be used from several threads. `call(..., timeout_ms=...)` bounds a
request's wait for the lock (`busy` after it) and `call(..., cancel=event)` cancels it. Closing
the client closes the server's stdin; the server then answers what is running and exits 0.

Self-test against a real binary (used by CI):

    python3 examples/python/rewind_client.py --selftest target/debug/rewind
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any


class RewindError(Exception):
    """An `error` response: `code` is the JSON-RPC code (-32000 for a failed operation, -32800
    for a cancelled one, -326xx for a malformed request) and `data_code` the CLI's error code
    (`busy`, `cancelled`, `invalid_id`, `not_found`, `wrong_type`, `bad_path`, `turn_state`,
    `invalid_name`, ...) when there is one."""

    def __init__(self, code: int, message: str, data: Any = None):
        self.code = code
        self.message = message
        self.data = data
        self.data_code = data.get("code") if isinstance(data, dict) else None
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
        self.response: dict | None = None
        self.closed: str | None = None  # why no response will come


class RewindClient:
    """One `rewind serve` process for one project."""

    def __init__(
        self,
        project: str | os.PathLike,
        *,
        rewind: str = "rewind",
        data_dir: str | os.PathLike | None = None,
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
        params: dict | None = None,
        timeout: float | None = None,
        *,
        timeout_ms: int | None = None,
        cancel: threading.Event | None = None,
    ) -> Any:
        """Send a request and wait for its response: the `result`, or RewindError.

        `timeout_ms` bounds the server's wait for the store's lock (RewindError `busy` after
        it). Once `cancel` is set, the server cancels the request at its next safe point
        (RewindError -32800 `cancelled`; a call already past it answers normally). When the
        client-side `timeout` runs out, the request is cancelled too, then TimeoutError."""
        request_id = next(self._ids)
        waiter = _Waiter()
        with self._lock:
            if self._closed is not None:
                raise RewindClosed(self._closed)
            self._pending[request_id] = waiter
        request = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if timeout_ms is not None:
            params = dict(params or {}, timeout_ms=timeout_ms)
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
        if "error" in response:
            error = response["error"]
            raise RewindError(error.get("code", 0), error.get("message", ""), error.get("data"))
        return response.get("result")

    def _cancel(self, request_id: int) -> None:
        """Send `$/cancelRequest` for `request_id` (ignored by the server once it answered)."""
        try:
            self.notify("$/cancelRequest", {"id": request_id})
        except RewindClosed:
            pass

    def notify(self, method: str, params: dict | None = None) -> None:
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

    def _write(self, message: dict) -> None:
        line = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            assert self._proc.stdin is not None
            self._proc.stdin.write(line)
            self._proc.stdin.flush()

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
        assert self._proc.stderr is not None
        for chunk in iter(lambda: self._proc.stderr.read1(65536), b""):
            self._stderr.append(chunk)

    # -- the methods, with the CLI's --json shapes -----------------------------------------

    def hello(self) -> dict:
        """{"protocol", "version", "methods", "capabilities"}: call first, check `protocol`."""
        return self.call("hello")

    def track(self) -> dict:
        """Snapshot the project: {"hash", "files", "skipped"}."""
        return self.call("track")

    def patch(self, hash: str) -> dict:
        """Paths changed since snapshot `hash`: {"hash", "files"}."""
        return self.call("patch", {"hash": hash})

    def diff(self, from_: str, to: str | None = None) -> str:
        """git's unified diff text from `from_` to `to` (default: the project now)."""
        return self.call("diff", _drop_none({"from": from_, "to": to}))["diff"]

    def diff_full(self, from_: str, to: str | None = None) -> list[dict]:
        """Rows {"file", "status", "before", "after", "additions", "deletions", "binary", ...}."""
        return self.call("diff_full", _drop_none({"from": from_, "to": to}))

    def has_changes(self, hash: str) -> bool:
        return self.call("has_changes", {"hash": hash})["changed"]

    def restore(self, hash: str, force: bool = False) -> dict:
        """{"hash", "written", "deleted", "failed", "conflicts", "undo"}."""
        return self.call("restore", {"hash": hash, "force": force})

    def revert(self, hash: str, paths: list[str]) -> dict:
        return self.call("revert", {"hash": hash, "paths": list(paths)})

    def turn_begin(self, session: str, turn: str) -> dict:
        return self.call("turn_begin", {"session": session, "turn": turn})

    def track_file(self, session: str, turn: str, path: str) -> dict:
        return self.call("track_file", {"session": session, "turn": turn, "path": path})

    def turn_end(self, session: str, turn: str) -> dict:
        """{"session", "turn", "before", "after", "files": [{"file", "status", "additions",
        "deletions"}], "skipped": [{"path", "reason"}]} (skipped: left out of the "after")."""
        return self.call("turn_end", {"session": session, "turn": turn})

    def turns(self, session: str | None = None) -> list[dict]:
        return self.call("turns", _drop_none({"session": session}))

    def undo(
        self,
        session: str,
        turn: str | None = None,
        file: str | None = None,
        force: bool = False,
        last: bool = False,
    ) -> dict:
        """{"restored", "deleted", "conflicts", "kept", "failed", "undo"}. `last`: the most
        recent turn not undone yet (without `turn` and `file`)."""
        params = _drop_none({"session": session, "turn": turn, "file": file})
        params["force"] = force
        if last:
            params["last"] = True
        return self.call("undo", params)

    def redo(self, session: str, turn: str | None = None, force: bool = False) -> dict:
        """Bring back what the session's last undo (not redone yet) changed; same shape as undo."""
        params = _drop_none({"session": session, "turn": turn})
        params["force"] = force
        return self.call("redo", params)

    def changes(self, session: str) -> dict:
        return self.call("changes", {"session": session})

    def prune(self) -> dict:
        return self.call("prune")


def _drop_none(params: dict) -> dict:
    return {k: v for k, v in params.items() if v is not None}


# -- self-test --------------------------------------------------------------------------------


def selftest(rewind: str) -> int:
    """A short cycle against a real binary. Prints 'python: N passed, M failed'."""
    import tempfile
    from pathlib import Path

    passed = failed = 0

    def check(name: str, ok: bool, detail: Any = "") -> None:
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {name}: {detail}", file=sys.stderr)

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

        binary = os.path.abspath(rewind) if os.sep in rewind else rewind  # else: on PATH
        try:
            rw = RewindClient(project, rewind=binary, data_dir=data, env=env, timeout=60)
        except OSError as e:
            print(f"FAIL start {binary}: {e}", file=sys.stderr)
            print(f"python: {passed} passed, 1 failed")
            return 1
        steps = []

        def step(fn):
            steps.append(fn)
            return fn

        state: dict[str, Any] = {}

        @step
        def track():
            hello = rw.hello()
            check("hello", hello["protocol"] == 1 and "redo" in hello["methods"], hello)
            snap = rw.track()
            check("track hash", isinstance(snap["hash"], str) and len(snap["hash"]) == 40, snap)
            check("track files", snap["files"] == 2 and snap["skipped"] == [], snap)
            state["before"] = snap["hash"]

        @step
        def patch_and_diffs():
            (project / "a.txt").write_text("one\nTWO\n")
            (project / "new.txt").write_text("new\n")
            before = state["before"]
            patch = rw.patch(before[:10])
            check("patch", patch == {"hash": before, "files": ["a.txt", "new.txt"]}, patch)
            rows = {row["file"]: row for row in rw.diff_full(before)}
            a, new = rows.get("a.txt", {}), rows.get("new.txt", {})
            check("diff_full files", sorted(rows) == ["a.txt", "new.txt"], rows)
            check(
                "diff_full a.txt",
                (a.get("status"), a.get("additions"), a.get("deletions"), a.get("before"), a.get("after"))
                == ("modified", 1, 1, "one\ntwo\n", "one\nTWO\n"),
                a,
            )
            check("diff_full new.txt", (new.get("status"), new.get("additions")) == ("added", 1), new)
            text = rw.diff(before)
            check("diff text", "diff --git a/a.txt b/a.txt\n" in text and "\n-two\n+TWO\n" in text, text)
            check("has_changes", rw.has_changes(before) is True)

        @step
        def turn_and_undo():
            begun = rw.turn_begin("py", "1")
            check("turn_begin", begun["session"] == "py" and begun["turn"] == "1" and len(begun["before"]) == 40, begun)
            (project / "b.txt").write_text("changed by the agent\n")
            ended = rw.turn_end("py", "1")
            check("turn_end ids", ended["before"] == begun["before"] and len(ended["after"]) == 40, ended)
            files = ended["files"]
            check(
                "turn_end",
                files
                == [{"file": "b.txt", "status": "modified", "additions": 1, "deletions": 1, "origin": "unannounced"}],
                files,
            )
            turns = rw.turns("py")
            check("turns", len(turns) == 1 and turns[0]["ended_at"] and not turns[0]["rolled_back"], turns)
            outcome = rw.undo("py", "1")
            check("undo outcome", outcome["restored"] == ["b.txt"] and outcome["conflicts"] == [], outcome)
            check("undo bytes", (project / "b.txt").read_text() == "stays\n")
            check("undo rolled back", rw.turns("py")[0]["rolled_back"] is True)
            redone = rw.redo("py")
            check("redo outcome", redone["restored"] == ["b.txt"] and redone["conflicts"] == [], redone)
            check("redo bytes", (project / "b.txt").read_text() == "changed by the agent\n")
            check("redo clears rolled back", rw.turns("py")[0]["rolled_back"] is False)
            again = rw.undo("py", last=True)
            check("undo last", again["restored"] == ["b.txt"], again)

        @step
        def errors():
            try:
                rw.patch("zz")
                check("invalid_id raises", False, "no exception")
            except RewindError as e:
                check("invalid_id", (e.code, e.data_code) == (-32000, "invalid_id"), e)
            try:
                rw.changes("nobody")
                check("not_found raises", False, "no exception")
            except RewindError as e:
                check("not_found", (e.code, e.data_code) == (-32000, "not_found"), e)
            for method, params, code in [("nope", None, -32601), ("patch", {}, -32602)]:
                try:
                    rw.call(method, params)
                    check(f"{method} raises", False, "no exception")
                except RewindError as e:
                    check(f"{method} error", e.code == code and e.data_code is None, e)
            rw.notify("nope")  # no response; the next call still gets its own
            check("after a notification", isinstance(rw.turns(), list))

        @step
        def threads_and_restore():
            results: list[Any] = []

            def worker() -> None:
                try:
                    results.append(rw.patch(state["before"])["files"])
                except Exception as e:
                    results.append(e)

            threads = [threading.Thread(target=worker) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            check("calls from threads", results == [["a.txt", "new.txt"]] * 4, results)
            outcome = rw.restore(state["before"])
            check("restore", outcome["failed"] == [] and outcome["deleted"] == ["new.txt"], outcome)
            check("restore bytes", (project / "a.txt").read_bytes() == b"one\ntwo\n")
            check("restore removed", not (project / "new.txt").exists())

        @step
        def lock_wait_and_cancel():
            import fcntl

            stores = [p for p in data.iterdir() if p.name.endswith(".git")]
            with open(stores[0] / "rewind.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # as another rewind process would
                try:
                    rw.call("turn_begin", {"session": "py", "turn": "2"}, timeout_ms=100)
                    check("busy raises", False, "no exception")
                except RewindError as e:
                    check("busy", (e.code, e.data_code) == (-32000, "busy"), e)
                    check("busy names the holder", f"process {os.getpid()} " in e.message, e)
                cancel, outcome = threading.Event(), []

                def waiting_write() -> None:
                    try:
                        outcome.append(rw.call("turn_begin", {"session": "py", "turn": "2"}, cancel=cancel))
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

    print(f"python: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--selftest":
        sys.exit(selftest(sys.argv[2]))
    print(f"usage: {sys.argv[0]} --selftest REWIND_BIN", file=sys.stderr)
    sys.exit(2)
