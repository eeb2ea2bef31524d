"""FLAT's encoder (Li et al. 2020): the lattice attention and its relative span positions (plain PyTorch)."""
