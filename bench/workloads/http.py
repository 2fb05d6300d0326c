"""W1-W9 over REST: set up the servers, then interleaved rounds of every workload on every server (bench/README.md)."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import envs, loads, procs, report, rounds, servers
from harness.rounds import Run

from workloads import http_bodies, http_report
from workloads.http_bodies import Bodies, Workload

MIN_REQUESTS = 10
LONG_RUN_SECONDS = 20.0
MLP_WORKLOADS = ("W8", "W8u")
W9_SERVERS = ("ours", "base", "mlserver", "pytriton")
W9_FILES = envs.BENCH / "w9_files.py"
BATCH_ROWS = 32  # ours' max_batch_size in W8 (apps/ours_app.py)
KEYS = ("W1", "W1s", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W8u", "W9", *http_bodies.W9_KEYS)


@dataclass
class Settings:
    rounds: int
    seconds: float
    warmup: float
    import_repeat: int
    servers: tuple[str, ...]
    only: tuple[str, ...]
    ours_python: Path | None
    base: Path | None
    results: Path
    label: str


@dataclass
class Target:
    peer: servers.Peer
    python: Path
    env: dict[str, str] = field(default_factory=dict)


def post(port: int, path: str, workload: Workload, body: bytes) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": workload.content_type}
    if workload.header_length is not None:
        headers[http_bodies.HEADER_LENGTH] = str(workload.header_length)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def model_path(server: str, workload: Workload) -> str | None:
    # `base` is ours at another commit: it serves what ours serves.
    serves_as = "ours" if server in ("base", "mounted") else server
    if workload.servers is not None and serves_as not in workload.servers:
        return None
    model = workload.floor_model if server == "floor" else workload.model
    return None if model is None else f"/v2/models/{model}/infer"


def validate(server: str, port: int, path: str, workload: Workload, bodies: Bodies) -> str | None:
    body = workload.body_path.read_bytes()
    status, headers, answer = post(port, path, workload, body)
    if status != 200:
        return f"HTTP {status}: {answer[:200].decode(errors='replace')}"
    if server == "floor":
        expected = bodies.fixed_response.read_bytes() if workload.floor_model == "fixed" else body
        return http_bodies.check_fixed(expected)(headers, answer)
    try:
        return workload.check(headers, answer)
    except (ValueError, KeyError, TypeError) as exc:
        return f"unreadable answer ({exc}): {answer[:200].decode(errors='replace')}"


def measure_memory(server: str, target: procs.Server, bodies: Bodies, run: Run) -> None:
    workload = bodies.w4
    path = model_path(server, workload)
    if path is None:
        return
    pids = target.tree()
    sent = workload.body_path.read_bytes()
    grown_kib, reset, (status, headers, answer) = procs.peak_growth(
        pids, lambda: post(target.port, path, workload, sent)
    )
    if status != 200:
        run.fail(server, "W4", f"HTTP {status}: {answer[:200].decode(errors='replace')}")
        return
    error = (
        (answer != sent and "echo differs")
        if server == "floor"
        else http_bodies.check_w4(workload, headers, answer, sent)
    )
    if error:
        run.fail(server, "W4", error)
        return
    run.add(server, "W4.rss_over_payload", grown_kib * 1024 / workload.payload_bytes)
    run.add(server, "W4.rss_grown_mib", grown_kib / 1024)
    run.details.append(
        {"server": server, "workload": "W4", "processes": len(pids), "peak_reset": reset, "grown_kib": grown_kib}
    )


def wrk(port: int, path: str, workload: Workload, connections: int, seconds: float) -> loads.LoadResult:
    url = f"http://127.0.0.1:{port}{path}"
    return loads.wrk(url, workload.body_path, workload.content_type, connections, seconds, workload.header_length)


def measure_load(server: str, target: procs.Server, workload: Workload, settings: Settings, run: Run) -> None:
    path = model_path(server, workload)
    assert path is not None
    for connections in workload.concurrency:
        if settings.warmup > 0:
            wrk(target.port, path, workload, connections, settings.warmup)
        seconds = settings.seconds
        while True:
            # Requests a finished run left in flight must not be billed to this one (cpu_of waits for idle).
            cpu, result = procs.cpu_of(
                target.tree(), lambda c=connections, s=seconds: wrk(target.port, path, workload, c, s)
            )
            # A slow server gets one longer run, so a few requests in flight at the end weigh little.
            if result.requests >= MIN_REQUESTS or seconds > settings.seconds:
                break
            seconds = max(settings.seconds, LONG_RUN_SECONDS)
        if result.requests == 0:
            run.fail(server, workload.key, f"no request completed in {seconds:g} s at c={connections}")
            return
        if result.errors > 0.01 * result.requests:
            run.fail(server, workload.key, f"{result.errors} errors in {result.requests} requests at c={connections}")
            return
        key = f"{workload.key}.%s_c{connections}"
        run.add(server, key % "rps", result.rate)
        run.add(server, key % "cpu_ms", cpu * 1000 / result.requests)
        run.add(server, key % "mbps", result.rate * workload.payload_bytes / 1e6)
        run.add(server, key % "p50_ms", result.p50_ms)
        run.add(server, key % "p99_ms", result.p99_ms)
        run.details.append({
            "server": server, "workload": workload.key, "connections": connections, "requests": result.requests,
            "seconds": result.seconds, "cpu_s": cpu, "p50_ms": result.p50_ms, "p99_ms": result.p99_ms,
        })  # fmt: skip
        print(
            f"  {server:9} {workload.key} c={connections:<2} {result.rate:9.1f} req/s  "
            f"{cpu * 1000 / result.requests:8.3f} ms CPU/req  p50 {result.p50_ms:.2f} ms",
            flush=True,
        )


def make_server(name: str, target: Target, bodies: Bodies, settings: Settings) -> procs.Server:
    args = []
    if name == "floor":
        args += ["--fixed-response", str(bodies.fixed_response)]
    if name == "mounted":
        args += ["--host", "mounted"]
    if name in (*http_bodies.BATCHING_SERVERS, "base") and any(key in settings.only for key in MLP_WORKLOADS):
        args += ["--mlp-weights", str(bodies.mlp_weights)]
    if name in W9_SERVERS and bodies.w9_files is not None:
        args += ["--w9-files", str(bodies.w9_files)]
    log = settings.results / "raw" / "logs" / f"{name}.log"
    return servers.app_server(name, target.peer, target.python, log, args, target.env)


def measure_batch_call(target: Target, bodies: Bodies, run: Run) -> None:
    """W8's latency target is built from one model call on a full batch: time it in-process, on the server's core."""
    command = ["taskset", "-c", str(procs.SERVER_CORE), str(target.python), str(envs.APPS / "_mlp.py")]
    command += [str(bodies.mlp_weights), "--rows", str(BATCH_ROWS)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        run.fail("ours", "W8.batch_call", done.stderr.strip()[-300:])
        return
    call_ms = json.loads(done.stdout)["call_ms"]
    run.add("ours", "W8.batch_call_ms", call_ms)
    print(f"  ours      W8 one MLP call on {BATCH_ROWS} rows in-process: {call_ms * 1000:.1f} us", flush=True)


def train_w9_files(python: Path, directory: Path) -> Path:
    """W9's model files, trained once (in the `ours` environment, which has every library) and then reused."""
    if not (directory / "expected.npz").exists():
        print(f"training W9's model files into {directory}", flush=True)
        done = subprocess.run(
            [str(python), str(W9_FILES), "train", str(directory)],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"cannot train W9's model files: {done.stderr.strip()[-1000:]}")
    return directory


