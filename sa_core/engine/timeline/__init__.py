"""Time travel on a thread: where a history is cut, fork and rewind."""
