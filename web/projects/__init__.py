"""Projects over REST."""
