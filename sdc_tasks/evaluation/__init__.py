"""Evaluation of a masked file against its original: pairing, the metric families, linkage and categorical measures."""
