"""Five real neuron morphologies (SWC), as the navis package redistributes them."""
