"""The ``toolshim`` command line: thin commands that build library objects and call them."""
