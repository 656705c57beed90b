"""Storage and catalog: buckets, objects and their byte sources, never outside the data root."""
