"""Compute-side clients of a flight-select storage server."""
