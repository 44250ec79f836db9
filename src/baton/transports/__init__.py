"""How callers reach Baton: stdio (the SDK's) and Streamable HTTP with bearer auth."""
