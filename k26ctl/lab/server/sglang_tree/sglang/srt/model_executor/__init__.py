"""Forward-batch description shared by the model runner and the attention backend."""
