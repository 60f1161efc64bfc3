"""The alert pages: the user's alerts and the rules they set."""
