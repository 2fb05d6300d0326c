"""The protocol's messages under their public name: generated in `oip_asgi._protobuf` (protobuf alone),
where the reader of a repository's config.pbtxt finds them without the gRPC wire."""

from oip_asgi._protobuf.inference_pb2 import *  # noqa: F403
from oip_asgi._protobuf.inference_pb2 import DESCRIPTOR as DESCRIPTOR
