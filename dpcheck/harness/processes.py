"""How dpcheck's own process runs each model file in a child of its own (``--confirm``).

Two launchers, one result (the dict :func:`dpcheck.harness.child.run_file` returns, or
``{"error": why}``):

* **Warm forks** (the emulated backend): one server process (:mod:`dpcheck.harness.zygote`)
  imports torch and the harness once; each file then runs in a fresh process forked from it. Isolation is the same as a new
  interpreter (a crash, a hang or a poisoned state costs only that file), without paying the
  torch import per file, which was most of the time of ``--confirm``.
* **Fresh interpreters** (real GPUs): ``python -m dpcheck.harness.child FILE``. Forking from a
  process that never touched CUDA is allowed, but this path is the one measured on GPUs.

Neither imports torch in dpcheck's own process.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from dpcheck.constants import CHILD_RESULT_MARKER


def child_environment(concurrent: int = 1, **extra: str) -> dict[str, str]:
    """The environment of the processes that run models, ``concurrent`` of them at once (unless
    the user chose otherwise). OpenMP threads wait passively: torch's default spinning threads,
    on a machine whose cores are busy (other children, other jobs), make every parallel
    operator wait for a descheduled spinner (a LayerNorm of 1,000 elements took 20 ms instead
    of 0.06 ms on 2 loaded cores). And the children share the cores instead of each starting
    one thread per core (18 children on 16 cores ran 288 threads)."""
    env = {**os.environ, **extra}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    env.setdefault("OMP_NUM_THREADS", str(max(1, cores // max(1, concurrent))))
    return env


def uses_warm_forks(backend: str) -> bool:
    """Whether files on ``backend`` run in warm forks: always for the emulation, and for
    ``auto`` where no GPU device node exists (auto then picks the emulation); real GPUs keep
    fresh interpreters."""
    if backend == "emulated":
        return True
    return backend == "auto" and len(glob.glob("/dev/nvidia[0-9]*")) < 2 and sys.platform.startswith("linux")


class Launcher:
    """Runs one file in a child with a time limit; safe to call from several threads."""

    def __init__(self, backend: str, devices: int | None, timeout: float, examples: Path | None,
                 concurrent: int = 1):
        self.backend, self.devices, self.timeout = backend, devices, timeout
        self.concurrent = concurrent  # how many files run at once: they share the cores
        self.examples = str(examples) if examples else None
        self._zygote: Zygote | None = None
        self._lock = threading.Lock()

    def run(self, path: Path, examples: Path | None = None, timeout: float | None = None) -> dict:
        """Run ``path``'s models; ``examples`` and ``timeout``, where given, are this file's own
        settings (its closest configuration), else the launcher's."""
        examples_file = str(examples) if examples else self.examples
        limit = self.timeout if timeout is None else timeout
        if uses_warm_forks(self.backend):
            return self._run_forked(path, examples_file, limit)
        return self._run_fresh(path, examples_file, limit)

    # --- fresh interpreter -------------------------------------------------------------

    def _run_fresh(self, path: Path, examples: str | None, timeout: float) -> dict:
        cmd = [sys.executable, "-m", "dpcheck.harness.child", str(path), "--backend", self.backend]
        if self.devices:
            cmd += ["--devices", str(self.devices)]
        if examples:
            cmd += ["--examples", examples]
        env = child_environment(self.concurrent, PYTHONDONTWRITEBYTECODE="1")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"error": _timed_out(timeout)}
        for line in reversed(proc.stdout.splitlines()):
            if line.startswith(CHILD_RESULT_MARKER):
                try:
                    return json.loads(line[len(CHILD_RESULT_MARKER):])
                except ValueError:
                    break
        return {"error": _died(proc.returncode, proc.stderr)}

    # --- warm forks --------------------------------------------------------------------

    def _run_forked(self, path: Path, examples: str | None, timeout: float) -> dict:
        with self._lock:
            if self._zygote is None:
                self._zygote = Zygote(self.concurrent)
            zygote = self._zygote
        return zygote.run(path, self.backend, self.devices, examples, timeout, _timed_out(timeout))

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()



def _timed_out(timeout: float) -> str:
    return f"the model did not finish within {timeout:g} s (--timeout)"


def _died(returncode: int | None, stderr: str) -> str:
    tail = (stderr.strip().splitlines() or ["no output"])[-1][:300]
    if returncode is not None and returncode < 0:
        return f"the model process was killed by signal {-returncode} ({tail})"
    return f"the model process exited with status {returncode} before reporting ({tail})"


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


class _Job:
    def __init__(self) -> None:
        self.pid: int | None = None
        self.exit: int | None = None
        self.forked = threading.Event()
        self.ended = threading.Event()


class Zygote:
    """dpcheck's end of :mod:`dpcheck.harness.zygote`: one server for the whole run; any
    number of threads call :meth:`run` at once."""

    def __init__(self, concurrent: int = 1) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="dpcheck-confirm-")
        self._server_log = open(os.path.join(self._dir.name, "server.log"), "w+b")
        self._proc = subprocess.Popen([sys.executable, "-m", "dpcheck.harness.zygote"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._server_log, env=child_environment(concurrent))
        self._lock = threading.Lock()
        self._jobs: dict[int, _Job] = {}
        self._by_pid: dict[int, _Job] = {}
        self._next_id = 0
        self._closed = False
        threading.Thread(target=self._read, daemon=True, name="dpcheck zygote reader").start()

    def _read(self) -> None:
        for raw in self._proc.stdout:
            message = json.loads(raw)
            with self._lock:
                if "id" in message:
                    job = self._jobs.pop(message["id"])
                    job.pid = message["pid"]
                    self._by_pid[job.pid] = job
                    job.forked.set()
                else:
                    job = self._by_pid.pop(message["pid"], None)
                    if job is not None:
                        job.exit = message["exit"]
                        job.ended.set()
        with self._lock:  # the server is gone: nothing pending will ever answer
            self._closed = True
            for job in [*self._jobs.values(), *self._by_pid.values()]:
                job.forked.set()
                job.ended.set()

    def run(self, path: Path, backend: str, devices: int | None, examples: str | None, timeout: float,
            timed_out: str) -> dict:
        job = _Job()
        with self._lock:
            if self._closed:
                return {"error": self._server_died()}
            ident, self._next_id = self._next_id, self._next_id + 1
            self._jobs[ident] = job
            result = os.path.join(self._dir.name, f"{ident}.json")
            log = os.path.join(self._dir.name, f"{ident}.log")
            request = {"id": ident, "file": str(path), "backend": backend, "devices": devices,
                       "examples": examples, "result": result, "log": log}
            try:
                self._proc.stdin.write((json.dumps(request) + "\n").encode())
                self._proc.stdin.flush()
            except OSError:
                return {"error": self._server_died()}
        # The time limit starts at the fork: the server's one torch import is not the model's time.
        job.forked.wait()
        if job.pid is None:
            return {"error": self._server_died()}
        if not job.ended.wait(timeout):
            try:
                os.kill(job.pid, signal.SIGKILL)
            except OSError:
                pass
            job.ended.wait(5)
            return {"error": timed_out}
        try:
            with open(result, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return {"error": _died(job.exit, _read(log))}
        finally:
            for leftover in (result, log):
                try:
                    os.unlink(leftover)
                except OSError:
                    pass

    def _server_died(self) -> str:
        self._server_log.seek(0)
        return "the harness server ended before running the model: " + _died(
            self._proc.poll(), self._server_log.read().decode(errors="replace"))

    def close(self) -> None:
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._server_log.close()
        self._dir.cleanup()
