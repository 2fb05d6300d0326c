"""The REST wire: the ASGI app that translates HTTP and JSON to the core and back."""
