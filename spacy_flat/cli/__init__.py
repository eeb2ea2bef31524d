"""Tooling around the component: conversion, evaluation, calibration, schedules,
project assets and the command line (`python -m spacy flat …`, also `python -m spacy_flat …`).

Modules here may import anything in the package; nothing in the package imports
`cli/`.
"""
