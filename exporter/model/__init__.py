"""What the nodes said: their answers read into typed values, the network view, the snapshot."""
