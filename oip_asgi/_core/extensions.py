"""Triton's extensions, one entry each: what each one is on every wire, written once.

An entry names the extension as server metadata lists it, the restricted API group its endpoints
belong to (Triton's ``--http-restricted-api`` and ``--grpc-restricted-protocol`` names), its REST paths
below the mount point (``/v2``) with the operation each method calls, and its gRPC RPCs. One this
server does not offer carries what a client is told instead: its paths and RPCs answer that (HTTP 501,
gRPC UNIMPLEMENTED; `unsupported.py`). REST's route table and its OpenAPI document, gRPC's groups and
refusals, and server metadata's list are built from here.

To offer one, give its entry the paths and RPCs it serves, each path naming its operation, drop its
`not_offered`, and write the REST endpoints (by operation) and gRPC handlers (by RPC) that answer
them (docs/architecture.md, "A new Triton extension").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# A model's paths: the unversioned name means the newest version.
MODEL = "/models/{name}[/versions/{version}]"
# What a client of an extension that is not offered can call: Triton's GET and POST, on any path below it.
_REFUSED = ("GET", "POST")


@dataclass(frozen=True, slots=True)
class RestPath:
    """A REST path (a pattern below the mount point: ``{name}`` one segment, ``{name:path}`` the rest,
    ``[...]`` optional), the methods it takes and the operation they call (its endpoint's name)."""

    pattern: str
    operation: str = ""
    methods: tuple[str, ...] = ("GET",)


@dataclass(frozen=True, slots=True)
class Extension:
    """One of Triton's extensions, on every wire. `listed`: whether server metadata lists it, when offered
    (``"with a repository"``: where the app serves a model repository; ``"with shared memory"``: where the
    platform has POSIX shared memory; as `ServerCore` decides). Of one not offered, a path that names an
    operation, and an RPC in `answering`, still answer; the others say `not_offered`."""

    name: str
    group: str
    paths: tuple[RestPath, ...] = ()
    rpcs: tuple[str, ...] = ()
    listed: Literal["always", "with a repository", "with shared memory", "never"] = "always"
    not_offered: str = ""  # what a client is told instead, for an extension this server does not offer
    # Of one not offered: the RPCs that answer all the same (as its paths that name an operation do).
    answering: tuple[str, ...] = ()

    @property
    def offered(self) -> bool:
        return not self.not_offered


_SEND_IN_THE_BODY = (
    "send the tensors in the request instead: as binary data after the JSON (REST's binary tensor data "
    "extension; tritonclient: set_data_from_numpy(array, binary_data=True)) or in raw_input_contents (gRPC)"
)

REGISTRY = (
    # Parts of inference, with no endpoints of their own.
    Extension("binary_tensor_data", "inference"),
    Extension("classification", "inference"),
    # A flat JSON object in and out, REST only; server-sent events for the stream. Triton does not list it.
    Extension(
        "generate",
        "inference",
        paths=(
            RestPath(MODEL + "/generate", "model_generate", ("POST",)),
            RestPath(MODEL + "/generate_stream", "model_generate_stream", ("POST",)),
        ),
        listed="never",
    ),
    Extension(
        "model_configuration",
        "model-config",
        paths=(RestPath(MODEL + "/config", "model_config"),),
        rpcs=("ModelConfig",),
    ),
    Extension(
        "statistics",
        "statistics",
        # Every model's statistics; as in Triton, a model named "stats" has no metadata URL.
        paths=(RestPath("/models/stats", "model_statistics"), RestPath(MODEL + "/stats", "model_statistics")),
        rpcs=("ModelStatistics",),
    ),
    Extension(
        "model_repository",
        "model-repository",
        paths=(
            RestPath("/repository/index", "repository_index", ("POST",)),
            RestPath("/repository/models/{name}/load", "repository_model_load", ("POST",)),
            RestPath("/repository/models/{name}/unload", "repository_model_unload", ("POST",)),
        ),
        rpcs=("RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload"),
        listed="with a repository",
    ),
    # The unload's parameter that unloads the models loaded along with an ensemble too: Triton lists it apart.
    Extension("model_repository(unload_dependents)", "model-repository", listed="with a repository"),
    Extension(
        "system_shared_memory",
        "shared-memory",
        paths=(
            RestPath("/systemsharedmemory[/region/{region}]/status", "system_shared_memory_status"),
            RestPath("/systemsharedmemory/region/{region}/register", "system_shared_memory_register", ("POST",)),
            RestPath("/systemsharedmemory/register", "system_shared_memory_register", ("POST",)),
            RestPath("/systemsharedmemory[/region/{region}]/unregister", "system_shared_memory_unregister", ("POST",)),
        ),
        rpcs=("SystemSharedMemoryStatus", "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister"),
        listed="with shared memory",
    ),
    # Not offered: no GPU. Its status and unregister answer as Triton built without GPUs does (no region is
    # registered, so there is nothing to tell or to unregister): clients that clear both kinds of region go on.
    Extension(
        "cuda_shared_memory",
        "shared-memory",
        paths=(
            RestPath("/cudasharedmemory[/region/{region}]/status", "cuda_shared_memory_status"),
            RestPath("/cudasharedmemory[/region/{region}]/unregister", "cuda_shared_memory_unregister", ("POST",)),
            RestPath("/cudasharedmemory[/{rest:path}]", methods=_REFUSED),
        ),
        rpcs=("CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister"),
        answering=("CudaSharedMemoryStatus", "CudaSharedMemoryUnregister"),
        not_offered="this server does not offer Triton's CUDA shared memory extension (tensors in GPU memory "
        "registered with the server): it runs no GPU code; use system shared memory "
        "(tritonclient.utils.shared_memory, perf_analyzer --shared-memory system), or "
        f"{_SEND_IN_THE_BODY}",
    ),
    # Triton's trace settings, driving OpenTelemetry spans (trace_settings.py, tracing.py): global and per model.
    Extension(
        "trace",
        "trace",
        paths=(
            RestPath("[/models/{name}]/trace/setting", "trace_settings"),
            RestPath("[/models/{name}]/trace/setting", "update_trace_settings", ("POST",)),
        ),
        rpcs=("TraceSetting",),
    ),
    # Triton's log settings, over Python's logging (log_settings.py).
    Extension(
        "logging",
        "logging",
        paths=(RestPath("/logging", "log_settings"), RestPath("/logging", "update_log_settings", ("POST",))),
        rpcs=("LogSettings",),
    ),
)


def listed(*, repository: bool, shared_memory: bool) -> list[str]:
    """The extensions server metadata lists: those always listed, and those of what this server has."""
    has = {"always": True, "with a repository": repository, "with shared memory": shared_memory, "never": False}
    return sorted(extension.name for extension in REGISTRY if extension.offered and has[extension.listed])
