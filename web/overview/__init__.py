"""The staff overview: every project's budget pace, the week's goodput and waste, idle policies."""
