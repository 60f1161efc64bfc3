"""Who may keep a live stream open, and how many each user holds."""
