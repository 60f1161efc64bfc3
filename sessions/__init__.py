"""Interactive sessions: a JupyterLab job opened through the portal (docs/sessions.md)."""
