"""The poll: each cluster's job states and files in one agent call, its lease, watchers, push."""
