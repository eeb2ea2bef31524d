"""Training around spaCy's loop: the configs' learning-rate schedule.

Modules here may import anything in the package except `cli/`.
"""
