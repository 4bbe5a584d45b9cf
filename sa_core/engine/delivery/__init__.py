"""Messages reaching a thread: send, queue, inject, stop, terminate; effects that deliver later."""
