"""What is measured: the simulated vLLM server (``sim``: the embedded default and the
test double whose truth is known) and real vLLM servers started and watched
(``launch``). The generator reaches either only over HTTP."""
