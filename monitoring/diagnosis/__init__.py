"""Why an attempt ended, from its Slurm state and log tail against one table of rules, and what
follows.
"""
