"""One run: settings, user lanes, run phases, executors, records writer, live view."""
