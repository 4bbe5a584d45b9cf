"""The thread engine: turn loop, context assembly, stop evaluation, tool dispatch, composition."""