def measure_library_calls(target: Target, bodies: Bodies, run: Run) -> None:
    """W9's overhead target subtracts the library's own call: CPU per call on [1,100] in-process, on core 0."""
    assert bodies.w9_files is not None
    command = [
        "taskset", "-c", str(procs.SERVER_CORE), str(target.python), str(W9_FILES), "time", str(bodies.w9_files)
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        run.fail("ours", "W9.library_call", done.stderr.strip()[-300:])
        return
    times = json.loads(done.stdout)["call_ms"]
    for letter, (kind, *_) in http_bodies.W9_KINDS.items():
        run.add("ours", f"W9{letter}1.call_ms", times[kind])
    print("  ours      W9 one library call on [1,100] in-process: "
          + ", ".join(f"{kind} {ms * 1000:.1f} us" for kind, ms in times.items()), flush=True)  # fmt: skip


def measure_server(name: str, target: Target, bodies: Bodies, settings: Settings, run: Run) -> None:
    if name == "ours" and "W8" in settings.only:
        measure_batch_call(target, bodies, run)
    if name == "ours" and bodies.w9_files is not None:
        measure_library_calls(target, bodies, run)
    try:
        with servers.running(make_server(name, target, bodies, settings)) as server:
            health, model = server.ready
            run.add(name, "W5.ready_s", server.ready_s[health])
            run.add(name, "W5.model_ready_s", server.ready_s[model])
            measure_workloads(name, server, bodies, settings, run)
    except servers.NotReady as exc:
        run.fail(name, "server", str(exc))


def measure_workloads(name: str, server: procs.Server, bodies: Bodies, settings: Settings, run: Run) -> None:
    # One small request first, so W4's "idle" is a server that has answered before.
    validate(name, server.port, model_path(name, bodies.workloads["W1"]) or "", bodies.workloads["W1"], bodies)
    if "W4" in settings.only:
        measure_memory(name, server, bodies, run)
    for workload in bodies.workloads.values():
        path = model_path(name, workload)
        if workload.key not in settings.only or path is None:
            continue
        if not server.alive():
            run.fail(name, workload.key, "server died")
            continue
        try:
            # A server may load its models one by one (PyTriton does): wait for this workload's own.
            server.wait_until(path.removesuffix("/infer") + "/ready", time.perf_counter() + 120)
        except (RuntimeError, TimeoutError) as exc:
            run.fail(name, workload.key, f"model not ready: {exc}")
            continue
        error = validate(name, server.port, path, workload, bodies)
        if error:
            run.fail(name, workload.key, error)
            continue
        measure_load(name, server, workload, settings, run)


def prepare(settings: Settings, run: Run) -> dict[str, Target]:
    peers = {name: servers.PEERS[name] for name in settings.servers}
    if settings.ours_python is not None:  # ours and the floor with this interpreter, not the `ours` venv
        pythons = {name: settings.ours_python for name, peer in peers.items() if peer.env == "ours"}
        peers = {name: peer for name, peer in peers.items() if peer.env != "ours"}
    else:
        pythons = {}
    installed, failures = servers.install(peers)
    pythons.update(installed)
    for name, reason in failures.items():
        run.fail(name, "server", reason)
    ready: dict[str, Target] = {}
    for name in settings.servers:
        if name not in pythons:
            continue
        target = Target(servers.PEERS[name], pythons[name])
        if name == "base":
            if settings.base is None:
                run.fail(name, "server", "needs --base DIR, a checkout of the commit to compare with")
                continue
            target.env["PYTHONPATH"] = str(settings.base)  # its oip_asgi before the installed one
        try:
            # The first import also writes the bytecode caches, so cold starts below do not pay for compiling.
            envs.import_seconds(target.python, target.peer.imports, 1)
        except RuntimeError as exc:
            run.fail(name, "server", str(exc))
            continue
        ready[name] = target
    return ready


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench/run.py", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round, 1 s per load run, no warm-up")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 5, quick 1)")
    parser.add_argument("--seconds", type=float, help="duration of each timed wrk run (default 5, quick 1)")
    parser.add_argument("--warmup", type=float, help="untimed wrk run before each timed one (default 1, quick 0)")
    parser.add_argument(
        "--servers", default=",".join(servers.ORDER), help="comma-separated subset of " + ",".join(servers.ORDER)
    )
    parser.add_argument("--workloads", default="W1,W1s,W2,W3,W4,W5,W6,W7,W8,W8u", help="comma-separated subset")
    parser.add_argument(
        "--ours-python", type=Path, help="run ours and the floor with this interpreter instead of a venv"
    )
    parser.add_argument(
        "--base", type=Path, help="serve 'base' from this checkout of oip-asgi (git worktree add --detach DIR REF)"
    )
    parser.add_argument("--results", type=Path, default=envs.BENCH / "results", help="output folder")
    parser.add_argument("--report", type=Path, help="only summarize a recorded run again (its .json), no measuring")
    args = parser.parse_args(argv)
    if args.report is not None:
        publish(json.loads(args.report.read_text()), args.report.with_suffix(""))
        return
    names = tuple(s for s in servers.ORDER if s in args.servers.split(","))
    unknown = set(args.servers.split(",")) - set(servers.ORDER)
    if unknown:
        parser.error(f"unknown servers {sorted(unknown)}; choose from {', '.join(servers.ORDER)}")
    only = args.workloads.split(",")
    if "W9" in only:
        only += http_bodies.W9_KEYS  # W9 is one workload per file kind and request size
    if "W8" in only and "W8u" not in only:
        only.append("W8u")  # W8's targets compare ours batched with ours unbatched: one comes with the other
    settings = Settings(
        rounds=args.rounds or (1 if args.quick else 5),
        seconds=args.seconds or (1.0 if args.quick else 5.0),
        warmup=args.warmup if args.warmup is not None else (0.0 if args.quick else 1.0),
        import_repeat=3 if args.quick else 7,
        servers=names,
        only=tuple(only),
        ours_python=args.ours_python,
        base=args.base.resolve() if args.base is not None else None,
        results=args.results,
        label="quick" if args.quick else "full",
    )
    if os.cpu_count() is not None and (os.cpu_count() or 0) < 2:
        raise SystemExit("needs at least 2 cores: the server is pinned to core 0, wrk to core 1")
    loads.ensure_wrk()
    run = Run()
    targets = prepare(settings, run)
    body_folder = settings.results / "raw" / "bodies"
    w9_files = None
    if any(key in settings.only for key in http_bodies.W9_KEYS):
        # Trained with ours' libraries; MLServer's and PyTriton's environments pin the same releases (envs.py).
        ours = targets.get("ours")
        w9_files = train_w9_files(ours.python if ours else envs.venv_python("ours"), body_folder / "w9")
    bodies = http_bodies.build(body_folder, w9_files=w9_files)
    versions = {name: envs.versions(t.python, t.peer.distributions) for name, t in targets.items()}
    started = time.time()

    if "W5" in settings.only:
        # The servers take turns, so the i-th import times are taken side by side, as a round's values are.
        for _ in range(settings.import_repeat):
            for name, target in targets.items():
                for seconds in envs.import_seconds(target.python, target.peer.imports, 1):
                    run.add(name, "W5.import_s", seconds)

    for _, order in rounds.each_round(settings.rounds, list(targets)):
        for name in order:
            measure_server(name, targets[name], bodies, settings, run)

    write_results(settings, run, versions, argv, time.time() - started)


