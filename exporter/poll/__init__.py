"""Polling the nodes: the HTTP engine, one node's poll, the cycle, its results, its memory."""
