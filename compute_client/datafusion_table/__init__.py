"""DataFusion tables on flight-select servers; the public entry is
:mod:`compute_client.datafusion_source`."""
