"""How a source runs: served over stdio or HTTP (serve), ending with its client (lifeline), forked from
a fork server (forked), as a fleet on ports of its own (fleet) with its control routes (control)."""
