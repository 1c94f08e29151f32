"""MCP servers the discovery tests start as real processes (stdio or Streamable HTTP).

``changing.py`` and ``paged.py`` are written with the official SDK (``MCPServer``, the v2
name of FastMCP, and the low-level ``Server``); ``broken.py`` misbehaves on purpose below
the SDK (it never answers, writes junk, or offers an unknown protocol version), which no
SDK server can be made to do.
"""
