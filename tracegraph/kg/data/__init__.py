"""Reading knowledge graphs: triples and id maps, splits, KGX, bundled and downloadable datasets, importers."""
