"""innotier tuner: the CLI, the server model, sandbox servers, the TPC-C workload and sweeps."""

__version__ = "0.1.0"
