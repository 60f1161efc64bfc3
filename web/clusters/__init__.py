"""Cluster pages and the clusters API: partitions, nodes, queue, drain."""
