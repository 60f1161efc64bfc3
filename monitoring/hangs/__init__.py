"""Hangs and stragglers: each rank's progress, when an attempt is hung, its stacks, what the page
shows.
"""
