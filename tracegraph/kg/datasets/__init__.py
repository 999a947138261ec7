"""Bundled UMLS triples (train/valid/test), as PyKEEN redistributes them."""
