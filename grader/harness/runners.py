"""The checks of one job, each in its own process forked from the post-import parent.

The harness's main process (the *parent*) imports the student's code once and never runs a probe
itself. Every check runs in a fresh *runner* forked from that untouched state, so nothing one
check does (a class attribute or a module-level flag changed in ``forward``, a random draw, a
thread it started) can reach another: a verdict never depends on which checks ran before it or
beside it. numpy's generators are the parent's; ``random``'s, which Python reseeds in a forked
child, are set back to the parent's. The fork is not on the check's path: while a check runs, the
next check's runner is forked and waits for it on a pipe. Up to ``parallel`` checks run at once.

One check, one fate: a check that hangs, crashes, exits or is killed ends only its runner; the
parent records that check's status. A runner's whole process group is killed after its check.

A hung method costs one timeout: at a check's deadline the parent asks the runner for its stack
(``faulthandler`` on SIGUSR1) and then kills it. The innermost student function of that stack is
*blocked*: a check still running in it elsewhere is stopped now, and every later check that calls
it stops at that call, each with status ``timeout`` and the reason ``blocked by <check> timeout``.
Everything here runs as the job and is as untrusted as the rest of its output: student code can
only ever make its own checks fail this way.

Standard library and numpy only: this runs in the sandbox.
"""

from __future__ import annotations

import json
import os
import random
import re
import resource
import select
import signal
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Bound before any student code runs, so that rebinding os.* later cannot reach the harness.
_fork, _exit, _waitpid, _kill, _killpg = os.fork, os._exit, os.waitpid, os.kill, os.killpg
_pidfd_open, _read, _write, _close = os.pidfd_open, os.read, os.write, os.close
_dumps, _loads = json.dumps, json.loads

STACK_WAIT_S, STACK_QUIET_S, MAX_STACK = 0.3, 0.03, 64 * 1024
# Parsed from what the job itself writes: bounded, so that no number in it is too long for int().
_STUDENT_FRAME = re.compile(r'File "(<cell \d{1,9}>)", line (\d{1,9}) in (\S{1,200})(?!\S)')

Record = dict[str, Any]
Execute = Callable[[dict[str, Any]], tuple[Record, dict[str, Any]]]  # check -> (record, arrays)
Write = Callable[[str, Record, dict[str, Any]], None]  # check id, record, arrays
Report = Callable[[str, Record], None]  # check id, status record


@dataclass
class _Runner:
    pid: int
    pidfd: int
    commands: int  # parent -> runner: >I length + JSON {"check", "blocked"}
    replies: int  # runner -> parent: b"D" when its check is done (it then exits)
    stacks: int  # runner -> parent: faulthandler's dump on SIGUSR1
    check: dict[str, Any] | None = None
    started: float = 0.0


@dataclass
class Blocked:
    """A student function that did not return within a check's timeout."""

    file: str
    line: int
    name: str
    by: str  # the check that timed out in it

    def reason(self) -> str:
        return (f"blocked by {self.by} timeout: {self.name} ({self.file[1:-1]}, line {self.line}) did not return "
                "there, so it was not run again")[:200]


