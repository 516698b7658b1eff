"""Starting and watching vLLM servers: specs, processes, health."""
