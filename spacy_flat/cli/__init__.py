"""Tooling around the component: conversion, evaluation, schedules, project assets and the command line."""
