"""Chorus: collective communication for data-parallel training.

``import chorus.torch`` registers the torch.distributed backend "chorus".
"""

__all__ = []
