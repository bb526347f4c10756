"""The Arrow Flight SQL service of ``arrowgate serve`` (a front end on the core).

:class:`gateway.flight.server.FlightSqlServer` serves one gateway; docs/flight.md
describes what clients see. It is a front end: it uses the core, the shadow layer
(its store, for the served verdicts) and the capture (what clients sent); the core
and the subsystems never import it, and of the front ends only ``arrowgate serve``
launches it.
"""
