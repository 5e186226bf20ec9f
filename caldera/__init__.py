"""Caldera: a batch system for machine learning on Kubernetes that speaks Volcano's API."""

__version__ = "0.1.0"
