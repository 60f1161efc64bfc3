"""The HTTP layer: every page, form, REST endpoint and live stream, above the domain apps."""
