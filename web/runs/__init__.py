"""A project's runs table and compare view, as pages and over REST."""
