"""The two configuration files, read from YAML and validated whole: every problem at once."""
