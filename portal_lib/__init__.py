"""Helpers with no knowledge of the portal's apps: field encryption, static finders, errors."""
