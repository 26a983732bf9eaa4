"""The built-in TPC-C workload: schema, loader, one module per transaction, driver, checks, adapters."""
