"""Bundled UMLS triples (train/valid/test), as PyKEEN redistributes them.

>>> sorted(p.name for p in UMLS.glob("*.txt"))
['test.txt', 'train.txt', 'valid.txt']
"""

from pathlib import Path

UMLS = Path(__file__).resolve().parent / "umls"  # a folder: train.txt, valid.txt, test.txt
