"""The generated modules match inference.proto, and importing oip_asgi (or reading a config.pbtxt) leaves grpc alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("grpc_tools")
from google.protobuf import descriptor_pb2

from oip_asgi._protobuf import _generate, inference_pb2
from tests.support.servers import ROOT, child_env

PACKAGE = ROOT / "oip_asgi"


def committed_file() -> descriptor_pb2.FileDescriptorProto:
    return descriptor_pb2.FileDescriptorProto.FromString(inference_pb2.DESCRIPTOR.serialized_pb)


def without_json_names(message: descriptor_pb2.DescriptorProto) -> None:
    """protoc's descriptor sets carry each field's json_name; the generated modules leave it out."""
    for field in message.field:
        field.ClearField("json_name")
    for inner in message.nested_type:
        without_json_names(inner)


@pytest.mark.slow
def test_the_committed_descriptor_is_the_proto_compiled(tmp_path: Path) -> None:
    """Whatever grpcio-tools is installed: the messages and the service the modules hold are the proto's."""
    compiled = descriptor_pb2.FileDescriptorSet.FromString(_generate.descriptor_set(tmp_path))
    (file,) = compiled.file
    for message in file.message_type:
        without_json_names(message)
    assert file == committed_file()


def test_the_stubs_name_every_message_field_and_method() -> None:
    messages = (PACKAGE / "_protobuf" / "inference_pb2.pyi").read_text()
    service = (PACKAGE / "grpc" / "inference_pb2_grpc.pyi").read_text()
    file = committed_file()

    def fields(message: descriptor_pb2.DescriptorProto) -> list[str]:
        nested = [name for inner in message.nested_type for name in fields(inner)]
        return [message.name, *(field.name for field in message.field), *nested]

    for message in file.message_type:
        for name in fields(message):
            assert name in messages, f"{name} is missing from inference_pb2.pyi: regenerate (see _generate.py)"
    for method in file.service[0].method:
        assert f"def {method.name}(" in service, f"{method.name} is missing from inference_pb2_grpc.pyi"


@pytest.mark.skipif(not _generate.pinned(), reason="the generators the modules were made with are not installed")
def test_regenerating_changes_nothing(tmp_path: Path) -> None:
    for name, text in _generate.generate(tmp_path).items():
        assert (PACKAGE / _generate.PLACES[name] / name).read_text() == text, (
            f"{name} differs from what the proto generates"
        )


def test_messages_live_in_a_private_pool_beside_tritonclients() -> None:
    service_pb2 = pytest.importorskip("tritonclient.grpc.service_pb2")  # registers inference.* in the default pool
    assert inference_pb2.DESCRIPTOR.pool is not service_pb2.DESCRIPTOR.pool
    request = inference_pb2.ModelInferRequest(model_name="m", raw_input_contents=[b"\0"])
    assert service_pb2.ModelInferRequest.FromString(request.SerializeToString()).model_name == "m"


@pytest.mark.slow
def test_importing_oip_asgi_does_not_import_grpc() -> None:
    code = (
        "import sys, oip_asgi, oip_asgi._hosts.cli\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'google') or m == 'oip_asgi.grpc')\n"
        "print(loaded)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_reading_a_config_pbtxt_does_not_import_grpc(tmp_path: Path) -> None:
    """A REST-only server with a model repository needs protobuf for config.pbtxt, never grpcio."""
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(
        'max_batch_size: 0\ninput [{ name: "x" data_type: TYPE_FP32 dims: [2] }]'
    )
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from oip_asgi._declarations.repository._config import read_pbtxt\n"
        f"read_pbtxt(Path({str(tmp_path / 'm' / 'config.pbtxt')!r}))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'grpc' or m.startswith('oip_asgi.grpc')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
