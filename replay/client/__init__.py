"""One request: HTTP session and connector, request bodies, SSE parsing, server probes."""
