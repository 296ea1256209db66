"""The speed and resilience measurements (see README.md here); each script runs on its own."""
