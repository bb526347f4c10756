"""The console's widgets, one per module; their styles are in ``gateway/tui/app.tcss``."""
