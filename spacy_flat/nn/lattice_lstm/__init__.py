"""The Lattice LSTM (Zhang & Yang 2018): the encoder, its word schedule, its recurrence and its
hand-written backward through time (plain PyTorch)."""
