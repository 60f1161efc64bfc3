"""The node health ledger: signals that blame a node, from every job, a score that fades,
a verdict, and the avoidance of bad nodes it asks clusters for."""
