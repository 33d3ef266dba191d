"""Static renderers: pure functions from lens data to SVG / text, used as widget fallbacks."""
