"""The user's account pages: personal API tokens."""
