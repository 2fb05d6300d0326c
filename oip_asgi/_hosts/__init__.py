"""What runs the wires: the serve command, Starlette mounting and the adapters' integration API."""
