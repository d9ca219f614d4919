"""A two-node ``ray.cluster_utils.Cluster`` for the batch tests that place work on several nodes (a fixture of
tests/conftest.py: Ray is imported only where a test asks for it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ray.cluster_utils import Cluster


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[Cluster]:
    """A head and one worker node, one CPU each, no dashboard, with the driver connected; shut down after the
    module."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()
