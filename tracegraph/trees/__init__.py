"""Geometric trees: SWC/graph/image -> rooted trees, 3rd-order paths, the SGMP encoder, GT-SSL.

data.py (reading, synthetic classes, PyG Data) · skeleton.py (images) · paths.py · cache.py ·
sgmp.py (encoder) · gtssl.py (objectives) · train.py (pretrain / finetune loops) · probe.py.
"""
