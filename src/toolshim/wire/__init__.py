"""Wire formats: how core types are read from and written to the OpenAI JSON shapes."""
