"""Built-in backends. Each module imports its library lazily, inside methods."""
