"""Alert rules: evaluated on each poll's points and states, delivered by mail and webhook."""
