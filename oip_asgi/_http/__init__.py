"""What the HTTP wires (the protocol's REST app and OpenAI's) share over raw ASGI: the router (route tables
under path prefixes, 404 and 405, restricted groups, the error boundary), headers, where a request lands
below a mount point, the lifespan, and hearing a client leave while a stream is answered."""
