"""Pure values and rules. Nothing in here performs I/O."""
