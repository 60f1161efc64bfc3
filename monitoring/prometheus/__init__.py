"""/metrics's families: the portal's health, each cluster's GPUs and queue, the running jobs'
series.
"""
