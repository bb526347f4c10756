"""The Arrow Flight SQL service of ``arrowgate serve`` (a front end on the core).

:class:`gateway.flight.server.FlightSqlServer` serves one gateway; docs/flight.md
describes what clients see. The core never imports this package.
"""
