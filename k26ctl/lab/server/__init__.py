"""The CPU stand-in for SGLang: a tiny torch decoder behind SGLang's HTTP API, with DFlash/DDTree
speculative decoding that breaks through the same mask-indexing bug (see `sglang_tree/`)."""
