"""Planning and execution: translate, plan partitions, run them on DataFusion (with the UDFs)."""
