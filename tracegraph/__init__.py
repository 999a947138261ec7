"""tracegraph: ConvE link prediction with exact TracIn explanations, and GT-SSL on geometric trees."""

__version__ = "0.1.0"
