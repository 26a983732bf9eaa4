"""The kernel: what every other package of innotier builds on, importing nothing else of the project.

errors (the one error hierarchy), durable (crash-safe writes), units (sizes, page sizes, durations),
paths (INNOTIER_HOME and the folders under it), probe (mounts, O_DIRECT and DAX of the host),
server (the server model and how to reach a server), optionfile (0600 client option files),
sandbox (private servers), measure (the measurement object), phases (the sweep phases),
cliutil (the argparse helpers every CLI module shares).
"""
