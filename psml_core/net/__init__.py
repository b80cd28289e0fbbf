"""The network model of the sim backend: fair-shared links, delay processes, cross-traffic."""

from psml_core.net.network import FairShareNetwork, max_min_rates

__all__ = ["FairShareNetwork", "max_min_rates"]
