"""What each poll brings from the run directories into logs, series and GPU samples, parsed out of
process.
"""
