"""Fusing ranked lists (RRF, DBSF, weighted) and the fusion setting. Pure."""
