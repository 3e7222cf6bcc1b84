"""masking package."""
