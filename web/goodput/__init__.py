"""Goodput over REST: a job's efficiency cards and idle ladder, a project's weeks."""
