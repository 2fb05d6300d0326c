"""What the two HTTP wires (the protocol's REST app and OpenAI's) share over raw ASGI: where a request
lands below a mount point, the lifespan, and hearing a client leave while a stream is answered."""
