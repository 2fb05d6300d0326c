"""The protocol's protobuf messages (generated from inference.proto), needed by the gRPC wire and by the
reader of a model repository's config.pbtxt alike: protobuf alone, never grpcio."""
