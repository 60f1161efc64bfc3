"""The attacks bench/hostile.py runs beside its hostile log lines, one module each."""
