"""ConvE and everything that trains and queries it: loss, batches, training loop, schedules, presets, tuning, evaluation, prediction, model files and importers."""
