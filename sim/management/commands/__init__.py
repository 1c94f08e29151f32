"""Commands of the simulated world: seed_demo, faultlab, explore_effects, replay,
render_docs, routing_eval."""
