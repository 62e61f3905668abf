"""The simulated engine (a stand-in for ``vllm serve``) and the engine part of scenarios."""
