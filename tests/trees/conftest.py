import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # The tensors here are tiny: on a shared 2-core machine, intra-op threads spend their time
    # waiting for each other (measured 30x slower with 2 threads under load). One thread each.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