@dataclass
class Runners:
    """The parent's side: runners, their checks and deadlines, and what is blocked."""

    parallel: int
    execute: Execute
    write: Write
    report: Report
    clock: Callable[[], float]
    runners: list[_Runner] = field(default_factory=list)
    blocked: list[Blocked] = field(default_factory=list)
    ending: list[int] = field(default_factory=list)  # runners killed after their check, not yet reaped

    def run(self, checks: list[dict[str, Any]]) -> None:
        """Every check in ``checks``, at most ``parallel`` at a time, each within its own timeout."""
        pending = list(checks)
        while pending or any(r.check for r in self.runners):
            while pending and (idle := self._idle()) is not None:
                check = pending.pop(0)
                try:
                    runner = idle if isinstance(idle, _Runner) else self._spawn()
                except OSError as e:  # e.g. the job's own processes fill its process limit
                    self.report(check["id"], {"status": "crashed", "duration_ms": 0.0,
                                              "reason": f"the check could not start: {e.strerror} (too many processes?)"})
                    continue
                self._send(runner, check)
            if pending and all(r.check is not None for r in self.runners):
                try:  # the next check's runner, forked while this one runs
                    self._spawn()
                except OSError:
                    pass  # forked on demand instead, or reported then
            self._wait()
            self._reap()

    def close(self) -> None:
        """End every runner: its command pipe closes (it exits when it reads that), and its
        process group is killed; what has not exited yet is reaped by the supervisor's sweep."""
        self._reap()
        for runner in self.runners:
            for fd in (runner.commands, runner.replies, runner.stacks, runner.pidfd):
                try:
                    _close(fd)
                except OSError:
                    pass
            for kill in (_killpg, _kill):
                try:
                    kill(runner.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        self.runners.clear()

    # ---- scheduling ----------------------------------------------------------------------------

    def _idle(self) -> _Runner | bool | None:
        """A waiting runner, or True when one must be forked; None while ``parallel`` checks run."""
        if sum(r.check is not None for r in self.runners) >= max(1, self.parallel):
            return None
        for runner in self.runners:
            if runner.check is None:
                return runner
        return True

    def _send(self, runner: _Runner, check: dict[str, Any]) -> None:
        runner.check, runner.started = check, self.clock()
        message = _dumps({"check": check, "blocked": [b.__dict__ for b in self.blocked]}).encode()
        try:
            _write_all(runner.commands, struct.pack(">I", len(message)) + message)
        except OSError:
            pass  # it died: its pidfd says so

    def _wait(self) -> None:
        busy = [r for r in self.runners if r.check is not None]
        if not busy:
            return
        deadline = min(r.started + float(r.check["timeout_s"]) for r in busy if r.check is not None)
        fds = [r.replies for r in busy] + [r.pidfd for r in self.runners]
        ready = set(select.select(fds, [], [], max(0.0, deadline - self.clock()))[0])
        for runner in list(self.runners):
            if runner.replies in ready and runner.check is not None:
                self._reply(runner)
        for runner in list(self.runners):
            if runner in self.runners and runner.pidfd in ready:
                self._died(runner)
        now = self.clock()
        for runner in list(self.runners):
            if runner in self.runners and runner.check is not None \
                    and now >= runner.started + float(runner.check["timeout_s"]):
                self._timed_out(runner)

    def _reply(self, runner: _Runner) -> None:
        try:
            answer = _read(runner.replies, 1)
        except OSError:
            answer = b""
        if answer != b"D":
            return  # it died mid-check (its pidfd says how) or wrote nonsense (it then times out)
        runner.check = None
        self._drop(runner, reap=False)  # with whatever its check left behind; reaped while others run

    def _died(self, runner: _Runner) -> None:
        """The runner ended; the check it was running (if any) gets the status of how it ended."""
        check, started = runner.check, runner.started
        status = self._drop(runner)
        if check is None:
            return
        record: Record = {"status": "crashed"}
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            record = {"status": {int(signal.SIGXCPU): "timeout", int(signal.SIGKILL): "oom"}.get(sig, "crashed"),
                      "signal": sig}
        elif os.WIFEXITED(status):
            record["exit_code"] = os.WEXITSTATUS(status)
        record["duration_ms"] = round((self.clock() - started) * 1000, 1)
        if not os.path.exists(os.path.join("out", f"{check['id']}.json")):
            self.report(check["id"], record)

    def _timed_out(self, runner: _Runner) -> None:
        check, started = runner.check, runner.started
        assert check is not None
        where = _hung_in(self._stack(runner))
        self._drop(runner)
        self.report(check["id"], {"status": "timeout", "duration_ms": round((self.clock() - started) * 1000, 1)})
        if where is None:
            return
        file, line, name = where
        self.blocked.append(Blocked(file, line, name, check["id"]))
        for other in list(self.runners):  # a check stuck in the same function elsewhere stops now
            if other.check is not None and (place := _hung_in(self._stack(other))) is not None:
                match = self._blocking(place[0], place[2])
                if match is not None:
                    other_check, other_started = other.check, other.started
                    self._drop(other)
                    self.report(other_check["id"], {"status": "timeout", "reason": match.reason(),
                                                    "duration_ms": round((self.clock() - other_started) * 1000, 1)})

    def _blocking(self, file: str, name: str) -> Blocked | None:
        """The block of a function by its cell and name (the parent has no code objects to tell two
        functions of one name in one cell apart; the runners' own guard does)."""
        for b in self.blocked:
            if (b.file, b.name) == (file, name):
                return b
        return None

    # ---- processes -----------------------------------------------------------------------------

    def _spawn(self) -> _Runner:
        generator = random.getstate()  # the parent's: Python reseeds ``random`` in a forked child
        (cmd_r, cmd_w), (rep_r, rep_w), (stk_r, stk_w) = os.pipe(), os.pipe(), os.pipe()
        try:
            pid = _fork()
        except OSError:
            for fd in (cmd_r, cmd_w, rep_r, rep_w, stk_r, stk_w):
                _close(fd)
            raise
        if pid == 0:
            try:  # a runner never returns into the parent's loop, whatever escapes
                random.setstate(generator)
                _serve(cmd_r, rep_w, stk_w, self.execute, self.write, self.report)
            finally:
                _exit(3)
        for fd in (cmd_r, rep_w, stk_w):
            _close(fd)
        runner = _Runner(pid, _pidfd_open(pid), cmd_w, rep_r, stk_r)
        self.runners.append(runner)
        return runner

    def _drop(self, runner: _Runner, reap: bool = True) -> int:
        """Kill the runner's whole process group, close its descriptors and reap it (now, or later
        with ``_reap``); its wait status when reaped now."""
        for kill in (_killpg, _kill):
            try:
                kill(runner.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        status = 0
        if not reap:
            self.ending.append(runner.pid)
        else:
            try:
                status = _waitpid(runner.pid, 0)[1]
            except ChildProcessError:
                pass
        for fd in (runner.pidfd, runner.commands, runner.replies, runner.stacks):
            try:
                _close(fd)
            except OSError:
                pass
        self.runners.remove(runner)
        return status

    def _reap(self) -> None:
        """Reap the runners that have finished exiting (tearing a process down takes a while)."""
        for pid in list(self.ending):
            try:
                done = _waitpid(pid, os.WNOHANG)[0] != 0
            except ChildProcessError:
                done = True
            if done:
                self.ending.remove(pid)

    def _stack(self, runner: _Runner) -> str:
        """What the runner's faulthandler writes when asked, up to the first complete student
        frame (empty if it cannot answer in time)."""
        while select.select([runner.stacks], [], [], 0)[0]:  # what an earlier request left unread
            if not _read(runner.stacks, MAX_STACK):
                return ""
        try:
            _kill(runner.pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            return ""
        data = bytearray()
        end = self.clock() + STACK_WAIT_S
        while len(data) < MAX_STACK and (left := end - self.clock()) > 0:
            if not select.select([runner.stacks], [], [], min(STACK_QUIET_S, left) if data else left)[0]:
                if data:
                    break  # it has finished writing
                continue
            chunk = _read(runner.stacks, MAX_STACK - len(data))
            if not chunk:
                break
            data += chunk
            if _STUDENT_FRAME.search(data.decode("utf-8", "replace").rpartition("\n")[0]):
                break
        return data.decode("utf-8", "replace")


def _hung_in(stack: str) -> tuple[str, int, str] | None:
    """The innermost student frame of a faulthandler dump (file, line, function name)."""
    found = _STUDENT_FRAME.search(stack)
    return (found.group(1), int(found.group(2)), found.group(3)) if found else None


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[_write(fd, data):]


# ---- in a runner ------------------------------------------------------------------------------


class _BlockedCall(BaseException):
    """Raised where a check calls a function that already hung in another check."""


def _serve(commands: int, replies: int, stacks: int, execute: Execute, write: Write, report: Report) -> None:
    """A runner: wait for its one check, run it, answer, exit (or exit when the pipe closes)."""
    try:
        import faulthandler

        os.setpgid(0, 0)
        _close_except({0, 1, 2, commands, replies, stacks})
        faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True, chain=False)
        message = _command(commands)
        if message is None:
            _exit(0)
        check = message["check"]
        _cpu_budget(float(check["timeout_s"]))
        blocked = [Blocked(**b) for b in message.get("blocked", ())]
        started = time.monotonic()
        hit = _guard(blocked)
        try:
            record, arrays = execute(check)
        except BaseException:
            if not hit:
                raise
        finally:
            sys.setprofile(None)
        if hit:
            report(check["id"], {"status": "timeout", "reason": hit[0].reason(),
                                 "duration_ms": round((time.monotonic() - started) * 1000, 1)})
        else:
            write(check["id"], record, arrays)
        _write_all(replies, b"D")
        _exit(0)
    except BaseException:
        _exit(3)


def _command(fd: int) -> dict[str, Any] | None:
    header = _read_exactly(fd, 4)
    if header is None:
        return None
    body = _read_exactly(fd, struct.unpack(">I", header)[0])
    return None if body is None else dict(_loads(body))


def _read_exactly(fd: int, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = _read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _close_except(keep: set[int]) -> None:
    """The parent's other descriptors (other runners' pipes, the supervisor's socket) stay with it."""
    low = 0
    for fd in sorted(keep):
        if fd > low:  # os.closerange(n, n) would close every descriptor from n up
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1024)


def _cpu_budget(timeout_s: float) -> None:
    """CPU seconds for this check on top of what the runner used so far (never above the job's)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime + timeout_s) + 2
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    except (OSError, ValueError):
        pass


def _guard(blocked: list[Blocked]) -> list[Blocked]:
    """Stop the check at a call of a blocked function; the returned list holds the block that hit."""
    hit: list[Blocked] = []
    if not blocked:
        return hit
    wanted = {(b.file, b.name): b for b in blocked}
    lines: dict[Any, frozenset[int]] = {}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        match = wanted.get((code.co_filename, code.co_name))
        if match is None:
            return
        if code not in lines:
            lines[code] = frozenset(line for _, _, line in code.co_lines() if line is not None)
        if match.line in lines[code]:
            hit.append(match)
            raise _BlockedCall(match.by)

    sys.setprofile(profile)
    return hit
