"""The droid-mcp surface (``shared/spec/droid-mcp.md``)."""
