"""A faithful stand-in for the three upstream operations, served over real HTTP.

Deterministic from a seed and driven by its own clock, so the demo can run faster than real
time and tests can step time explicitly. Plain Python: no Django.
"""
