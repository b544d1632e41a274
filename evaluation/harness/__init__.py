"""Evaluator harness: release loading, sandbox, correctness, adoption, timing, roofline.

A library of plain functions and dataclasses; it imports nothing of the portal.
"""
