"""Reading knowledge graphs: triples and id maps, splits, KGX, the unseen-entity policy, exclusions, bundled and downloadable datasets."""
