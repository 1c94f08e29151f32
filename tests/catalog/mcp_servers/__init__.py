"""MCP servers the discovery tests start as real processes (stdio, Streamable HTTP or the
deprecated HTTP+SSE transport).

``changing.py`` and ``paged.py`` are written with the official SDK (``MCPServer``, the v2
name of FastMCP, and the low-level ``Server``); ``broken.py`` misbehaves on purpose below
the SDK (it never answers, writes junk, or offers an unknown protocol version), which no
SDK server can be made to do; ``legacy_sse.py`` is a 2024-11-05 HTTP+SSE server written
with the standard library only, as servers of that time were.
"""
