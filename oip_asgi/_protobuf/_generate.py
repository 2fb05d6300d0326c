"""Regenerate the Python modules of inference.proto: ``python oip_asgi/_protobuf/_generate.py``.

Run it from the repository root in an environment holding the pinned generators below::

    python -m venv /tmp/protoc && /tmp/protoc/bin/pip install grpcio-tools==1.66.2 mypy-protobuf==3.6.0
    /tmp/protoc/bin/python oip_asgi/_protobuf/_generate.py

grpcio-tools 1.66 (protoc 27.2) is kept on purpose: generated code needs a protobuf runtime at least
as new as its protoc and a grpcio at least as new as its grpcio-tools, so the older the generator,
the more installations the ``grpc`` extra fits (protobuf>=5.27.2, grpcio>=1.66.2).

The message descriptors go to a private descriptor pool, not protobuf's default one: tritonclient,
KServe and others register the same ``inference.*`` names from their own files, and two such files
in the default pool make the second import fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

GRPCIO_TOOLS = "1.66.2"
MYPY_PROTOBUF = "3.6.0"
PROTO = "oip_asgi/_protobuf/inference.proto"
# The messages beside the proto (protobuf alone: the config.pbtxt reader needs them too); the service stubs
# in the gRPC wire, which alone imports grpcio.
PLACES = {
    "inference_pb2.py": "_protobuf",
    "inference_pb2.pyi": "_protobuf",
    "inference_pb2_grpc.py": "grpc",
    "inference_pb2_grpc.pyi": "grpc",
}
MODULES = ("inference_pb2.py", "inference_pb2.pyi", "inference_pb2_grpc.py", "inference_pb2_grpc.pyi")
ROOT = Path(__file__).resolve().parents[2]
_DEFAULT_POOL = "_descriptor_pool.Default().AddSerializedFile("
_PRIVATE_POOL = "_descriptor_pool.DescriptorPool().AddSerializedFile("


def pinned() -> bool:
    """Whether this environment has the generator versions the committed modules were made with."""
    try:
        return metadata.version("grpcio-tools") == GRPCIO_TOOLS and metadata.version("mypy-protobuf") == MYPY_PROTOBUF
    except metadata.PackageNotFoundError:
        return False


def generate(output: Path) -> dict[str, str]:
    """The four modules generated from the proto, written under `output`; their texts by file name."""
    bin_dir = str(Path(sys.executable).parent)  # protoc-gen-mypy and protoc-gen-mypy_grpc live there
    command = [
        sys.executable, "-m", "grpc_tools.protoc", "-I", str(ROOT),
        f"--python_out={output}", f"--mypy_out={output}", f"--grpc_python_out={output}", f"--mypy_grpc_out={output}",
        PROTO,
    ]  # fmt: skip
    _run(command, env={**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")})
    texts: dict[str, str] = {}
    for name in MODULES:
        path = output / "oip_asgi" / "_protobuf" / name
        text = path.read_text()
        if name == "inference_pb2.py":
            if _DEFAULT_POOL not in text:
                raise RuntimeError(f"{name}: the generator no longer adds the file to the default pool as expected")
            text = text.replace(_DEFAULT_POOL, _PRIVATE_POOL)
        texts[name] = text
    return texts


def descriptor_set(output: Path) -> bytes:
    """The proto compiled by this environment's protoc, as a serialized FileDescriptorSet."""
    target = output / "inference.desc"
    _run([sys.executable, "-m", "grpc_tools.protoc", "-I", str(ROOT), f"--descriptor_set_out={target}", PROTO])
    return target.read_bytes()


def _run(command: list[str], env: dict[str, str] | None = None) -> None:
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")


def main() -> None:
    if not pinned():
        print(
            f"oip_asgi/_protobuf/_generate.py needs grpcio-tools=={GRPCIO_TOOLS} and mypy-protobuf=={MYPY_PROTOBUF}",
            file=sys.stderr,
        )
        sys.exit(2)
    with tempfile.TemporaryDirectory() as directory:
        texts = generate(Path(directory))
    for name, text in texts.items():
        (ROOT / "oip_asgi" / PLACES[name] / name).write_text(text)
        print(f"wrote oip_asgi/{PLACES[name]}/{name}")


if __name__ == "__main__":
    main()
