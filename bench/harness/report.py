"""Reports: a table of medians and ratios, targets met or not, and the results document (.json and .md)."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import envs, procs
from harness.rounds import Run, paired_ratio

Metrics = Mapping[str, tuple[str, str]]  # metric -> (title, "higher" or "lower" is better)


def number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def table(
    metrics: Metrics,
    medians: Mapping[str, Mapping[str, float]],
    series: Sequence[str],
    ratios: Mapping[str, Mapping[str, float | None]],
) -> str:
    """A row per metric: its median for each series, then each ratio column (label -> metric -> ratio)."""
    head = ["metric", "better", *series, *ratios]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for metric, (title, better) in metrics.items():
        cells = [title, better, *(number(medians.get(name, {}).get(metric)) for name in series)]
        for column in ratios.values():
            ratio = column.get(metric)
            cells.append(number(ratio) + ("x" if ratio else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paired_targets(run: Run, ratios: Mapping[str, tuple[str, str, str, float, str]]) -> list[dict[str, Any]]:
    """Each target {label: (ours, theirs, metric, bar, better)} judged on the median of its per-round ratios."""
    rows = [
        {"target": label, "value": paired_ratio(run.samples[ours].get(metric, []), run.samples[theirs].get(metric, [])),
         "bar": bar, "better": better}
        for label, (ours, theirs, metric, bar, better) in ratios.items()
        if ours in run.samples and theirs in run.samples
    ]  # fmt: skip
    return judged(rows)


def judged(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each target row ({"value", "bar", "better"}) with "met": None when not measured."""
    for row in rows:
        value, bar = row["value"], row["bar"]
        row["met"] = None if value is None else (value >= bar if row["better"] == "higher" else value < bar)
    return rows


def targets_table(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = ["| target | ours | met |", "|---|---|---|"]
    for row in rows:
        met = {None: "not measured", True: "yes", False: "no"}[row["met"]]
        lines.append(f"| {row['target']} | {number(row['value'])} | {met} |")
    return "\n".join(lines)


def not_measured(errors: Mapping[str, Mapping[str, str]]) -> list[str]:
    return [f"- {name} {what}: {why}" for name, failures in errors.items() for what, why in failures.items()]


def command(prog: str, argv: Sequence[str]) -> str:
    return " ".join(["python3", prog, *(shlex.quote(arg) for arg in argv)])


def document(command: str, started: float, settings: Mapping[str, Any], run: Run, **more: Any) -> dict[str, Any]:
    """The results document every workload writes: what ran, when, how, and its raw samples."""
    return {
        "command": command,
        "commit": git_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "elapsed_s": round(time.time() - started, 1),
        "settings": dict(settings),
        **more,
        "samples": run.samples,
        "errors": run.errors,
        "details": run.details,
    }


def write(folder: Path, label: str, title: str, document: Mapping[str, Any], markdown: str) -> None:
    """<folder>/<label>.json and .md (the title, the tables, what was not measured), and the tables printed."""
    notes = not_measured(document.get("errors", {}))
    missing = "\nNot measured:\n\n" + "\n".join(notes) + "\n" if notes else ""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{label}.json").write_text(json.dumps(document, indent=1, default=str) + "\n")
    (folder / f"{label}.md").write_text(f"# {title}\n\nCommand: `{document['command']}`\n\n{markdown}\n{missing}")
    print(markdown)
    if notes:
        print("\nNot measured:\n" + "\n".join(notes))
    print(f"written: {folder / label}.json, {folder / label}.md", flush=True)


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def machine() -> dict[str, object]:
    memory = next(
        line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
    )
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(int(memory) / 2**20, 1),
        "kernel": platform.release(),
        "os": platform.platform(),
        "server_core": procs.SERVER_CORE,
        "load_core": procs.LOAD_CORE,
    }


def git_commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(envs.ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    return done.stdout.strip() or "unknown"
