"""The simulated world, apart from governed code: the world double and its fault schedule, the
policy double, the fault lab, crash points, the effect explorer, routing evaluation, demo set-up."""
