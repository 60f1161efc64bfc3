"""The (x, y) series behind every chart: blocks, chunks, compaction, appends, overwrites,
downsampled reads.
"""
