"""The warm server that forks one child per model file (``--confirm`` on the emulation).

    python -m dpcheck.harness.zygote

It imports torch and the harness once, then reads one JSON request per line on stdin
(``{"id", "file", "backend", "devices", "examples", "result", "log"}``) and forks a child for
each: the child runs :func:`dpcheck.harness.child.run_file`, writes its result as JSON to
``result`` and everything the model prints to ``log``. On stdout the server answers
``{"id", "pid"}`` when it forked and ``{"pid", "exit"}`` when that child ended (its exit code,
negative for a signal). The parent (:mod:`dpcheck.harness.processes`) enforces the time limit
by killing the pid. End of file on stdin, or the parent's death, ends the server and its
children.

A fork of a process that imported torch but never ran an operator or touched CUDA is as
clean as a new interpreter, at a fraction of the cost (the import is most of it).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys

from dpcheck.harness import child
# Warm: what every child needs before user code, imported once here instead of in each child.
from dpcheck.harness import runner, synthesize  # noqa: F401


def _serve_child(request: dict) -> None:
    """In the forked child: never returns."""
    code = 0
    try:
        child.die_with_parent()
        sys.dont_write_bytecode = True  # as a fresh child under PYTHONDONTWRITEBYTECODE: no .pyc in user trees
        fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.close(null)
        sys.stdin = open(os.devnull)
        result = child.run_file(request["file"], request["backend"], request.get("devices"), request.get("examples"))
        with open(request["result"], "w", encoding="utf-8") as out:
            json.dump(result, out, default=str)
    except BaseException:
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)  # no atexit handlers of the server (or of the model) run twice


def _send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _reap(children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        _send({"pid": pid, "exit": os.waitstatus_to_exitcode(status)})


def main() -> int:
    child.die_with_parent()
    children: set[int] = set()
    # Unbuffered: a buffered reader could hold a second request that select() no longer sees.
    stdin = sys.stdin.buffer.raw
    try:
        while True:
            ready, _, _ = select.select([stdin], [], [], 0.05)
            _reap(children)
            if not ready:
                continue
            line = stdin.readline()
            if not line:
                break  # the parent closed the pipe or died
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _serve_child(request)
            children.add(pid)
            _send({"id": request["id"], "pid": pid})
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
