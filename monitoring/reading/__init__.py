"""Reading training output into (step, values) points: pure, stdlib and numpy only, no Django."""