def write_results(
    settings: Settings, run: Run, versions: dict[str, dict[str, str]], argv: list[str], elapsed: float
) -> None:
    document = {
        "command": report.command("bench/run.py", argv),
        "commit": report.git_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "elapsed_s": round(elapsed, 1),
        "settings": {"rounds": settings.rounds, "seconds": settings.seconds, "warmup": settings.warmup,
                     "import_repeat": settings.import_repeat, "workloads": list(settings.only)},
        "machine": report.machine(),
        "versions": versions,
        "errors": run.errors,
        "samples": run.samples,
        "runs": run.details,
    }  # fmt: skip
    settings.results.mkdir(parents=True, exist_ok=True)
    publish(document, settings.results / settings.label)


def publish(document: dict[str, Any], stem: Path) -> None:
    """Medians, ratios, targets, the table and the chart from a run's samples, into <stem>.json/.md/.png.

    `--report <stem>.json` runs this again on recorded samples, after a change to how they are summarized.
    """
    samples, errors, round_count = document["samples"], document["errors"], document["settings"]["rounds"]
    names = [s for s in servers.ORDER if s in samples or s in errors]
    classification = envs.ROOT / "oip_asgi" / "_classification.py"
    goals = http_report.targets(samples, classification.read_text() if classification.exists() else None)
    document["medians"] = rounds.medians(samples)
    document["ratios"] = {
        other: {m.key: http_report.ratio(samples, m.key, other) for m in http_report.METRICS}
        for other in names
        if other != "ours"
    }
    document["targets"] = [{"target": t.text, "measured": t.measured, "met": t.met} for t in goals]
    stem.with_suffix(".json").write_text(json.dumps(document, indent=1) + "\n")
    table = http_report.markdown(samples, names, round_count, goals, errors)
    title = f"# Benchmark results ({stem.name})\n\nCommand: `{document['command']}`\n\n"
    stem.with_suffix(".md").write_text(title + table)
    caption = f"oip-asgi vs peers ({stem.name}, medians of {round_count} round(s))"
    http_report.chart(document["medians"], names, stem.with_suffix(".png"), caption)
    print("\n" + table)
    print(f"written: {stem}.json, {stem}.md, {stem}.png", flush=True)
