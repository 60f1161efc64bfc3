"""Live streams: the job page's WebSocket and notebooks' server-sent events."""
