"""One attempt's data over REST: log byte ranges and metric series."""
