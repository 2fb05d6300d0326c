"""Processes: a server started pinned in its own session and stopped by its group; CPU and memory from /proc."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from harness import envs

# The server under test runs on one core, its load generator on the other: they never compete.
SERVER_CORE, LOAD_CORE = 0, 1
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
SETTLE_SECONDS = 120.0
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # The command name sits in parentheses and may hold spaces: split after the last ")".
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def process_tree(root: int) -> list[int]:
    children = _children_map()
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, []))
    return pids


def cpu_seconds(pids: Sequence[int]) -> float:
    """utime + stime of the given processes (all their threads), in seconds."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / CLOCK_TICKS


def wait_idle(pids: Sequence[int], timeout: float = 30.0, window: float = 0.25, busy: float = 0.05) -> None:
    """Return once the processes use under `busy` of a core over `window` (work left by a finished run)."""
    deadline = time.perf_counter() + timeout
    before = cpu_seconds(pids)
    while time.perf_counter() < deadline:
        time.sleep(window)
        after = cpu_seconds(pids)
        if after - before < busy * window + 1 / CLOCK_TICKS:
            return
        before = after


def cpu_of(pids: Sequence[int], action: Callable[[], T]) -> tuple[float, T]:
    """The processes' CPU seconds while `action` runs, once the work a finished run left behind is done."""
    wait_idle(pids)
    before = cpu_seconds(pids)
    result = action()
    return cpu_seconds(pids) - before, result


def idle_rate(pids: Sequence[int], seconds: float = 1.0) -> float:
    """The processes' CPU use (cores) before any request: PyTriton's processes poll, using CPU with nothing to do."""
    before = cpu_seconds(pids)
    time.sleep(seconds)
    return (cpu_seconds(pids) - before) / seconds


def settle(pids: Sequence[int], idle: float, window: float = 0.5) -> bool:
    """Wait until the processes are back to their idle use (a stream cut by the last window may still be
    generating); False if they are not within SETTLE_SECONDS."""
    deadline = time.perf_counter() + SETTLE_SECONDS
    before = cpu_seconds(pids)
    while time.perf_counter() < deadline:
        time.sleep(window)
        after = cpu_seconds(pids)
        if after - before <= (idle + 0.05) * window + 2 / CLOCK_TICKS:
            return True
        before = after
    return False


def peak_growth(pids: Sequence[int], action: Callable[[], T]) -> tuple[int, bool, T]:
    """KiB by which the processes' peak RSS grew over their idle RSS while `action` ran, whether every peak
    could be reset first (else it is the peak since start), and what `action` returned."""
    idle = {pid: status_kib(pid, "VmRSS") for pid in pids}
    reset = all(reset_peak_rss(pid) for pid in pids)
    result = action()
    grown = sum(max(status_kib(pid, "VmHWM") - idle[pid], 0) for pid in pids)
    return grown, reset, result


def status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to clear_refs); False where not permitted."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


@dataclass
class Server:
    name: str
    command: list[str]
    port: int
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    ports: Mapping[str, int] = field(default_factory=dict)  # flag -> port, --port's included
    ready: tuple[str, ...] = ("/v2/health/ready",)  # the paths that answer 200 once it serves
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    ready_s: dict[str, float] = field(default_factory=dict)  # path -> seconds from start to its first 200

    def start(self, core: int) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"\n=== {time.strftime('%H:%M:%S')} {' '.join(self.command)}\n".encode())
            log.flush()
            self.started_at = time.perf_counter()
            self.process = subprocess.Popen(
                ["taskset", "-c", str(core), *self.command],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**envs.cached_bytecode(os.environ), **self.env},
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def tree(self) -> list[int]:
        return process_tree(self.pid)

    def get(self, path: str, timeout: float = 2.0) -> int:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    def wait_until(self, path: str, deadline: float) -> float:
        """Seconds from process start until `path` answers 200; raises if the server dies or time runs out."""
        while time.perf_counter() < deadline:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited with code {self.process.returncode if self.process else '?'}")
            try:
                if self.get(path) == 200:
                    self.ready_s[path] = time.perf_counter() - self.started_at
                    return self.ready_s[path]
            except OSError:
                pass
            time.sleep(0.01)
        raise TimeoutError(f"{self.name}: {path} not 200 in time")

    def log_tail(self, lines: int = 4) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])

    def stop(self, grace: float = 8.0) -> None:
        """SIGTERM the server, then SIGKILL what is left of its process group (children keep the group)."""
        if self.process is None:
            return
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        self.process = None
