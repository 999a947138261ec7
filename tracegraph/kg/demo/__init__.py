"""The end-to-end demo: a synthetic biomedical graph with planted mechanisms, and its HTML report."""
