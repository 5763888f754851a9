"""Course 5 debugging tools: failure taxonomy, first-divergence finder, reducer, timing regions, planted bugs."""
