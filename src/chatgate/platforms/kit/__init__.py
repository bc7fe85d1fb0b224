"""What every adapter is built from: ordered concurrent intake lanes and shared helpers."""
