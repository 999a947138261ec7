"""TracIn influence for ConvE: exact factor engine, autograd/vmap references, and the driver."""

from tracegraph.kg.explain.tracin.factors import LOSSES, PARAM_ORDER, compute_factors, influence, select_layers

__all__ = ["LOSSES", "PARAM_ORDER", "compute_factors", "influence", "select_layers"]
